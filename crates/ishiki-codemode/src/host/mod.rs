//! The host side: [`Sandbox`], its pool of warm workers, and one program's conversation.
//!
//! A program's conversation is the same whether the engine is a worker process or a thread:
//! the host answers `call` messages by running the tool (input and output checked against
//! their schemas, sizes against the transfer limit), collects `console` lines, and stops at
//! `done`, `failed`, the deadline, or the worker's death — which it explains from the exit
//! status and the worker's last words on stderr.

use crate::attachments::AttachmentItem;
use crate::config::{EngineConfig, SandboxConfig, WorkerSpawn};
use crate::confine::ConfinementReport;
use crate::error::{CodemodeError, CodemodeErrorKind};
use crate::protocol::ToEngine;
use crate::tool::{CallableTool, ValidatorCache, is_callable_name};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::process::Child;
use tokio::sync::Notify;

mod converse;
#[cfg(target_os = "linux")]
mod forked;
mod peer;
mod spawn;
#[cfg(test)]
mod tests;

pub use converse::MAX_EXACT_INTEGER;
use converse::*;
use peer::*;
use spawn::*;

/// What a program produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The return value, with the top-level `attachments` key removed (CM-5).
    pub value: Value,
    /// The declared attachments, in order (CM-5..CM-7).
    pub attachments: Vec<AttachmentItem>,
    /// Captured `console` lines, bounded by `Limits::max_console_bytes` (CM-9).
    pub console: Vec<String>,
}

/// Runs programs in isolated workers. Cheap to clone: clones share the pool.
#[derive(Debug, Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: SandboxConfig,
    engine: EngineConfig,
    /// The engine configuration as the worker reads it from its environment.
    engine_env: String,
    validators: ValidatorCache,
    pool: Mutex<Pool>,
    changed: Notify,
    /// The fork server workers start from (Linux, `SandboxConfig::fork_server`).
    #[cfg(target_os = "linux")]
    fork_server: tokio::sync::Mutex<ForkSlot>,
    /// How the last worker started, in words (see [`Sandbox::worker_start`]).
    started_by: Mutex<Option<String>>,
}

/// The fork server, once asked for.
#[cfg(target_os = "linux")]
#[derive(Debug, Default)]
enum ForkSlot {
    #[default]
    NotStarted,
    Running(Arc<forked::ForkServer>),
    /// It could not start (why, and when): workers are executed, and another start is tried
    /// once [`FORK_SERVER_RETRY`] has passed.
    Off(String, std::time::Instant),
}

/// How long a sandbox executes workers after its fork server could not start.
#[cfg(target_os = "linux")]
const FORK_SERVER_RETRY: std::time::Duration = std::time::Duration::from_secs(60);

#[derive(Debug, Default)]
struct Pool {
    ready: VecDeque<Worker>,
    starting: usize,
    /// Programs waiting for a worker, first come first served: a worker that becomes ready
    /// goes to the one that has waited longest. While more wait than workers are on the way,
    /// another starts, up to [`max_starting`].
    waiters: VecDeque<tokio::sync::oneshot::Sender<Result<Worker, CodemodeError>>>,
    last_error: Option<CodemodeError>,
    /// What the last worker that started said confines it.
    confinement: Option<ConfinementReport>,
}

/// A started worker whose engine is built and which waits for its program.
struct Worker {
    child: GroupChild,
    stdin: WorkerStdin,
    out: WorkerOut,
}

/// The host's end of a worker's stdin.
type WorkerStdin = Box<dyn AsyncWrite + Send + Unpin>;
/// The host's end of a worker's stdout or stderr.
type WorkerPipe = Box<dyn AsyncRead + Send + Unpin>;

/// A worker process that takes its process group with it when dropped: an exec-started worker
/// is killed (`kill_on_drop`), a forked one killed and released to its fork server, and then
/// the rest of its group (a warm worker let go, a finished program's worker).
#[derive(Debug)]
enum GroupChild {
    Spawned(Child),
    #[cfg(target_os = "linux")]
    Forked(forked::ForkedChild),
}

impl GroupChild {
    /// Its pid while it is unreaped (so its pid and group id are still its own).
    fn id(&self) -> Option<u32> {
        match self {
            Self::Spawned(child) => child.id(),
            #[cfg(target_os = "linux")]
            Self::Forked(child) => child.id(),
        }
    }

    fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        match self {
            Self::Spawned(child) => child.try_wait(),
            #[cfg(target_os = "linux")]
            Self::Forked(child) => child.try_wait(),
        }
    }

    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            Self::Spawned(child) => child.wait().await,
            #[cfg(target_os = "linux")]
            Self::Forked(child) => child.wait().await,
        }
    }

    /// Why the worker's fork server is gone, for a forked worker whose server is.
    fn server_gone(&self) -> Option<String> {
        match self {
            Self::Spawned(_) => None,
            #[cfg(target_os = "linux")]
            Self::Forked(child) => child.server_gone(),
        }
    }

    /// Sends the worker SIGKILL; nobody waits.
    fn start_kill(&mut self) {
        match self {
            Self::Spawned(child) => {
                let _ = child.start_kill();
            }
            #[cfg(target_os = "linux")]
            Self::Forked(child) => child.start_kill(),
        }
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        kill_group(self);
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("child", &self.child)
            .finish_non_exhaustive()
    }
}

/// What a worker says: protocol on stdout, last words on stderr.
struct WorkerOut {
    stdout: BufReader<WorkerPipe>,
    stderr: Arc<Mutex<Vec<u8>>>,
    stderr_done: tokio::task::JoinHandle<()>,
}

/// How much of a worker's stderr is kept to explain its death.
const STDERR_TAIL: usize = 4096;

impl Sandbox {
    /// A sandbox with this configuration. Inside a Tokio runtime, warm workers start at once;
    /// otherwise on the first [`run`](Self::run) or [`warm`](Self::warm).
    #[must_use]
    pub fn new(config: SandboxConfig) -> Self {
        let engine = EngineConfig::from_config(&config);
        // Serializing a struct of numbers cannot fail.
        let engine_env = serde_json::to_string(&engine).unwrap_or_default();
        let sandbox = Self {
            inner: Arc::new(Inner {
                config,
                engine,
                engine_env,
                validators: ValidatorCache::default(),
                pool: Mutex::new(Pool::default()),
                changed: Notify::new(),
                #[cfg(target_os = "linux")]
                fork_server: tokio::sync::Mutex::new(ForkSlot::NotStarted),
                started_by: Mutex::new(None),
            }),
        };
        top_up(&sandbox.inner);
        sandbox
    }

    /// The configuration this sandbox runs with.
    #[must_use]
    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    /// What confines this sandbox's workers, as the last one to start reported it, and how it
    /// was started (see [`ConfinementReport`]); `None` before a worker started, and always for
    /// [`WorkerSpawn::InProcess`] (which has no confinement at all).
    #[must_use]
    pub fn confinement(&self) -> Option<ConfinementReport> {
        let mut report = lock(&self.inner.pool).confinement.clone()?;
        report.start = self.worker_start();
        Some(report)
    }

    /// How the last worker started, in words: forked by the sandbox's fork server, or executed
    /// (and then why not forked); `None` before a worker started, and always for
    /// [`WorkerSpawn::InProcess`].
    #[must_use]
    pub fn worker_start(&self) -> Option<String> {
        lock(&self.inner.started_by).clone()
    }

