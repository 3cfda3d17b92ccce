//! Tidy checks that run as ordinary tests, so a green `cargo test` predicts a green CI.
//!
//! - every Rust module starts with a `//!` doc comment;
//! - no test is ignored or expected to panic (a panic is never the contract).

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn workspace_root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') && name != "snapshots" {
                    rust_files(&path, out);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }

    fn all_sources() -> Vec<PathBuf> {
        let root = workspace_root();
        let mut files = Vec::new();
        rust_files(&root.join("crates"), &mut files);
        rust_files(&root.join("xtask"), &mut files);
        files.sort();
        files
    }

    #[test]
    fn every_module_starts_with_a_doc_comment() {
        let mut missing = Vec::new();
        for file in all_sources() {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let first = text
                .lines()
                .find(|l| !l.trim().is_empty() && !l.starts_with("#!["));
            if !first.is_some_and(|l| l.starts_with("//!")) {
                missing.push(file.display().to_string());
            }
        }
        assert!(
            missing.is_empty(),
            "modules without a `//!` doc: {missing:#?}"
        );
    }

    #[test]
    fn no_ignored_or_should_panic_tests() {
        let ignore = ["#[", "ignore]"].concat();
        let should_panic = ["#[", "should_panic"].concat();
        let mut offenders = Vec::new();
        for file in all_sources() {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if text.contains(&ignore) || text.contains(&should_panic) {
                offenders.push(file.display().to_string());
            }
        }
        assert!(
            offenders.is_empty(),
            "ignored or should_panic tests: {offenders:#?}"
        );
    }
}
