//! Guards that keep every crate pickable on its own (run by `cargo xtask ci`).
//!
//! CI otherwise builds only `--workspace --all-features`, where feature unification hides a
//! crate that does not build alone. These checks build each library crate by itself: the
//! library with its default features (as a dependent gets it: a crate's dev-dependency on
//! itself turns test features on for every target), every target with them (lib, tests,
//! benches, examples: so `cargo test -p CRATE` compiles on a clean checkout, which unification
//! once hid for `ishiki-postgres`), and the library with no features when it has default ones;
//! and they package every publishable crate. They are
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

/// `cargo check -p CRATE` and `cargo check -p CRATE --all-targets` alone, and the library with
/// `--no-default-features`.
pub(crate) fn check_alone() -> Result<(), String> {
    let root = workspace_root();
    for name in library_crates(&root) {
        let start = std::time::Instant::now();
        // The library as a dependent gets it (no dev-dependency features), then every target.
        cargo(&["check", "--quiet", "-p", &name], &[])?;
        cargo(&["check", "--quiet", "-p", &name, "--all-targets"], &[])?;
        let manifest = std::fs::read_to_string(root.join("crates").join(&name).join("Cargo.toml"))
            .unwrap_or_default();
        if has_default_features(&manifest) {
            cargo(
                &["check", "--quiet", "-p", &name, "--no-default-features"],
                &[],
            )?;
        }
        eprintln!("  {name} alone: {} s", start.elapsed().as_secs());
    }
    Ok(())
}

/// Features `cargo xtask ci` leaves out of its workspace build, with the reason. The rest of
/// every crate's features are built and tested (`ci_features`). Empty since toolsearch's
/// `semantic` feature lost candle (its forward pass is plain Rust; `cargo xtask tools` fetches
/// its model), so CI builds and tests every feature.
const NOT_IN_CI: &[(&str, &str, &str)] = &[];

/// The names under a manifest's `[features]` table, `default` excepted.
fn feature_names(manifest: &str) -> Vec<String> {
    let mut in_features = false;
    let mut names = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_features = line == "[features]";
            continue;
        }
        if !in_features || line.starts_with('#') {
            continue;
        }
        if let Some((name, _)) = line.split_once('=') {
            let name = name.trim();
            if !name.is_empty() && name != "default" {
                names.push(name.to_owned());
            }
        }
    }
    names
}

/// `--features crate/feature,…`: every feature of every workspace crate but those
/// [`NOT_IN_CI`] names, so CI builds what `--all-features` would, minus those.
pub(crate) fn ci_features() -> String {
    let root = workspace_root();
    let mut all = Vec::new();
    for name in library_crates(&root) {
        let manifest = std::fs::read_to_string(root.join("crates").join(&name).join("Cargo.toml"))
            .unwrap_or_default();
        for feature in feature_names(&manifest) {
            if !NOT_IN_CI
                .iter()
                .any(|(c, f, _)| *c == name && *f == feature)
            {
                all.push(format!("{name}/{feature}"));
            }
        }
    }
    all.join(",")
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
    fn feature_names_skip_default_and_comments() {
        let manifest = "[package]\nname = \"x\"\n[features]\ndefault = []\n# why\nhttp = [\"dep:r\"]\nsemantic = []\n[dependencies]\nr = \"1\"\n";
        assert_eq!(super::feature_names(manifest), ["http", "semantic"]);
    }

    #[test]
    fn ci_builds_every_feature_but_the_listed_ones() {
        let features = super::ci_features();
        assert!(features.contains("ishiki-resources/http"), "{features}");
        assert!(
            features.contains("ishiki-toolsearch/semantic"),
            "{features}"
        );
        // The binary ships the hybrid ranker (issue 27): core's switch for it is tested too.
        assert!(features.contains("ishiki-core/semantic"), "{features}");
    }

    #[test]
    fn default_features_are_read_from_the_manifest() {
        assert!(!has_default_features(
            "[features]\ndefault = []\nhttp = [\"dep:x\"]\n"
        ));
        assert!(has_default_features("[features]\ndefault = [\"http\"]\n"));
        assert!(!has_default_features("[package]\nname = \"x\"\n"));
    }
}
