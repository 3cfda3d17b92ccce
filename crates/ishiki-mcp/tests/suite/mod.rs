//! Integration tests against real MCP servers: the reference server
//! `@modelcontextprotocol/server-everything` (installed on demand into `<repo>/.tools/`) and a
//! tiny misbehaving server in `tests/data/fake_server.js` (hostile modes in `hostile.rs`).

mod everything;
mod failures;
mod hostile;
mod http;
mod list_changed;
mod modern;
mod oauth;
mod real_servers;
mod sse;
mod sse_hostile;
mod tasks;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ishiki_core::{
    CallReport, ModelResponse, ModelsDoc, Profile, Runtime, Tool, ToolCall, assemble,
};
use ishiki_mcp::McpServerConfig;
use serde_json::Value;

/// The pinned version of the reference server.
pub(crate) const EVERYTHING_VERSION: &str = "2026.8.31";

/// Runs `f` with insta writing to `tests/snapshots/`, snapshot names without module prefixes.
pub(crate) fn with_snapshots(f: impl FnOnce()) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(f);
}

pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn node() -> &'static str {
    static NODE: OnceLock<()> = OnceLock::new();
    NODE.get_or_init(|| {
        let ok = Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            ok,
            "the ishiki-mcp tests need `node` on PATH (Node.js 18 or later) to run MCP servers"
        );
    });
    "node"
}

/// The entry script of the pinned reference server, installed into `<repo>/.tools/` the first
/// time any test (in any process: a file lock guards the install) needs it.
pub(crate) fn everything_entry() -> PathBuf {
    static ENTRY: OnceLock<PathBuf> = OnceLock::new();
    ENTRY
        .get_or_init(|| {
            node();
            let tools = repo_root().join(".tools");
            let package = tools.join("node_modules/@modelcontextprotocol/server-everything");
            let entry = package.join("dist/index.js");
            let installed = || {
                installed_version(&package.join("package.json"), EVERYTHING_VERSION)
                    && entry.is_file()
            };
            let spec = format!("@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}");
            npm_install(&tools, &spec, installed);
            entry
        })
        .clone()
}

/// Whether the npm package whose `package.json` is `manifest` is at `version`.
fn installed_version(manifest: &Path, version: &str) -> bool {
    std::fs::read_to_string(manifest)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .is_some_and(|p| p["version"] == version)
}

/// Installs `spec` into `tools` with npm unless `installed` says it is there, under a file
/// lock that any test process may hold; panics if npm fails or leaves it missing.
fn npm_install(tools: &Path, spec: &str, installed: impl Fn() -> bool) {
    if installed() {
        return;
    }
    std::fs::create_dir_all(tools).expect("cannot create <repo>/.tools");
    let lock = std::fs::File::create(tools.join(".install.lock"))
        .expect("cannot create <repo>/.tools/.install.lock");
    lock.lock()
        .expect("cannot lock <repo>/.tools/.install.lock");
    if !installed() {
        let output = Command::new("npm")
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--save-exact",
                "--prefix",
            ])
            .arg(tools)
            .arg(spec)
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "the ishiki-mcp tests need `npm` on PATH to install {spec} into {}: {e}",
                    tools.display()
                )
            });
        assert!(
            output.status.success(),
            "npm install {spec} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(installed(), "npm installed {spec} but it is missing");
    }
    drop(lock);
}

/// The official TypeScript SDK v2 (`@modelcontextprotocol/server`) the `2026-07-28` tests'
/// server runs on, installed beside the reference server on first use.
pub(crate) const SDK_V2: &str = "2.4.0";

/// The directory holding `node_modules/@modelcontextprotocol/server` at [`SDK_V2`], installed
/// the first time a test needs it (the same file lock as the reference server's install).
pub(crate) fn sdk_v2() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        node();
        let tools = repo_root().join(".tools");
        let manifest = tools.join("node_modules/@modelcontextprotocol/server/package.json");
        // The reference server first, so that both land in one package.json.
        everything_entry();
        let spec = format!("@modelcontextprotocol/server@{SDK_V2}");
        npm_install(&tools, &spec, || installed_version(&manifest, SDK_V2));
        tools
    })
    .clone()
}

/// The reference server as a profile entry (YAML), so tests go through `mcp.servers`.
pub(crate) fn everything_profile(extra: &str, resident: bool) -> String {
    format!(
        "{extra}mcp:\n  servers:\n    everything:\n      command: {}\n      args: [{}, stdio]\n      resident: {resident}\n      timeoutMs: 20000\n",
        node(),
        serde_json::to_string(&everything_entry().display().to_string()).unwrap_or_default()
    )
}

/// The fake server in `mode` (see `tests/data/fake_server.js`).
pub(crate) fn fake_config(name: &str, mode: &str, timeout: Duration) -> McpServerConfig {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fake_server.js");
    McpServerConfig::new(name, node())
        .args([script.display().to_string(), mode.to_owned()])
        .timeout(timeout)
}

/// A runtime for `profile` whose main model reads text and images, with `tools` registered.
pub(crate) async fn runtime(profile: &Profile, tools: Vec<Arc<dyn Tool>>, state: &Path) -> Runtime {
    let models =
        ModelsDoc::from_yaml("models:\n  main: { input: [text, image] }\n").expect("valid models");
    let assembly = assemble(profile.clone(), models, "main").expect("assembles");
    let mut builder = Runtime::builder(assembly, state);
    for tool in tools {
        builder = builder.tool(tool);
    }
    builder.build().await.expect("the runtime builds")
}

/// One step in which the model makes `calls` (name, input); returns the reports.
pub(crate) async fn step(runtime: &mut Runtime, calls: &[(&str, Value)]) -> Vec<CallReport> {
    let prepared = runtime.prepare().await.expect("prepare");
    let step = prepared.step;
    let response =
        ModelResponse::from_calls(calls.iter().enumerate().map(|(k, (name, input))| ToolCall {
            id: format!("c{step}-{k}"),
            name: (*name).to_owned(),
            input: input.clone(),
        }));
    runtime.commit(prepared, response).await.expect("commit");
    runtime.execute().await.expect("execute")
}

/// Replaces what changes between runs (times in the reference server's resources, artifact ids)
/// with placeholders, so snapshots are stable.
pub(crate) fn stable(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("artifact://") {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, ']' | ')' | '"' | ',' | '`'))
            .unwrap_or(tail.len());
        out.push_str("artifact://<id>");
        rest = &tail[end..];
    }
    out.push_str(rest);
    let mut result = String::new();
    let mut rest = out.as_str();
    while let Some(start) = rest.find("created at ") {
        let after = start + "created at ".len();
        result.push_str(&rest[..after]);
        let tail = &rest[after..];
        let end = tail
            .find(|c: char| !(c.is_ascii_digit() || matches!(c, ':' | ' ' | 'A' | 'P' | 'M')))
            .unwrap_or(tail.len());
        result.push_str("<time>");
        rest = &tail[end..];
    }
    result.push_str(rest);
    result
}
