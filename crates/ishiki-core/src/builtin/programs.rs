//! What the runtime needs to know about programs, in one place whether or not the `codemode`
//! feature is built: the builder's settings (set by `RuntimeBuilder`'s codemode methods), the
//! sandbox type, the codemode tool's insertion among the built-ins and the sandbox a runtime
//! runs programs in.

use std::sync::Arc;

#[cfg(feature = "codemode")]
use ishiki_codemode::{Limits, SandboxConfig, WorkerSpawn};
use ishiki_tool::Tool;
#[cfg(feature = "codemode")]
use ishiki_toolsearch::ToolDef;

use crate::error::{RuntimeError, RuntimeErrorKind};

/// The sandbox programs run in.
#[cfg(feature = "codemode")]
pub(crate) use ishiki_codemode::Sandbox;

/// Without the `codemode` feature there is no sandbox: an `Option` of it is always `None`.
#[cfg(not(feature = "codemode"))]
#[derive(Debug, Clone)]
pub(crate) enum Sandbox {}

/// The builder's codemode settings.
#[derive(Debug, Default)]
pub(crate) struct ProgramSettings {
    #[cfg(feature = "codemode")]
    worker: Option<WorkerSpawn>,
    #[cfg(feature = "codemode")]
    limits: Option<Limits>,
    #[cfg(feature = "codemode")]
    sandbox: Option<Sandbox>,
}

#[cfg(feature = "codemode")]
impl ProgramSettings {
    /// How codemode workers start (`RuntimeBuilder::codemode_worker`).
    pub(crate) fn set_worker(&mut self, worker: WorkerSpawn) {
        self.worker = Some(worker);
    }

    /// The codemode limits (`RuntimeBuilder::codemode_limits`).
    pub(crate) fn set_limits(&mut self, limits: Limits) {
        self.limits = Some(limits);
    }

    /// A shared sandbox instead of a pool of the runtime's own (`RuntimeBuilder::codemode_sandbox`).
    pub(crate) fn set_sandbox(&mut self, sandbox: Sandbox) {
        self.sandbox = Some(sandbox);
    }
}

/// Refuses a profile that turns programs on in a build without them.
pub(crate) fn check_available(enabled: bool) -> Result<(), RuntimeError> {
    if enabled && !cfg!(feature = "codemode") {
        return Err(RuntimeError::new(
            RuntimeErrorKind::Config,
            "the profile turns codemode on, but ishiki-core was built without its \
             `codemode` feature",
        ));
    }
    Ok(())
}

/// Puts the codemode tool at `index` among the built-ins. Its description lists the signatures
/// of the resident tools a program may call; it is fixed at start so the prefix stays stable
/// (later tools come with deltas).
#[cfg(feature = "codemode")]
pub(crate) fn insert_tool(
    tools: &mut Vec<Arc<dyn Tool>>,
    index: usize,
    toolsearch_on: bool,
) -> Option<Arc<dyn super::DirectTool>> {
    let resident: Vec<ToolDef> = tools
        .iter()
        .filter(|t| t.callable_from_programs())
        .map(|t| t.program_view().unwrap_or_else(|| t.clone()).definition())
        .filter(|d| d.resident || !toolsearch_on)
        .collect();
    let codemode = Arc::new(super::CodemodeTool::new(&resident));
    tools.insert(index, codemode.clone());
    Some(codemode)
}

/// Without programs there is no codemode tool (a profile that asks for one was refused).
#[cfg(not(feature = "codemode"))]
pub(crate) fn insert_tool(
    _: &mut [Arc<dyn Tool>],
    _: usize,
    _: bool,
) -> Option<Arc<dyn super::DirectTool>> {
    None
}

/// The sandbox a runtime runs programs in: none when programs are off; the shared one when the
/// builder was given one; otherwise a pool of its own from the builder's settings.
#[cfg(feature = "codemode")]
pub(crate) fn sandbox(enabled: bool, settings: ProgramSettings) -> Option<Sandbox> {
    if !enabled {
        return None;
    }
    if let Some(sandbox) = settings.sandbox {
        return Some(sandbox);
    }
    let mut config = SandboxConfig::default();
    if let Some(worker) = settings.worker {
        config.worker = worker;
    }
    if let Some(limits) = settings.limits {
        config.limits = limits;
    }
    Some(Sandbox::new(config))
}

/// Without programs there is no sandbox.
#[cfg(not(feature = "codemode"))]
pub(crate) fn sandbox(_: bool, _: ProgramSettings) -> Option<Sandbox> {
    None
}
