//! `cargo xtask search-eval`: the retrieval table over the MCP corpus (Ishiki lexical, Ishiki
//! hybrid when `cargo xtask tools` put the model in `.tools/`, plain BM25; both query halves; per class). Runs the
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
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let model = root.join(".tools").join(crate::model::MODEL_DIR);
    if model.join("model.safetensors").is_file() {
        args.extend(["--features".to_owned(), "semantic".to_owned()]);
    } else {
        eprintln!(
            "no model in {}: hybrid not measured (run `cargo xtask tools`)",
            model.display()
        );
    }
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
