//! `cargo xtask stress [--kills N] [--steps N] [--release] [--backend B]`: the kill -9 crash
//! test of `ishiki-core` at scale (SEC-4, PRJ-13). CI runs the same test with its short
//! defaults (50 kill points, 20 with the object store); this runs it with 1,000 kill points
//! over a session of at least 100 committed steps and prints the figures: kill points, steps,
//! facts and deliveries checked, artifact/asset URLs read back, double deliveries, lost
//! commits and unreadable URLs (all three must be 0), and the duration.
//!
//! `--backend` picks the stores: `sqlite` (the default: SQLite history and files in the state
//! directory), `postgres` (PostgreSQL history, files in the state directory) or
//! `postgres-objects` (PostgreSQL history, artifacts and assets in an S3 bucket on moto).

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The tests that kill and reopen sessions (`crates/ishiki-core/tests/suite/crash.rs`), by
/// `--backend`.
const TESTS: &[(&str, &str)] = &[
    (
        "sqlite",
        "suite::crash::sec4_killed_sessions_reopen_consistent",
    ),
    (
        "postgres",
        "suite::crash::sec4_killed_postgres_sessions_reopen_consistent",
    ),
    (
        "postgres-objects",
        "suite::crash::sec4_killed_postgres_and_object_store_sessions_reopen_consistent",
    ),
];

/// Runs the crash test with `args` (`--kills N`, `--steps N`, `--release`).
pub(crate) fn stress(args: &[String]) -> Result<(), String> {
    let mut kills = 1_000_u64;
    let mut steps = 100_u64;
    let mut release = false;
    let mut test = TESTS[0].1;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            rest.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a whole number"))
        };
        match arg.as_str() {
            "--kills" => kills = number("--kills")?,
            "--steps" => steps = number("--steps")?,
            "--release" => release = true,
            "--backend" => {
                let name = rest.next().map(String::as_str).unwrap_or_default();
                test = TESTS
                    .iter()
                    .find(|(backend, _)| *backend == name)
                    .map(|(_, test)| *test)
                    .ok_or_else(|| {
                        format!("--backend `{name}`: use sqlite, postgres or postgres-objects")
                    })?;
            }
            other => {
                return Err(format!(
                    "unknown stress option `{other}` (use --kills N, --steps N, --release, --backend B)"
                ));
            }
        }
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command.args(["test", "-p", "ishiki-core", "--test", "all"]);
    if release {
        command.arg("--release");
    }
    command
        .args(["--", test, "--exact", "--nocapture", "--test-threads=1"])
        .env("ISHIKI_STRESS_KILLS", kills.to_string())
        .env("ISHIKI_STRESS_STEPS", steps.to_string())
        .env("INSTA_UPDATE", "no")
        // A missing PostgreSQL fails the run (and is installed when root), never a skip.
        .env("ISHIKI_REQUIRE_ENGINES", "1")
        .stderr(Stdio::piped());
    eprintln!(
        "$ ISHIKI_STRESS_KILLS={kills} ISHIKI_STRESS_STEPS={steps} cargo test -p ishiki-core --test all{} -- {test} --exact --nocapture",
        if release { " --release" } else { "" }
    );
    let started = Instant::now();
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    // Pass stderr through, keeping the test's summary line.
    let mut summary = None;
    if let Some(stderr) = child.stderr.take() {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("{line}");
            if line.starts_with("crash summary: ") {
                summary = Some(line);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("cannot wait for cargo: {e}"))?;
    let elapsed = started.elapsed();
    let summary = summary.unwrap_or_else(|| "crash summary: none printed".to_owned());
    println!(
        "{summary}; {:.1} s in all (build included)",
        elapsed.as_secs_f64()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!("the crash test failed ({status})"))
    }
}
