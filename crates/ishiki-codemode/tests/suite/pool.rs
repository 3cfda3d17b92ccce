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
    assert_eq!(order.matches('s').count(), order.matches('e').count());
    assert!(order.matches('s').count() >= 3, "starts: {order}");
}
