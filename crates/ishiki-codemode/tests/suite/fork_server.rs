//! Workers forked by the sandbox's fork server (issue 26): what a program sees is the same as
//! in an executed worker, a server that dies is started again, and a binary that cannot serve
//! forks still gets its programs run (executed).

#![cfg(target_os = "linux")]

use ishiki_codemode::{Sandbox, SandboxConfig, WorkerSpawn};

use super::support::{limits, sandbox, worker_path};

/// A worker program that writes its pid to `log` and then becomes the real worker binary;
/// with `refuse`, it exits at once when started as a fork server (as a binary built before
/// the fork server would not serve forks).
fn script(dir: &std::path::Path, log: &std::path::Path, refuse: bool) -> std::path::PathBuf {
    let path = dir.join("worker.sh");
    let refuse = if refuse {
        "[ -n \"$ISHIKI_CODEMODE_ZYGOTE\" ] && exit 0\n"
    } else {
        ""
    };
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n{refuse}echo $$ >> '{log}'\nexec '{worker}'\n",
            log = log.display(),
            worker = worker_path().display(),
        ),
    )
    .expect("the script");
    let mut permissions = std::fs::metadata(&path).expect("metadata").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    std::fs::set_permissions(&path, permissions).expect("executable");
    path
}

fn config(worker: std::path::PathBuf) -> SandboxConfig {
    SandboxConfig {
        worker: WorkerSpawn::Program(worker),
        limits: limits(),
        prespawn: 1,
        ..SandboxConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_are_forked_confined_and_fresh_for_each_program() {
    let sandbox = sandbox(limits());
    // A program that leaves traces in its realm, and one after it that looks for them.
    let first = sandbox
        .run(
            "globalThis.left = 1; Object.prototype.polluted = true; Array.prototype.push = null; return Math.random();",
            vec![],
        )
        .await
        .expect("the first program runs");
    assert_eq!(
        sandbox.worker_start().as_deref(),
        Some("forked by the sandbox's fork server")
    );
    let second = sandbox
        .run(
            "const seen = [typeof globalThis.left, ({}).polluted, typeof [].push]; return { seen, random: Math.random() };",
            vec![],
        )
        .await
        .expect("the second program runs");
    assert_eq!(
        second.value["seen"],
        serde_json::json!(["undefined", null, "function"]),
        "each program gets a pristine realm"
    );
    assert_eq!(
        second.value["random"], first.value,
        "each forked engine starts from the configured seed, as an executed one does"
    );
    // A forked worker confines itself exactly as an executed one does.
    let report = sandbox.confinement().expect("a report");
    let executed = Sandbox::new(SandboxConfig {
        fork_server: false,
        ..config(worker_path())
    });
    executed.run("return 1", vec![]).await.expect("runs");
    assert_eq!(
        executed.worker_start().as_deref(),
        Some("executed (fork server: off in the configuration)")
    );
    let names = |r: &ishiki_codemode::ConfinementReport| {
        r.layers
            .iter()
            .map(|l| (l.name.clone(), l.enforced))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(&report),
        names(&executed.confinement().expect("a report"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_server_that_died_is_started_again() {
    let dir = tempfile::tempdir().expect("a directory");
    let log = dir.path().join("servers.log");
    let sandbox = Sandbox::new(config(script(dir.path(), &log, false)));
    sandbox.run("return 1", vec![]).await.expect("runs");
    let pids = |log: &std::path::Path| -> Vec<i32> {
        std::fs::read_to_string(log)
            .expect("the log")
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    let servers = pids(&log);
    assert_eq!(servers.len(), 1, "one fork server serves every worker");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &servers[0].to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    // The warm worker it forked ends with it (within the orphan watch's 50 ms); the next
    // programs get a new server's workers.
    std::thread::sleep(std::time::Duration::from_millis(300));
    for n in 0..3 {
        let outcome = sandbox
            .run(&format!("return {n}"), vec![])
            .await
            .expect("runs after the server died");
        assert_eq!(outcome.value, serde_json::json!(n));
    }
    assert_eq!(pids(&log).len(), 2, "the server was started again, once");
    assert_eq!(
        sandbox.worker_start().as_deref(),
        Some("forked by the sandbox's fork server")
    );
}

/// A server serves a bounded number of forks (its workers share its memory layout), then a
/// freshly executed one takes over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_server_is_replaced_after_its_share_of_forks() {
    let dir = tempfile::tempdir().expect("a directory");
    let log = dir.path().join("servers.log");
    let sandbox = Sandbox::new(SandboxConfig {
        prespawn: 0,
        ..config(script(dir.path(), &log, false))
    });
    // 64 forks per server: the 65th program is forked by a second server.
    for n in 0..70 {
        let outcome = sandbox
            .run(&format!("return {n}"), vec![])
            .await
            .expect("runs");
        assert_eq!(outcome.value, serde_json::json!(n));
    }
    let servers = std::fs::read_to_string(&log).expect("the log");
    assert_eq!(servers.lines().count(), 2, "{servers}");
    assert_eq!(
        sandbox.worker_start().as_deref(),
        Some("forked by the sandbox's fork server")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binary_that_cannot_serve_forks_gets_its_workers_executed() {
    let dir = tempfile::tempdir().expect("a directory");
    let log = dir.path().join("workers.log");
    let sandbox = Sandbox::new(config(script(dir.path(), &log, true)));
    for n in 0..3 {
        let outcome = sandbox
            .run(&format!("return {n}"), vec![])
            .await
            .expect("runs, executed");
        assert_eq!(outcome.value, serde_json::json!(n));
    }
    let start = sandbox.worker_start().unwrap_or_default();
    assert!(
        start.starts_with("executed (fork server: ")
            && start.contains("did not start as a fork server"),
        "{start}"
    );
    let executed = std::fs::read_to_string(&log).expect("the log");
    assert!(executed.lines().count() >= 3, "{executed}");
}
