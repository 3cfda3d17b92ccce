//! Tidy checks that run as ordinary tests, so a green `cargo test` predicts a green CI.
//!
//! - every Rust module starts with a `//!` doc comment;
//! - no test is ignored or expected to panic (a panic is never the contract);
//! - no source file under `crates/*/src` or `xtask/src` is longer than 800 lines, tests and
//!   generated data excepted (a file does one job; split it into modules named after theirs);
//! - the crate layering of ARCHITECTURE.md holds in every `Cargo.toml`;
//! - each library crate's root exports match `xtask/exports/<crate>.txt`, so a new `pub use`
//!   shows up in review (`UPDATE_EXPORTS=1 cargo test -p xtask` rewrites the files);
//! - every normal dependency of a crate is named in its sources (an unused one only costs
//!   build time and the crate's users);
//! - no `use super::*` outside test modules (a file shows what it depends on), and no module
//!   cycle among `ishiki-core`'s top-level modules (`CORE_CYCLES` would list one that must
//!   stay, with its reason; it is empty).

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

    /// The longest source file, in lines (issue 14: a file does one job).
    const MAX_SOURCE_LINES: usize = 800;

    /// Files still over the limit whose split belongs to another line of work (issue 14 left
    /// `signature.rs` to the toolsearch work of issue 17, which splits it into a directory).
    /// An entry whose file is within the limit fails the test until it is removed; an entry
    /// whose file is gone names nothing and is only dead weight (remove it too).
    const PENDING_SPLIT: &[&str] = &[];

    /// The lines of a source file that count against [`MAX_SOURCE_LINES`], or `None` for
    /// generated data. Tests are not counted: a `tests.rs` file counts nothing, and an inline
    /// test module (a top-level `#[cfg(test)]` line followed by `mod tests`) counts nothing
    /// from its `#[cfg(test)]` line on. Generated data says so with `@generated` in its first
    /// five lines (the marker rustfmt and code review tools recognise).
    fn counted_lines(name: &str, text: &str) -> Option<usize> {
        if text.lines().take(5).any(|l| l.contains("@generated")) {
            return None;
        }
        if name == "tests.rs" {
            return Some(0);
        }
        let lines: Vec<&str> = text.lines().collect();
        let tests_start = lines
            .windows(2)
            .position(|w| w[0] == "#[cfg(test)]" && w[1].starts_with("mod tests"));
        Some(tests_start.unwrap_or(lines.len()))
    }

    #[test]
    fn line_counting_leaves_out_tests_and_generated_data() {
        let code = "//! A module.\nfn a() {}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() {}\n}\n";
        assert_eq!(counted_lines("a.rs", code), Some(3));
        assert_eq!(counted_lines("tests.rs", code), Some(0));
        assert_eq!(counted_lines("a.rs", "//! A module.\nfn a() {}\n"), Some(2));
        // A `#[cfg(test)]` item that is not the test module counts.
        assert_eq!(
            counted_lines("a.rs", "//! A module.\n#[cfg(test)]\nfn helper() {}\n"),
            Some(3)
        );
        assert_eq!(
            counted_lines(
                "table.rs",
                "// @generated by xtask\nconst T: [u8; 1] = [0];\n"
            ),
            None
        );
    }

    #[test]
    fn no_source_file_is_over_800_lines() {
        let root = workspace_root();
        let mut files = Vec::new();
        if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
            for krate in crates.flatten() {
                rust_files(&krate.path().join("src"), &mut files);
            }
        }
        rust_files(&root.join("xtask/src"), &mut files);
        assert!(
            files
                .iter()
                .any(|f| f.ends_with("crates/ishiki-core/src/lib.rs")),
            "the walk found no sources under {}",
            root.display()
        );
        let mut too_long = Vec::new();
        let mut within = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let relative = file
                .strip_prefix(&root)
                .unwrap_or(file)
                .to_string_lossy()
                .replace('\\', "/");
            let Some(lines) = counted_lines(&name, &text) else {
                continue;
            };
            let over = lines > MAX_SOURCE_LINES;
            if PENDING_SPLIT.contains(&relative.as_str()) {
                if !over {
                    within.push(format!("{relative}: {lines} lines"));
                }
            } else if over {
                too_long.push(format!("{relative}: {lines} lines"));
            }
        }
        assert!(
            too_long.is_empty(),
            "source files over {MAX_SOURCE_LINES} lines (tests and generated data excepted); split them into modules named after their jobs: {too_long:#?}"
        );
        assert!(
            within.is_empty(),
            "PENDING_SPLIT names files that are no longer over {MAX_SOURCE_LINES} lines; remove them from the list: {within:#?}"
        );
    }

    /// Which `ishiki-*` crates each crate may depend on (normal and build dependencies):
    /// the capability crates depend on none of each other except outlet → resources; only
    /// core composes them; the crates on top build on core. A new crate must be added here.
    const LAYERS: &[(&str, &[&str])] = &[
        ("ishiki-model", &[]),
        ("ishiki-store", &[]),
        ("ishiki-resources", &[]),
        // The tool contract: a definition (toolsearch) and a display (outlet, and the
        // resources errors it converts), nothing of the runtime.
        (
            "ishiki-tool",
            &["ishiki-outlet", "ishiki-toolsearch", "ishiki-resources"],
        ),
        ("ishiki-outlet", &["ishiki-resources"]),
        ("ishiki-projection", &[]),
        ("ishiki-toolsearch", &[]),
        ("ishiki-codemode", &[]),
        ("ishiki-objects", &["ishiki-resources"]),
        (
            "ishiki-core",
            &[
                "ishiki-model",
                "ishiki-store",
                "ishiki-tool",
                "ishiki-resources",
                "ishiki-outlet",
                "ishiki-projection",
                "ishiki-toolsearch",
                "ishiki-codemode",
            ],
        ),
        // Core only with the `profile` feature (`McpServerConfig::from_profile`).
        ("ishiki-mcp", &["ishiki-tool", "ishiki-core"]),
        ("ishiki-provider", &["ishiki-model"]),
        ("ishiki-postgres", &["ishiki-store"]),
        (
            "ishiki-cli",
            &[
                "ishiki-core",
                "ishiki-mcp",
                "ishiki-provider",
                "ishiki-resources",
                "ishiki-toolsearch",
                "ishiki-codemode",
                "ishiki-postgres",
                "ishiki-objects",
            ],
        ),
    ];

    /// Each line of a manifest that is not a table header, trimmed, with the header of the
    /// table it stands in (`""` before the first).
    fn table_lines(manifest: &str) -> impl Iterator<Item = (&str, &str)> {
        let mut section = "";
        manifest.lines().map(str::trim).filter_map(move |line| {
            if line.starts_with('[') {
                section = line;
                return None;
            }
            Some((section, line))
        })
    }

    /// The name a dependency line starts with.
    fn dependency_name(line: &str) -> &str {
        line.split(['=', '.', ' ']).next().unwrap_or_default()
    }

    /// The `ishiki-*` names in a manifest's normal and build dependency tables.
    fn internal_dependencies(manifest: &str) -> Vec<String> {
        table_lines(manifest)
            .filter(|(section, _)| {
                *section == "[dependencies]"
                    || *section == "[build-dependencies]"
                    || (section.starts_with("[target.")
                        && (section.ends_with(".dependencies]")
                            || section.ends_with(".build-dependencies]")))
            })
            .map(|(_, line)| dependency_name(line))
            .filter(|name| name.starts_with("ishiki-"))
            .map(str::to_owned)
            .collect()
    }

    /// The names in a manifest's `[dependencies]` table (optional ones too).
    fn normal_dependencies(manifest: &str) -> Vec<String> {
        table_lines(manifest)
            .filter(|(section, line)| {
                *section == "[dependencies]" && !line.starts_with('#') && !line.is_empty()
            })
            // Continuation lines of a multi-line feature list hold no `=`.
            .filter(|(_, line)| line.contains('='))
            .map(|(_, line)| dependency_name(line))
            .filter(|name| {
                !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            })
            .map(str::to_owned)
            .collect()
    }

    /// Dependencies used without their name in the sources, with the reason.
    const USED_UNNAMED: &[(&str, &str, &str)] = &[(
        "ishiki-objects",
        "reqwest",
        "only its `rustls-no-provider` feature, for the client object_store builds",
    )];

    /// The mutation records (`xtask/mutations/*.py`) find the code they mutate: code that moved
    /// would leave a mutation that changes nothing, and its tests would prove nothing.
    #[test]
    fn every_recorded_mutation_still_applies() {
        let root = workspace_root();
        let Ok(entries) = std::fs::read_dir(root.join("xtask/mutations")) else {
            panic!("no xtask/mutations directory");
        };
        let mut scripts: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "py"))
            .collect();
        scripts.sort();
        assert!(!scripts.is_empty(), "no mutation records found");
        for script in scripts {
            let output = std::process::Command::new("python3")
                .arg(&script)
                .arg("check")
                .current_dir(&root)
                .output()
                .expect("python3 runs");
            assert!(
                output.status.success(),
                "{}: {}",
                script.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }

    #[test]
    fn every_normal_dependency_is_named_in_the_sources() {
        let root = workspace_root();
        let mut unused = Vec::new();
        let mut excused = Vec::new();
        let Ok(crates) = std::fs::read_dir(root.join("crates")) else {
            panic!("no crates directory");
        };
        let mut dirs: Vec<PathBuf> = crates.flatten().map(|e| e.path()).collect();
        dirs.push(root.join("xtask"));
        for dir in dirs {
            let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
                continue;
            };
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut files = Vec::new();
            rust_files(&dir.join("src"), &mut files);
            if dir.join("build.rs").is_file() {
                files.push(dir.join("build.rs"));
            }
            let sources: String = files
                .iter()
                .filter_map(|f| std::fs::read_to_string(f).ok())
                .collect();
            for dependency in normal_dependencies(&manifest) {
                if USED_UNNAMED
                    .iter()
                    .any(|(c, d, _)| *c == name && *d == dependency)
                {
                    excused.push((name.clone(), dependency));
                    continue;
                }
                let rust = dependency.replace('-', "_");
                let named = [
                    format!("{rust}::"),
                    format!("use {rust}"),
                    format!("{rust} as"),
                    format!("extern crate {rust}"),
                ]
                .iter()
                .any(|needle| sources.contains(needle.as_str()));
                if !named {
                    unused.push(format!("{name}: {dependency}"));
                }
            }
        }
        assert!(
            unused.is_empty(),
            "dependencies no source file names (remove them, or list them in USED_UNNAMED with the reason): {unused:?}"
        );
        // The excuses name real dependencies: the list cannot outlive them.
        for (c, d, _) in USED_UNNAMED {
            assert!(
                excused.iter().any(|(ec, ed)| ec == c && ed == d),
                "USED_UNNAMED lists {c}: {d}, which is not a dependency"
            );
        }
    }

    #[test]
    fn crate_layering_holds() {
        let root = workspace_root();
        let mut problems = Vec::new();
        for entry in std::fs::read_dir(root.join("crates"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(manifest) = std::fs::read_to_string(entry.path().join("Cargo.toml")) else {
                continue;
            };
            let Some((_, allowed)) = LAYERS.iter().find(|(crate_name, _)| *crate_name == name)
            else {
                problems.push(format!("{name} is not in xtask's layering table"));
                continue;
            };
            for dep in internal_dependencies(&manifest) {
                if !allowed.contains(&dep.as_str()) {
                    problems.push(format!("{name} must not depend on {dep}"));
                }
            }
        }
        assert!(problems.is_empty(), "layering broken: {problems:#?}");
    }

    #[test]
    fn layering_parser_sees_every_dependency_table() {
        let manifest = "[package]\nname = \"x\"\n[dependencies]\nishiki-core.workspace = true\n\
            [dev-dependencies]\nishiki-cli = { path = \"../c\" }\n\
            [target.'cfg(unix)'.dependencies]\nishiki-mcp = { path = \"../m\" }\n";
        assert_eq!(
            internal_dependencies(manifest),
            ["ishiki-core", "ishiki-mcp"]
        );
    }

    /// A crate root's public items, one per line: `pub use`, `pub mod`, and public items
    /// declared at the root, multi-line `pub use` lists folded onto one line.
    fn root_exports(lib_rs: &str) -> String {
        let mut out = Vec::new();
        let mut pending: Option<String> = None;
        for line in lib_rs.lines() {
            if let Some(mut acc) = pending.take() {
                acc.push(' ');
                acc.push_str(line.trim());
                if line.contains(';') {
                    out.push(acc);
                } else {
                    pending = Some(acc);
                }
                continue;
            }
            if !line.starts_with("pub ") {
                continue;
            }
            if line.starts_with("pub use") {
                if line.contains(';') {
                    out.push(line.trim().to_owned());
                } else {
                    pending = Some(line.trim().to_owned());
                }
            } else {
                let head = line.split(['{', '(', '=']).next().unwrap_or(line);
                out.push(head.trim().trim_end_matches(';').to_owned());
            }
        }
        let mut text = out
            .iter()
            .map(|l| l.replace("{ ", "{").replace(", }", "}").replace(" }", "}"))
            .collect::<Vec<_>>()
            .join("\n");
        text.push('\n');
        text
    }

    #[test]
    fn root_exports_match_their_snapshots() {
        let root = workspace_root();
        let update = std::env::var_os("UPDATE_EXPORTS").is_some();
        let mut changed = Vec::new();
        for name in crate::guards::library_crates(&root) {
            let lib = std::fs::read_to_string(root.join("crates").join(&name).join("src/lib.rs"))
                .unwrap_or_default();
            let now = root_exports(&lib);
            let file = root.join("xtask/exports").join(format!("{name}.txt"));
            let before = std::fs::read_to_string(&file).unwrap_or_default();
            if before != now {
                if update {
                    std::fs::create_dir_all(root.join("xtask/exports")).unwrap_or_default();
                    std::fs::write(&file, &now).unwrap_or_default();
                } else {
                    changed.push(format!("{name}:\n--- committed\n{before}+++ now\n{now}"));
                }
            }
        }
        assert!(
            changed.is_empty(),
            "root exports changed; review, then run `UPDATE_EXPORTS=1 cargo test -p xtask`:\n{}",
            changed.join("\n")
        );
    }
    /// The source without line comments and without its test module (`mod tests { … }` at
    /// the end of a file under a `#[cfg(…test…)]`, as this repository writes them).
    fn code_of(source: &str) -> String {
        let source = source
            .find("\nmod tests {")
            .map_or(source, |at| &source[..at]);
        source
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn no_glob_import_of_the_parent_outside_test_modules() {
        let root = workspace_root();
        let mut files = Vec::new();
        rust_files(&root.join("crates"), &mut files);
        rust_files(&root.join("xtask/src"), &mut files);
        let mut globs = Vec::new();
        for file in files {
            let relative = file
                .strip_prefix(&root)
                .unwrap_or(&file)
                .display()
                .to_string();
            if !relative.contains("/src/") || relative.ends_with("/tests.rs") {
                continue;
            }
            let source = std::fs::read_to_string(&file).unwrap_or_default();
            if code_of(&source)
                .lines()
                .any(|line| line.trim() == "use super::*;")
            {
                globs.push(relative);
            }
        }
        assert!(
            globs.is_empty(),
            "`use super::*` outside a test module hides what a file depends on; name the imports: {globs:#?}"
        );
    }

    /// Module cycles `ishiki-core` may have, each with the reason it cannot be broken: none.
    /// A new cycle fails the test; so would a listed one that changed or is gone.
    const CORE_CYCLES: &[(&[&str], &str)] = &[];

    /// Which top-level modules of `ishiki-core` each one names through `crate::…` paths
    /// (`use crate::a::B`, `crate::{a, b}`, `crate::a::f()`), test modules left out.
    fn core_module_graph(root: &Path) -> std::collections::BTreeMap<String, Vec<String>> {
        use std::collections::{BTreeMap, BTreeSet};
        let src = root.join("crates/ishiki-core/src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let module_of = |file: &Path| -> Option<String> {
            let relative = file.strip_prefix(&src).ok()?;
            let first = relative.components().next()?.as_os_str().to_string_lossy();
            let name = first.trim_end_matches(".rs").to_owned();
            (name != "lib").then_some(name)
        };
        let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(f)).collect();
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in &files {
            let Some(module) = module_of(file) else {
                continue;
            };
            let code = code_of(&std::fs::read_to_string(file).unwrap_or_default());
            let mut named = Vec::new();
            for (at, _) in code.match_indices("crate::") {
                let before = code[..at].chars().next_back().unwrap_or(' ');
                if before.is_alphanumeric() || before == '_' {
                    continue; // `ishiki_core::crate::` never occurs; `my_crate::` is not ours
                }
                let rest = &code[at + "crate::".len()..];
                if let Some(group) = rest.strip_prefix('{') {
                    let group = group.split('}').next().unwrap_or_default();
                    named.extend(
                        group
                            .split(',')
                            .map(|g| g.trim().split("::").next().unwrap_or_default().to_owned()),
                    );
                } else {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    named.push(name);
                }
            }
            let entry = graph.entry(module.clone()).or_default();
            for name in named {
                if name != module && modules.contains(&name) {
                    entry.insert(name);
                }
            }
        }
        graph
            .into_iter()
            .map(|(k, v)| (k, v.into_iter().collect()))
            .collect()
    }

    /// The strongly connected components of more than one module (Tarjan's algorithm), each
    /// sorted, in sorted order.
    fn cycles(graph: &std::collections::BTreeMap<String, Vec<String>>) -> Vec<Vec<String>> {
        struct Walk<'g> {
            graph: &'g std::collections::BTreeMap<String, Vec<String>>,
            index: std::collections::HashMap<&'g str, usize>,
            low: std::collections::HashMap<&'g str, usize>,
            stack: Vec<&'g str>,
            on_stack: std::collections::HashSet<&'g str>,
            found: Vec<Vec<String>>,
        }
        impl<'g> Walk<'g> {
            fn visit(&mut self, v: &'g str) {
                let n = self.index.len();
                self.index.insert(v, n);
                self.low.insert(v, n);
                self.stack.push(v);
                self.on_stack.insert(v);
                for w in self.graph.get(v).into_iter().flatten() {
                    let w = w.as_str();
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let low = self.low[v].min(self.low[w]);
                        self.low.insert(v, low);
                    } else if self.on_stack.contains(w) {
                        let low = self.low[v].min(self.index[w]);
                        self.low.insert(v, low);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack.remove(w);
                        component.push(w.to_owned());
                        if w == v {
                            break;
                        }
                    }
                    if component.len() > 1 {
                        component.sort();
                        self.found.push(component);
                    }
                }
            }
        }
        let mut walk = Walk {
            graph,
            index: Default::default(),
            low: Default::default(),
            stack: Vec::new(),
            on_stack: Default::default(),
            found: Vec::new(),
        };
        for v in graph.keys() {
            if !walk.index.contains_key(v.as_str()) {
                walk.visit(v);
            }
        }
        walk.found.sort();
        walk.found
    }

    #[test]
    fn cycles_are_found_and_a_chain_is_not_one() {
        let graph = |edges: &[(&str, &str)]| {
            let mut g = std::collections::BTreeMap::<String, Vec<String>>::new();
            for (a, b) in edges {
                g.entry((*a).to_owned()).or_default().push((*b).to_owned());
                g.entry((*b).to_owned()).or_default();
            }
            g
        };
        assert!(cycles(&graph(&[("a", "b"), ("b", "c")])).is_empty());
        assert_eq!(
            cycles(&graph(&[
                ("a", "b"),
                ("b", "c"),
                ("c", "a"),
                ("c", "d"),
                ("d", "e"),
                ("e", "d")
            ])),
            [vec!["a", "b", "c"], vec!["d", "e"]]
        );
    }

    #[test]
    fn core_modules_form_no_cycle_but_the_listed_one() {
        let graph = core_module_graph(&workspace_root());
        assert!(
            graph.contains_key("runtime") && graph.contains_key("builtin"),
            "the module graph of ishiki-core was not read: {graph:?}"
        );
        let found = cycles(&graph);
        let listed: Vec<Vec<String>> = CORE_CYCLES
            .iter()
            .map(|(modules, _)| modules.iter().map(|m| (*m).to_owned()).collect())
            .collect();
        assert_eq!(
            found, listed,
            "ishiki-core's module cycles changed (found left, listed right); break a new one, or update CORE_CYCLES. The graph: {graph:#?}"
        );
    }
}
