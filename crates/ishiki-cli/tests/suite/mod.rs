//! The suites: every example scenario end to end, and the runner's error exits.

mod chat;
mod errors;
mod examples;
mod limits;
mod semantic;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The repository root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Output of one `ishiki scenario run`.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) fn run(file: &Path, extra: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_ishiki"))
        .arg("scenario")
        .arg("run")
        .arg(file)
        .args(extra)
        .output()
        .expect("the ishiki binary runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

pub(crate) fn events(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("every transcript line is JSON"))
        .collect()
}
