//! Guards that keep every crate pickable on its own (run by `cargo xtask ci`).
//!
//! CI otherwise builds only `--workspace --all-features`, where feature unification hides a
//! crate that does not build alone. These checks build each library crate by itself, once with
//! its default features and once with none, and package every publishable crate. They are
//! `cargo check`s and `cargo package --no-verify`, not test runs, so CI stays short. The
//! layering rules and the export snapshots are ordinary tests in `tidy.rs`.

use std::path::Path;

use crate::{cargo, workspace_root};

/// The library crates under `crates/`: every directory with a `src/lib.rs`, by package name.
pub(crate) fn library_crates(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("crates"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("src/lib.rs").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Whether a manifest turns on any feature by default (otherwise `--no-default-features`
/// builds exactly what the default build does, and checking it twice only costs time).
fn has_default_features(manifest: &str) -> bool {
    manifest.lines().map(str::trim).any(|line| {
        line.strip_prefix("default")
            .map(str::trim_start)
            .and_then(|rest| rest.strip_prefix('='))
            .is_some_and(|value| value.trim() != "[]")
    })
}

/// `cargo check -p CRATE` alone, with default features and with `--no-default-features`.
pub(crate) fn check_alone() -> Result<(), String> {
    let root = workspace_root();
    for name in library_crates(&root) {
        cargo(&["check", "--quiet", "-p", &name], &[])?;
        let manifest = std::fs::read_to_string(root.join("crates").join(&name).join("Cargo.toml"))
            .unwrap_or_default();
        if has_default_features(&manifest) {
            cargo(
                &["check", "--quiet", "-p", &name, "--no-default-features"],
                &[],
            )?;
        }
    }
    Ok(())
}

/// Every publishable crate packages (manifest, readme, license files, path dependencies with
/// versions). `--no-verify`: building the packaged sources again would double CI's build time,
/// and `check_alone` already builds each crate by itself.
pub(crate) fn package() -> Result<(), String> {
    cargo(
        &[
            "package",
            "--workspace",
            "--no-verify",
            "--allow-dirty",
            "--quiet",
        ],
        &[],
    )
}

#[cfg(test)]
mod tests {
    use super::has_default_features;

    #[test]
    fn default_features_are_read_from_the_manifest() {
        assert!(!has_default_features(
            "[features]\ndefault = []\nhttp = [\"dep:x\"]\n"
        ));
        assert!(has_default_features("[features]\ndefault = [\"http\"]\n"));
        assert!(!has_default_features("[package]\nname = \"x\"\n"));
    }
}
