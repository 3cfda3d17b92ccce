//! SEC-1: the hostile corpus ends with clear errors, the host survives, and the next program
//! runs normally. How fast each one ends is measured by the bench (no timed assertions here).

use super::support::{echo, limits, outcome, sandbox, worker_path};
use crate::corpus::corpus;
use std::sync::Arc;
use tokio::sync::Semaphore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec1_hostile_corpus_ends_cleanly_and_the_next_program_runs() {
    insta::assert_snapshot!(
        "sec1_hostile_corpus_ends_cleanly_and_the_next_program_runs",
        hostile_corpus(true).await
    );
}

/// The same corpus in executed workers (the fork server off, as when it cannot start): every
/// program ends the same way, word for word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sec1_hostile_corpus_ends_the_same_in_executed_workers() {
    insta::assert_snapshot!(
        "sec1_hostile_corpus_ends_cleanly_and_the_next_program_runs",
        hostile_corpus(false).await
    );
}

async fn hostile_corpus(fork_server: bool) -> String {
    // Spinning programs end on the instruction budget; the timeout is long enough that a
    // loaded machine does not turn those into timeouts and change the snapshot (10 s was not:
    // `calls_without_await_caught` hit it while a parallel build loaded both cores). No
    // program of the corpus is meant to end on the wall clock.
    let limits = ishiki_codemode::Limits {
        timeout: std::time::Duration::from_secs(60),
        ..limits()
    };
    // A liveness guard only: a hang fails the test instead of stalling CI.
    let guard = limits.timeout * 3;
    let sandbox = if fork_server {
        sandbox(limits)
    } else {
        ishiki_codemode::Sandbox::new(ishiki_codemode::SandboxConfig {
            worker: ishiki_codemode::WorkerSpawn::Program(worker_path()),
            limits,
            clock_ms: 1_700_000_000_000,
            random_seed: 7,
            prespawn: 1,
            fork_server: false,
        })
    };
    // A few at a time: memory bombs really touch their memory.
    let slots = Arc::new(Semaphore::new(3));
    let mut runs = tokio::task::JoinSet::new();
    let programs = corpus();
    assert!(programs.len() >= 20);
    for (name, code) in programs {
        let sandbox = sandbox.clone();
        let slots = Arc::clone(&slots);
        runs.spawn(async move {
            let _slot = slots.acquire_owned().await.expect("semaphore");
            let result = tokio::time::timeout(guard, outcome(&sandbox, &code, vec![echo()]))
                .await
                .unwrap_or_else(|_| "HUNG".to_owned());
            let next = outcome(
                &sandbox,
                "const r = await tools.echo({ ok: 1 }); return r.ok",
                vec![echo()],
            )
            .await;
            (name, result, next)
        });
    }
    let mut lines = Vec::new();
    while let Some(joined) = runs.join_next().await {
        let (name, result, next) = joined.expect("task");
        assert_eq!(next, "ok 1", "the program after {name} must run normally");
        lines.push(format!("{name}: {result}"));
    }
    lines.sort();
    if fork_server {
        assert_eq!(
            sandbox.worker_start().as_deref(),
            Some("forked by the sandbox's fork server")
        );
    }
    lines.join("\n")
}
