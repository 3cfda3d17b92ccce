//! The warm pool under a burst (issue 26): programs that arrive together are served by workers
//! started side by side, not one after another.

use ishiki_codemode::{Sandbox, SandboxConfig, WorkerSpawn};

use super::support::{limits, worker_path};

/// A worker that writes `s` to `log` when it starts and `e` when it is about to become the real
/// worker, a little later: the log's order shows whether starts overlapped.
fn logging_worker(dir: &std::path::Path, log: &std::path::Path) -> std::path::PathBuf {
    let script = dir.join("worker.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho s >> '{log}'\n/bin/sleep 0.3\necho e >> '{log}'\nexec '{worker}'\n",
            log = log.display(),
            worker = worker_path().display(),
        ),
    )
    .expect("the script");
    let mut permissions = std::fs::metadata(&script).expect("metadata").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&script, permissions).expect("executable");
    script
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_programs_starts_workers_side_by_side() {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let dir = tempfile::tempdir().expect("a directory");
    let log = dir.path().join("starts.log");
    let sandbox = Sandbox::new(SandboxConfig {
        worker: WorkerSpawn::Program(logging_worker(dir.path(), &log)),
        limits: limits(),
        prespawn: 1,
        // The log counts process starts: executed workers (forked ones start no program).
        fork_server: false,
        ..SandboxConfig::default()
    });
    let runs: Vec<_> = (0..3)
        .map(|n| {
            let sandbox = sandbox.clone();
            tokio::spawn(async move { sandbox.run(&format!("return {n}"), vec![]).await })
        })
        .collect();
    for (n, run) in runs.into_iter().enumerate() {
        let outcome = run.await.expect("no panic").expect("the program runs");
        assert_eq!(outcome.value, serde_json::json!(n));
    }
    let order: String = std::fs::read_to_string(&log)
        .expect("the log")
        .split_whitespace()
        .collect();
    // One worker was starting when the burst came (the warm pool of one); the waiting
    // programs started a second beside it at once (as many as there are cores, here two).
    // One after another, the log would begin `se`.
    if cores >= 2 {
        assert!(order.starts_with("ss"), "starts: {order}");
    }
    // The pool refills after each program, so a start may still be under way (its `e` not
    // yet written) when the log is read.
    assert!(order.matches('e').count() >= 3, "starts: {order}");
}

/// More programs than workers may start at once, with no warm pool: each still gets its worker
/// (a start that ends starts the next for whoever still waits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_larger_than_the_starts_allowed_at_once_is_served_in_full() {
    let sandbox = Sandbox::new(SandboxConfig {
        worker: WorkerSpawn::Program(worker_path()),
        limits: limits(),
        prespawn: 0,
        ..SandboxConfig::default()
    });
    let runs: Vec<_> = (0..12)
        .map(|n| {
            let sandbox = sandbox.clone();
            tokio::spawn(async move { sandbox.run(&format!("return {n}"), vec![]).await })
        })
        .collect();
    for (n, run) in runs.into_iter().enumerate() {
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(60), run)
            .await
            .expect("every program gets a worker")
            .expect("no panic")
            .expect("the program runs");
        assert_eq!(outcome.value, serde_json::json!(n));
    }
}

/// A worker program that cannot start fails every waiting program with its reason, and none
/// waits forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_cannot_start_fails_every_waiting_program() {
    let sandbox = Sandbox::new(SandboxConfig {
        worker: WorkerSpawn::Program("/nonexistent/worker".into()),
        limits: limits(),
        prespawn: 0,
        ..SandboxConfig::default()
    });
    let runs: Vec<_> = (0..6)
        .map(|_| {
            let sandbox = sandbox.clone();
            tokio::spawn(async move { sandbox.run("return 1", vec![]).await })
        })
        .collect();
    for run in runs {
        let error = tokio::time::timeout(std::time::Duration::from_secs(60), run)
            .await
            .expect("no program waits forever")
            .expect("no panic")
            .expect_err("no worker");
        assert!(
            error.message().contains("/nonexistent/worker"),
            "{}",
            error.message()
        );
    }
}
