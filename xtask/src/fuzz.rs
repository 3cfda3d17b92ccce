//! `cargo xtask fuzz [--time S] [--runs N] [TARGET…]`: runs every cargo-fuzz target in `fuzz/`
//! for `S` seconds each (default 60) or until it has executed `N` inputs, whichever comes
//! first (`--runs` alone lifts the time limit), and prints executions and findings per target.
//!
//! The machine has stable Rust only; cargo-fuzz passes nightly-only flags, so the runs set
//! `RUSTC_BOOTSTRAP=1`. Targets build without a sanitizer (`--sanitizer none`): the code under
//! test is safe Rust, and the builds are several times faster. Each target starts from its
//! committed seeds (`fuzz/seeds/<target>`, from the tests) and keeps its growing corpus in the
//! git-ignored `fuzz/corpus/<target>`; findings land in `fuzz/artifacts/<target>`.
//! Fuzzing is not part of `cargo xtask ci` (time). Install the driver once with
//! `cargo install cargo-fuzz --locked`; run under `nice -n 19` on a shared machine.

use std::path::Path;
use std::process::Command;

/// Every fuzz target, in the order they run.
const TARGETS: [&str; 8] = [
    "text_protocol",
    "resource_url",
    "outlet_pager",
    "profile_yaml",
    "scenario_yaml",
    "send_message_markup",
    "provider_sse",
    "mcp_result",
];

/// When a run stops: after `seconds`, after `runs` executions, or at the first of both.
#[derive(Clone, Copy)]
struct Limit {
    seconds: Option<u64>,
    runs: Option<u64>,
}

/// What one run found.
struct Outcome {
    target: &'static str,
    execs: Option<u64>,
    seconds: f64,
    findings: usize,
    status: String,
}

pub(crate) fn fuzz(args: &[String]) -> Result<(), String> {
    let mut seconds = None;
    let mut runs = None;
    let mut chosen = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--time" => {
                seconds = Some(
                    rest.next()
                        .and_then(|s| s.parse::<u64>().ok())
                        .filter(|&s| s > 0)
                        .ok_or("--time needs a whole number of seconds above 0")?,
                );
            }
            "--runs" => {
                runs = Some(
                    rest.next()
                        .and_then(|s| s.replace('_', "").parse::<u64>().ok())
                        .filter(|&n| n > 0)
                        .ok_or("--runs needs a whole number of executions above 0")?,
                );
            }
            name => match TARGETS.iter().find(|t| **t == name) {
                Some(target) => chosen.push(*target),
                None => {
                    return Err(format!(
                        "unknown fuzz target `{name}` (targets: {})",
                        TARGETS.join(", ")
                    ));
                }
            },
        }
    }
    if chosen.is_empty() {
        chosen = TARGETS.to_vec();
    }
    let fuzz_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let installed = Command::new(&cargo)
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        return Err("cargo-fuzz is not installed: run `cargo install cargo-fuzz --locked`".into());
    }
    // Build every target first, so a run's seconds are fuzzing, not compiling.
    eprintln!("$ cargo fuzz build --sanitizer none");
    let built = Command::new(&cargo)
        .current_dir(&fuzz_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["fuzz", "build", "--sanitizer", "none"])
        .status()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    if !built.success() {
        return Err(format!("`cargo fuzz build` failed ({built})"));
    }
    let limit = Limit {
        seconds: seconds.or(if runs.is_some() { None } else { Some(60) }),
        runs,
    };
    let mut outcomes = Vec::new();
    for target in chosen {
        outcomes.push(run(&cargo, &fuzz_dir, target, limit)?);
    }
    println!(
        "{:<16} {:>14} {:>9} {:>9}  status",
        "target", "execs", "seconds", "findings"
    );
    for o in &outcomes {
        let execs = o.execs.map_or_else(|| "?".to_owned(), |n| n.to_string());
        println!(
            "{:<16} {:>14} {:>9.0} {:>9}  {}",
            o.target, execs, o.seconds, o.findings, o.status
        );
    }
    let found: usize = outcomes.iter().map(|o| o.findings).sum();
    if found > 0 {
        return Err(format!(
            "{found} finding(s): see fuzz/artifacts/<target>/ and turn each into a regression test"
        ));
    }
    Ok(())
}

fn run(
    cargo: &str,
    fuzz_dir: &Path,
    target: &'static str,
    limit: Limit,
) -> Result<Outcome, String> {
    let corpus = fuzz_dir.join("corpus").join(target);
    let seeds = fuzz_dir.join("seeds").join(target);
    let artifacts = fuzz_dir.join("artifacts").join(target);
    for dir in [&corpus, &artifacts] {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let before = findings(&artifacts);
    let mut stop = Vec::new();
    if let Some(seconds) = limit.seconds {
        stop.push(format!("-max_total_time={seconds}"));
    }
    if let Some(runs) = limit.runs {
        stop.push(format!("-runs={runs}"));
    }
    eprintln!("$ cargo fuzz run {target} -- {}", stop.join(" "));
    let started = std::time::Instant::now();
    let output = Command::new(cargo)
        .current_dir(fuzz_dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["fuzz", "run", "--sanitizer", "none", target])
        .arg(&corpus)
        .arg(&seeds)
        .arg("--")
        .args(&stop)
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .args(["-print_final_stats=1", "-timeout=10", "-rss_limit_mb=2048"])
        .output()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    let seconds = started.elapsed().as_secs_f64();
    let log = String::from_utf8_lossy(&output.stderr);
    // The whole libFuzzer log stays beside the corpus (git-ignored), so a run stopped later
    // still has this target's figures.
    let logs = fuzz_dir.join("logs");
    let _ = std::fs::create_dir_all(&logs);
    let _ = std::fs::write(logs.join(format!("{target}.log")), log.as_bytes());
    let execs = log.lines().rev().find_map(|l| {
        l.strip_prefix("stat::number_of_executed_units:")
            .and_then(|n| n.trim().parse::<u64>().ok())
    });
    let findings = findings(&artifacts).saturating_sub(before);
    let status = if output.status.success() {
        "ok".to_owned()
    } else if findings > 0 {
        "found a crash".to_owned()
    } else {
        let tail: Vec<&str> = log.lines().rev().take(15).collect();
        eprintln!("{}", tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        return Err(format!(
            "`cargo fuzz run {target}` failed ({})",
            output.status
        ));
    };
    eprintln!(
        "{target}: {} executions in {seconds:.0} s, {findings} finding(s), {status}",
        execs.map_or_else(|| "?".to_owned(), |n| n.to_string())
    );
    Ok(Outcome {
        target,
        execs,
        seconds,
        findings,
        status,
    })
}

/// How many findings (crash, leak, timeout or out-of-memory inputs) are in `dir`.
fn findings(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                ["crash-", "leak-", "timeout-", "oom-", "slow-unit-"]
                    .iter()
                    .any(|p| name.starts_with(p))
            })
            .count()
    })
}
