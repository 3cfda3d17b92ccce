//! Test tools and sandboxes shared by the suite.

use ishiki_codemode::{CallableTool, Limits, Sandbox, SandboxConfig, ToolFailure, WorkerSpawn};
use serde_json::{Value, json};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

type Handler = dyn Fn(Value) -> Result<Value, ToolFailure> + Send + Sync;

/// A tool whose execute is a closure; counts its calls.
pub(crate) struct FnTool {
    name: String,
    input: Value,
    output: Option<Value>,
    handler: Box<Handler>,
    pub(crate) calls: AtomicUsize,
}

impl fmt::Debug for FnTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool").field("name", &self.name).finish()
    }
}

impl FnTool {
    pub(crate) fn new(
        name: &str,
        handler: impl Fn(Value) -> Result<Value, ToolFailure> + Send + Sync + 'static,
    ) -> Self {
        Self {
            name: name.to_owned(),
            input: json!({ "type": "object" }),
            output: None,
            handler: Box::new(handler),
            calls: AtomicUsize::new(0),
        }
    }

    pub(crate) fn input(mut self, schema: Value) -> Self {
        self.input = schema;
        self
    }

    pub(crate) fn output(mut self, schema: Value) -> Self {
        self.output = Some(schema);
        self
    }

    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl CallableTool for FnTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn input_schema(&self) -> &Value {
        &self.input
    }
    fn output_schema(&self) -> Option<&Value> {
        self.output.as_ref()
    }
    async fn call(&self, input: Value) -> Result<Value, ToolFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        (self.handler)(input)
    }
}

/// A tool that never answers (to meet the wall clock).
#[derive(Debug)]
pub(crate) struct Stuck(Value);

impl Stuck {
    pub(crate) fn new() -> Self {
        Self(json!({ "type": "object" }))
    }
}

#[async_trait::async_trait]
impl CallableTool for Stuck {
    fn name(&self) -> &str {
        "stuck"
    }
    fn input_schema(&self) -> &Value {
        &self.0
    }
    async fn call(&self, _input: Value) -> Result<Value, ToolFailure> {
        std::future::pending().await
    }
}

pub(crate) fn echo() -> Arc<dyn CallableTool> {
    Arc::new(FnTool::new("echo", Ok))
}

/// Limits that keep the suite fast: small budget and memory. Spinning programs end on the
/// budget in well under a second; the wall clock is generous so a loaded CI machine (2 cores,
/// test binaries in parallel) never turns a budget error into a timeout. Tests about the wall
/// clock set their own.
pub(crate) fn limits() -> Limits {
    Limits {
        timeout: Duration::from_secs(20),
        memory_bytes: 512 << 20,
        instruction_budget: 30_000_000,
        stack_bytes: 128 << 20,
        ..Limits::default()
    }
}

pub(crate) fn worker_path() -> std::path::PathBuf {
    env!("CARGO_BIN_EXE_ishiki-codemode-worker").into()
}

/// A sandbox of worker processes (the real mode).
pub(crate) fn sandbox(limits: Limits) -> Sandbox {
    Sandbox::new(SandboxConfig {
        worker: WorkerSpawn::Program(worker_path()),
        limits,
        clock_ms: 1_700_000_000_000,
        random_seed: 7,
        prespawn: 1,
        fork_server: true,
    })
}

/// The in-process sandbox (soft limits).
pub(crate) fn in_process(limits: Limits) -> Sandbox {
    Sandbox::new(SandboxConfig {
        worker: WorkerSpawn::InProcess,
        limits,
        clock_ms: 1_700_000_000_000,
        random_seed: 7,
        prespawn: 0,
        fork_server: false,
    })
}

/// Runs `code` with `tools` and renders the result as one line: `ok <json>` or
/// `<kind>: <message>`.
pub(crate) async fn outcome(
    sandbox: &Sandbox,
    code: &str,
    tools: Vec<Arc<dyn CallableTool>>,
) -> String {
    match sandbox.run(code, tools).await {
        Ok(outcome) => format!("ok {}", outcome.value),
        Err(error) => format!("{}: {}", error.kind().as_str(), error.message()),
    }
}