    /// Waits until `prespawn` warm workers are ready, or reports why one cannot start.
    pub async fn warm(&self) -> Result<(), CodemodeError> {
        if self.inner.config.worker == WorkerSpawn::InProcess {
            return Ok(());
        }
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut pool = lock(&self.inner.pool);
                if let Some(error) = pool.last_error.take() {
                    return Err(error);
                }
                if pool.ready.len() >= self.inner.config.prespawn {
                    return Ok(());
                }
            }
            top_up(&self.inner);
            changed.await;
        }
    }

    /// Runs `code` — the body of an async function (CM-1) — with `tools` callable as
    /// `tools.<name>(input)` (CM-2). Tools named `finish` or `wait` are left out (CM-4).
    /// Each call is an independent program on a fresh engine; tool calls it did not await are
    /// cancelled when it returns. `Date.now()` is the configured `clock_ms`.
    pub async fn run(
        &self,
        code: &str,
        tools: Vec<Arc<dyn CallableTool>>,
    ) -> Result<Outcome, CodemodeError> {
        self.run_at(code, tools, self.inner.config.clock_ms).await
    }

    /// [`run`](Self::run) with `Date.now()` at `clock_ms` (for a host whose clock moves between
    /// programs, such as a scenario's step clock).
    pub async fn run_at(
        &self,
        code: &str,
        tools: Vec<Arc<dyn CallableTool>>,
        clock_ms: u64,
    ) -> Result<Outcome, CodemodeError> {
        let tools: HashMap<String, Arc<dyn CallableTool>> = tools
            .into_iter()
            .filter(|tool| is_callable_name(tool.name()))
            .map(|tool| (tool.name().to_owned(), tool))
            .collect();
        let mut names: Vec<String> = tools.keys().cloned().collect();
        names.sort();
        let run = ToEngine::Run {
            code: code.to_owned(),
            tools: names,
            clock_ms,
        };
        if self.inner.config.worker == WorkerSpawn::InProcess {
            let peer = ThreadPeer::start(&self.inner.engine, run)?;
            return converse(&self.inner, peer, &tools).await;
        }
        // A warm worker that died while idle is replaced once; a death after it took the
        // program belongs to the program.
        let mut last = None;
        for _ in 0..2 {
            let worker = self.take_worker().await?;
            match ProcessPeer::start(worker, &run, &self.inner) {
                Ok(peer) => {
                    let outcome = converse(&self.inner, peer, &tools).await;
                    // Refill afterwards: starting a process and building an engine while the
                    // program runs would take CPU from it.
                    top_up(&self.inner);
                    return outcome;
                }
                Err(error) => last = Some(error),
            }
        }
        Err(last.unwrap_or_else(|| {
            CodemodeError::new(CodemodeErrorKind::Worker, "no sandbox worker could start")
        }))
    }

    /// A warm worker: one from the pool, or else the next to become ready once the programs
    /// that waited longer have theirs. While more programs wait than workers are starting,
    /// another one starts in the background (up to [`max_starting`] at once), so a burst is
    /// served by workers started side by side, in the order the programs came.
    async fn take_worker(&self) -> Result<Worker, CodemodeError> {
        let inner = &self.inner;
        let turn = {
            let mut pool = lock(&inner.pool);
            if let Some(worker) = pool.ready.pop_front() {
                return Ok(worker);
            }
            // An error a start left while nobody waited is not this program's: it gets a start
            // of its own, and that start's error if it fails.
            let (turn, wait) = tokio::sync::oneshot::channel();
            pool.waiters.push_back(turn);
            start_for_waiters(inner, &mut pool);
            wait
        };
        turn.await.unwrap_or_else(|_| {
            Err(CodemodeError::new(
                CodemodeErrorKind::Worker,
                "the sandbox stopped before a worker was ready",
            ))
        })
    }
}

/// How many workers may start at once: the warm pool's size, or one per core for a burst.
fn max_starting(config: &SandboxConfig) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    config.prespawn.max(cores.min(8))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts workers in the background until `prespawn` are ready or starting.
fn top_up(inner: &Arc<Inner>) {
    if inner.config.worker == WorkerSpawn::InProcess
        || tokio::runtime::Handle::try_current().is_err()
    {
        return;
    }
    let mut pool = lock(&inner.pool);
    while pool.ready.len() + pool.starting < inner.config.prespawn {
        start_one(inner, &mut pool);
    }
}

/// Starts one worker in the background; it joins the pool (or leaves its error there) and
/// wakes everyone waiting. Needs a Tokio runtime.
fn start_one(inner: &Arc<Inner>, pool: &mut Pool) {
    pool.starting += 1;
    let inner = Arc::clone(inner);
    tokio::spawn(async move {
        let mut result = spawn_worker(&inner).await;
        let mut pool = lock(&inner.pool);
        pool.starting -= 1;
        // To the program that waited longest and still waits; else into the pool.
        loop {
            match pool.waiters.pop_front() {
                Some(waiter) => match waiter.send(result) {
                    Ok(()) => break,
                    Err(back) => result = back,
                },
                None => {
                    match result {
                        Ok(worker) => pool.ready.push_back(worker),
                        Err(error) => pool.last_error = Some(error),
                    }
                    break;
                }
            }
        }
        // Programs still waiting past the starts allowed at once get theirs now.
        start_for_waiters(&inner, &mut pool);
        drop(pool);
        inner.changed.notify_waiters();
    });
}

/// Starts workers while more programs wait than workers are starting, up to [`max_starting`].
fn start_for_waiters(inner: &Arc<Inner>, pool: &mut Pool) {
    // A run dropped while it waited leaves a closed place in the queue.
    pool.waiters.retain(|w| !w.is_closed());
    while pool.starting < pool.waiters.len() && pool.starting < max_starting(&inner.config) {
        start_one(inner, pool);
    }
}
