//! SEC-1: thousands of consecutive programs leave the host's memory where it was.
//!
//! The measurement runs in a child process (this test binary, filtered to one test), so the
//! other tests running in parallel threads cannot disturb its RSS. Programs run in-process
//! here — the strictest case, since every engine is built and dropped inside the measured
//! process. 2 000 keep the suite fast in debug builds; the bench runs the full 10 000
//! through worker processes and reports the growth.

use super::support::{echo, in_process, limits};
use serde_json::json;

const CHILD: &str = "ISHIKI_CODEMODE_MEMORY_CHILD";
const PROGRAMS: usize = 2_000;
const WARMUP: usize = 300;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// The measurement itself, in the test's own binary run again with [`CHILD`] set, so that
/// nothing else in the process moves its memory.
#[expect(
    clippy::print_stdout,
    reason = "a test's child process: it fails and reports as its test would"
)]
async fn memory_probe() {
    // A small stack: each program's thread reserves it, and nothing here recurses deeply.
    let sandbox = in_process(ishiki_codemode::Limits {
        stack_bytes: 8 << 20,
        ..limits()
    });
    let mut before = 0;
    for i in 0..WARMUP + PROGRAMS {
        if i == WARMUP {
            before = rss_kib();
        }
        let outcome = sandbox
            .run(
                "const r = await tools.echo({ n: [1, 2, 3] }); console.log('n'); return { sum: r.n.reduce((a, b) => a + b) }",
                vec![echo()],
            )
            .await
            .expect("small program");
        assert_eq!(outcome.value, json!({ "sum": 6 }));
    }
    let after = rss_kib();
    println!("RSS {before} {after}");
}

#[test]
fn sec1_thousands_of_programs_keep_host_memory_flat() {
    if std::env::var_os(CHILD).is_some() {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(memory_probe());
    }
    if !std::path::Path::new("/proc/self/status").exists() {
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "suite::memory::sec1_thousands_of_programs_keep_host_memory_flat",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .expect("child runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("RSS ").map(|(_, figures)| figures))
        .expect("RSS line");
    let mut figures = line
        .split_whitespace()
        .map(|v| v.parse::<f64>().expect("number"));
    let (before, after) = (
        figures.next().expect("before"),
        figures.next().expect("after"),
    );
    let growth = (after - before) / before;
    assert!(
        growth < 0.10,
        "host RSS grew {:.1} % ({before} → {after} KiB)",
        growth * 100.0
    );
}
