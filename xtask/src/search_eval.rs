//! `cargo xtask search-eval`: the retrieval table over the MCP corpus (Ishiki lexical, Ishiki
//! hybrid when the model is in `.tools/`, plain BM25; both query halves; per class). Runs the
//! `search_eval` example of `ishiki-toolsearch` in release mode; extra arguments go to it.

use std::process::Command;

/// Runs the evaluation and lets its table through to stdout.
pub(crate) fn run(extra: &[String]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut args: Vec<String> = [
        "run",
        "--release",
        "--quiet",
        "-p",
        "ishiki-toolsearch",
        "--example",
        "search_eval",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    args.push("--".to_owned());
    args.extend(extra.iter().cloned());
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .args(&args)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("search evaluation failed ({status})"))
    }
}
