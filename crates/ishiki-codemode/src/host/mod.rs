//! The host side: [`Sandbox`], its pool of warm workers, and one program's conversation.
//!
//! A program's conversation is the same whether the engine is a worker process or a thread:
//! the host answers `call` messages by running the tool (input and output checked against
//! their schemas, sizes against the transfer limit), collects `console` lines, and stops at
//! `done`, `failed`, the deadline, or the worker's death — which it explains from the exit
//! status and the worker's last words on stderr.

use crate::attachments::{AttachmentItem, split_attachments};
use crate::config::{EngineConfig, SandboxConfig, WorkerSpawn};
use crate::confine::ConfinementReport;
use crate::engine::{Engine, Link, Reply};
use crate::error::{CodemodeError, ErrorKind, human_bytes};
use crate::protocol::{
    MAX_CALLS_IN_FLIGHT, MAX_JSON_DEPTH, ToEngine, ToHost, WORKER_ENV, json_depth, line,
};
use crate::tool::{CallableTool, SchemaProblem, ValidatorCache, is_callable_name};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

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
}

#[derive(Debug, Default)]
struct Pool {
    ready: VecDeque<Worker>,
    starting: usize,
    last_error: Option<CodemodeError>,
    /// What the last worker that started said confines it.
    confinement: Option<ConfinementReport>,
}

/// A started worker whose engine is built and which waits for its program.
#[derive(Debug)]
struct Worker {
    child: Child,
    stdin: ChildStdin,
    out: WorkerOut,
}

/// What a worker says: protocol on stdout, last words on stderr.
#[derive(Debug)]
struct WorkerOut {
    stdout: BufReader<ChildStdout>,
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

    /// What confines this sandbox's workers, as the last one to start reported it (see
    /// [`ConfinementReport`]); `None` before a worker started, and always for
    /// [`WorkerSpawn::InProcess`] (which has no confinement at all).
    #[must_use]
    pub fn confinement(&self) -> Option<ConfinementReport> {
        lock(&self.inner.pool).confinement.clone()
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
            CodemodeError::new(ErrorKind::Worker, "no sandbox worker could start")
        }))
    }

    /// A warm worker: one from the pool, one already starting, or a new one.
    async fn take_worker(&self) -> Result<Worker, CodemodeError> {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let starting = {
                let mut pool = lock(&self.inner.pool);
                if let Some(worker) = pool.ready.pop_front() {
                    return Ok(worker);
                }
                pool.starting
            };
            if starting == 0 {
                return spawn_worker(&self.inner).await;
            }
            changed.await;
        }
    }
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
        pool.starting += 1;
        let inner = Arc::clone(inner);
        tokio::spawn(async move {
            let result = spawn_worker(&inner).await;
            let mut pool = lock(&inner.pool);
            pool.starting -= 1;
            match result {
                Ok(worker) => pool.ready.push_back(worker),
                Err(error) => pool.last_error = Some(error),
            }
            drop(pool);
            inner.changed.notify_waiters();
        });
    }
}

/// Starts a worker process and waits for its `ready`.
async fn spawn_worker(inner: &Inner) -> Result<Worker, CodemodeError> {
    let program = match &inner.config.worker {
        WorkerSpawn::CurrentExe => std::env::current_exe().map_err(|e| {
            CodemodeError::new(
                ErrorKind::Worker,
                format!("cannot find the current executable to start a worker: {e}"),
            )
        })?,
        WorkerSpawn::Program(path) => path.clone(),
        WorkerSpawn::InProcess => {
            return Err(CodemodeError::new(
                ErrorKind::Worker,
                "in-process mode has no workers",
            ));
        }
    };
    // A clean environment: nothing of the host's (keys, tokens) is in reach of the worker,
    // should a program ever get past the engine.
    let mut child = tokio::process::Command::new(&program)
        .env_clear()
        .env(WORKER_ENV, &inner.engine_env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            CodemodeError::new(
                ErrorKind::Worker,
                format!("cannot start the sandbox worker {}: {e}", program.display()),
            )
        })?;
    let (Some(stdin), Some(stdout), Some(mut stderr_pipe)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(CodemodeError::new(
            ErrorKind::Worker,
            "the sandbox worker has no pipes",
        ));
    };
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let tail = Arc::clone(&stderr);
    let stderr_done = tokio::spawn(async move {
        let mut chunk = [0u8; 1024];
        while let Ok(n) = stderr_pipe.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            let mut tail = lock(&tail);
            tail.extend_from_slice(&chunk[..n]);
            if tail.len() > STDERR_TAIL {
                let cut = tail.len() - STDERR_TAIL;
                tail.drain(..cut);
            }
        }
    });
    let mut child = child;
    let mut out = WorkerOut {
        stdout: BufReader::new(stdout),
        stderr,
        stderr_done,
    };
    let mut buffer = Vec::new();
    let first = tokio::time::timeout(
        Duration::from_secs(30),
        next_line(&mut out.stdout, &mut buffer, 64 << 10),
    )
    .await;
    let problem = match first {
        Ok(Ok(Some(text))) => match serde_json::from_slice::<ToHost>(&text) {
            Ok(ToHost::Ready { confinement }) => {
                if confinement.is_some() {
                    lock(&inner.pool).confinement = confinement;
                }
                return Ok(Worker { child, stdin, out });
            }
            Ok(ToHost::Failed { kind, message }) => CodemodeError::new(kind, message),
            _ => CodemodeError::new(
                ErrorKind::Worker,
                format!(
                    "{} did not start as a sandbox worker (does its main() call run_if_worker() first?)",
                    program.display()
                ),
            ),
        },
        Ok(Ok(None) | Err(_)) => {
            let error = death(&mut child, &mut out, &inner.config, "while starting").await;
            if error.kind() == ErrorKind::Worker {
                CodemodeError::new(
                    ErrorKind::Worker,
                    format!(
                        "{} (is {} a codemode worker? its main() must call run_if_worker() first)",
                        error.message(),
                        program.display()
                    ),
                )
            } else {
                error
            }
        }
        Err(_) => CodemodeError::new(
            ErrorKind::Worker,
            "the sandbox worker did not become ready within 30 s",
        ),
    };
    let _ = child.start_kill();
    Err(problem)
}

/// Reads one line without letting a worker make the host buffer without bound. Cancel-safe:
/// a partial line stays in `buffer`.
async fn next_line(
    reader: &mut BufReader<ChildStdout>,
    buffer: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(None);
        }
        if let Some(end) = memchr::memchr(b'\n', available) {
            buffer.extend_from_slice(&available[..end]);
            reader.consume(end + 1);
            return Ok(Some(std::mem::take(buffer)));
        }
        let n = available.len();
        buffer.extend_from_slice(available);
        reader.consume(n);
        if buffer.len() > cap {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "message too long",
            ));
        }
    }
}

/// Why a worker is gone, from its exit status and the end of its stderr.
async fn death(
    child: &mut Child,
    out: &mut WorkerOut,
    config: &SandboxConfig,
    when: &str,
) -> CodemodeError {
    let status = match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            let _ = child.start_kill();
            None
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), &mut out.stderr_done).await;
    let stderr = String::from_utf8_lossy(&lock(&out.stderr)).into_owned();
    explain_exit(status, &stderr, config, when)
}

/// The pure part of [`death`]: an exit status and stderr, in words.
pub(crate) fn explain_exit(
    status: Option<std::process::ExitStatus>,
    stderr: &str,
    config: &SandboxConfig,
    when: &str,
) -> CodemodeError {
    let limits = &config.limits;
    if stderr.contains("memory allocation of") || stderr.contains("out of memory") {
        return CodemodeError::new(
            ErrorKind::Memory,
            format!(
                "the program ran out of memory (the limit is {})",
                human_bytes(limits.memory_bytes)
            ),
        );
    }
    if stderr.contains("overflowed its stack") {
        return CodemodeError::new(
            ErrorKind::Limit,
            "the program overflowed the native stack (code or data nested too deeply)",
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if status.and_then(|s| s.signal()) == Some(libc::SIGXCPU) {
            return CodemodeError::new(
                ErrorKind::Timeout,
                format!(
                    "the program used more than {} s of CPU time",
                    limits.timeout.as_secs().saturating_add(2)
                ),
            );
        }
    }
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(|l| format!(": {}", crate::tool::clip(l.trim(), 200)))
        .unwrap_or_default();
    let status = status.map_or_else(|| "no exit status".to_owned(), |s| s.to_string());
    CodemodeError::new(
        ErrorKind::Worker,
        format!("the sandbox worker stopped {when} ({status}){last}"),
    )
}

/// What the conversation hears from the engine's side.
enum Event {
    Message(ToHost),
    /// The other side is gone; the error says why.
    Gone(CodemodeError),
}

/// The outcome of one tool call: the value and its JSON text, or a message for a JS `Error`.
type ToolResult = Result<(Value, String), String>;

/// The engine's side of a conversation: a worker process or a thread.
trait Peer {
    /// The next message (never, while `read` is false). Also moves queued replies along, so
    /// keep calling it.
    async fn next(&mut self, read: bool) -> Event;
    /// Queues the reply to tool call `id`.
    fn reply(&mut self, id: u64, result: ToolResult);
    /// Bytes of replies queued but not yet taken by the other side.
    fn backlog(&self) -> usize;
    /// Ends the other side now; nobody waits for it.
    fn stop(&mut self);
}

/// A worker process that has taken its program.
struct ProcessPeer {
    child: Option<Child>,
    stdin: ChildStdin,
    out: WorkerOut,
    /// Bytes for the worker's stdin, written from `outbox[written..]`.
    outbox: Vec<u8>,
    written: usize,
    buffer: Vec<u8>,
    cap: usize,
    config: SandboxConfig,
}

impl ProcessPeer {
    fn start(worker: Worker, run: &ToEngine, inner: &Inner) -> Result<Self, CodemodeError> {
        let Worker {
            mut child,
            stdin,
            out,
        } = worker;
        if !matches!(child.try_wait(), Ok(None)) {
            return Err(CodemodeError::new(
                ErrorKind::Worker,
                "the warm worker had exited",
            ));
        }
        let limits = &inner.config.limits;
        Ok(Self {
            child: Some(child),
            stdin,
            out,
            outbox: line(run).into_bytes(),
            written: 0,
            buffer: Vec::new(),
            cap: limits
                .max_transfer_bytes
                .max(limits.max_result_bytes)
                .max(limits.max_console_bytes)
                .saturating_add(64 << 10),
            config: inner.config.clone(),
        })
    }
}

/// Reads the worker's next message, or explains its death.
async fn read_event(
    out: &mut WorkerOut,
    buffer: &mut Vec<u8>,
    cap: usize,
    child: &mut Option<Child>,
    config: &SandboxConfig,
) -> Event {
    match next_line(&mut out.stdout, buffer, cap).await {
        Ok(Some(text)) => match serde_json::from_slice::<ToHost>(&text) {
            Ok(message) => Event::Message(message),
            Err(e) => Event::Gone(CodemodeError::new(
                ErrorKind::Worker,
                format!("the sandbox worker sent an unreadable message: {e}"),
            )),
        },
        Ok(None) => match child.as_mut() {
            Some(child) => {
                Event::Gone(death(child, out, config, "while running the program").await)
            }
            None => Event::Gone(CodemodeError::new(ErrorKind::Worker, "the worker is gone")),
        },
        Err(e) => Event::Gone(CodemodeError::new(
            ErrorKind::Worker,
            format!("the sandbox worker broke the protocol: {e}"),
        )),
    }
}

impl Peer for ProcessPeer {
    async fn next(&mut self, read: bool) -> Event {
        loop {
            if self.written == self.outbox.len() {
                self.outbox.clear();
                self.written = 0;
                if !read {
                    return std::future::pending().await;
                }
                return read_event(
                    &mut self.out,
                    &mut self.buffer,
                    self.cap,
                    &mut self.child,
                    &self.config,
                )
                .await;
            }
            // Read while writing: a worker blocked on a full stdout must never wait for a
            // host blocked on a full stdin. Both operations are cancel-safe.
            tokio::select! {
                event = read_event(
                    &mut self.out,
                    &mut self.buffer,
                    self.cap,
                    &mut self.child,
                    &self.config,
                ), if read => return event,
                written = self.stdin.write(&self.outbox[self.written..]) => match written {
                    Ok(n) if n > 0 => self.written += n,
                    // The worker closed stdin: it is exiting, and its stdout will say why.
                    _ => self.written = self.outbox.len(),
                },
            }
        }
    }

    fn reply(&mut self, id: u64, result: ToolResult) {
        let text = match result {
            Ok((_, json)) => format!("{{\"t\":\"reply\",\"id\":{id},\"ok\":{json}}}\n"),
            Err(message) => line(&ToEngine::Reply {
                id,
                ok: None,
                err: Some(message),
            }),
        };
        self.outbox.extend_from_slice(text.as_bytes());
    }

    fn backlog(&self) -> usize {
        self.outbox.len() - self.written
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            tokio::spawn(async move {
                let _ = child.kill().await;
            });
        }
    }
}

/// An engine on a thread of this process ([`WorkerSpawn::InProcess`]).
struct ThreadPeer {
    events: mpsc::UnboundedReceiver<ToHost>,
    replies: Option<std::sync::mpsc::Sender<Reply>>,
}

impl ThreadPeer {
    fn start(config: &EngineConfig, run: ToEngine) -> Result<Self, CodemodeError> {
        let ToEngine::Run {
            code,
            tools,
            clock_ms,
        } = run
        else {
            return Err(CodemodeError::new(ErrorKind::Worker, "no program to run"));
        };
        let (event_tx, events) = mpsc::unbounded_channel();
        let (replies, reply_rx) = std::sync::mpsc::channel();
        let config = config.clone();
        std::thread::Builder::new()
            .name("codemode".to_owned())
            .stack_size(config.stack_bytes)
            .spawn(move || {
                let link = ChannelLink {
                    events: event_tx.clone(),
                    replies: reply_rx,
                };
                let result = Engine::new(&config).and_then(|mut engine| {
                    engine.set_clock(clock_ms);
                    engine.run(&code, &tools, Box::new(link))
                });
                let message = match result.and_then(|finished| {
                    serde_json::from_str::<Value>(&finished.json)
                        .map(|value| (value, finished.unsent))
                        .map_err(|e| {
                            CodemodeError::new(ErrorKind::Worker, format!("bad result JSON: {e}"))
                        })
                }) {
                    Ok((value, unsent)) => ToHost::Done { value, unsent },
                    Err(error) => ToHost::Failed {
                        kind: error.kind(),
                        message: error.message().to_owned(),
                    },
                };
                let _ = event_tx.send(message);
            })
            .map_err(|e| {
                CodemodeError::new(
                    ErrorKind::Worker,
                    format!("cannot start the engine thread: {e}"),
                )
            })?;
        Ok(Self {
            events,
            replies: Some(replies),
        })
    }
}

impl Peer for ThreadPeer {
    async fn next(&mut self, read: bool) -> Event {
        if !read {
            return std::future::pending().await;
        }
        match self.events.recv().await {
            Some(message) => Event::Message(message),
            None => Event::Gone(CodemodeError::new(
                ErrorKind::Worker,
                "the engine thread failed",
            )),
        }
    }

    fn reply(&mut self, id: u64, result: ToolResult) {
        if let Some(replies) = &self.replies {
            let _ = replies.send(Reply {
                id,
                result: result.map(|(value, _)| value),
            });
        }
    }

    fn backlog(&self) -> usize {
        // Replies go straight into the engine's channel.
        0
    }

    fn stop(&mut self) {
        // Without replies the engine ends at its next await; a spinning one runs on until
        // its instruction budget is spent (in-process limits are soft).
        self.replies = None;
    }
}

/// The engine's link over in-process channels.
struct ChannelLink {
    events: mpsc::UnboundedSender<ToHost>,
    replies: std::sync::mpsc::Receiver<Reply>,
}

impl Link for ChannelLink {
    fn console(&mut self, line: &str) -> bool {
        self.events
            .send(ToHost::Console {
                line: line.to_owned(),
            })
            .is_ok()
    }

    fn call(&mut self, id: u64, tool: &str, input_json: &str) -> bool {
        let input = serde_json::from_str(input_json).unwrap_or(Value::Null);
        self.events
            .send(ToHost::Call {
                id,
                tool: tool.to_owned(),
                input,
            })
            .is_ok()
    }

    fn reply(&mut self) -> Option<Reply> {
        self.replies.recv().ok()
    }
}

fn describe_timeout(timeout: Duration) -> String {
    if timeout.subsec_millis() == 0 {
        format!("{} s", timeout.as_secs())
    } else {
        format!("{} ms", timeout.as_millis())
    }
}

type CallFuture = Pin<Box<dyn Future<Output = Result<ToolResult, CodemodeError>> + Send>>;

/// Tool calls in flight (at most [`MAX_CALLS_IN_FLIGHT`]: the engine sends no more), polled
/// inside the conversation's own task: no spawn, no hop between threads on the way back.
#[derive(Default)]
struct Calls {
    running: Vec<(u64, String, CallFuture)>,
}

impl Calls {
    fn push(&mut self, id: u64, name: String, future: CallFuture) {
        self.running.push((id, name, future));
    }

    fn len(&self) -> usize {
        self.running.len()
    }

    fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// The next finished call; `Err(())` when its tool panicked.
    async fn next(&mut self) -> (u64, String, Result<Result<ToolResult, CodemodeError>, ()>) {
        std::future::poll_fn(|cx| {
            for i in 0..self.running.len() {
                let future = &mut self.running[i].2;
                let polled =
                    std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
                let result = match polled {
                    Ok(Poll::Pending) => continue,
                    Ok(Poll::Ready(result)) => Ok(result),
                    Err(_) => Err(()),
                };
                let (id, name, _) = self.running.swap_remove(i);
                return Poll::Ready((id, name, result));
            }
            Poll::Pending
        })
        .await
    }
}

/// One program's conversation, until it returns, fails, or runs out of time.
async fn converse<P: Peer>(
    inner: &Arc<Inner>,
    mut peer: P,
    tools: &HashMap<String, Arc<dyn CallableTool>>,
) -> Result<Outcome, CodemodeError> {
    let limits = &inner.config.limits;
    let deadline = Instant::now() + limits.timeout;
    let mut console = Vec::new();
    let mut console_bytes = 0usize;
    let mut calls = Calls::default();
    // Replies the worker has not read yet; past this, finished calls wait. A worker reads
    // whenever its program waits, so only a broken one stalls here, until the deadline, with
    // host memory bounded.
    let backlog_cap = limits.max_transfer_bytes.saturating_mul(2).max(1 << 20);
    let timer = tokio::time::sleep_until(deadline);
    tokio::pin!(timer);
    let result = loop {
        let can_finish = !calls.is_empty() && peer.backlog() < backlog_cap;
        tokio::select! {
            () = &mut timer => {
                break Err(CodemodeError::new(
                    ErrorKind::Timeout,
                    format!(
                        "the program ran longer than its time limit of {}",
                        describe_timeout(limits.timeout)
                    ),
                ));
            }
            (id, name, result) = calls.next(), if can_finish => match result {
                Ok(Ok(result)) => peer.reply(id, result),
                Ok(Err(fatal)) => break Err(fatal),
                Err(()) => peer.reply(id, Err(format!("tools.{name} failed unexpectedly"))),
            },
            // Always read: the engine never has more than MAX_CALLS_IN_FLIGHT calls out, so
            // reading cannot make the host hold more than that.
            event = peer.next(true) => match event {
                Event::Message(ToHost::Call { id, tool, input }) => {
                    if calls.len() >= MAX_CALLS_IN_FLIGHT {
                        break Err(CodemodeError::new(
                            ErrorKind::Worker,
                            format!(
                                "the sandbox worker broke the protocol: more than {MAX_CALLS_IN_FLIGHT} tool calls in flight"
                            ),
                        ));
                    }
                    let Some(callable) = tools.get(&tool).cloned() else {
                        peer.reply(id, Err(format!("tools.{tool} is not available")));
                        continue;
                    };
                    let inner = Arc::clone(inner);
                    calls.push(id, tool, Box::pin(async move {
                        call_tool(&inner, callable, input).await
                    }));
                }
                Event::Message(ToHost::Console { line }) => {
                    // The engine bounds its console; this only guards against a broken one.
                    if console_bytes <= limits.max_console_bytes.saturating_add(256) {
                        console_bytes += line.len();
                        console.push(line);
                    }
                }
                Event::Message(ToHost::Done { value, unsent }) => {
                    break split_attachments(value).map(|(value, attachments)| (value, attachments, unsent));
                }
                Event::Message(ToHost::Failed { kind, message }) => {
                    break Err(CodemodeError::new(kind, message));
                }
                Event::Message(ToHost::Ready { .. }) => {
                    break Err(CodemodeError::new(
                        ErrorKind::Worker,
                        "the sandbox worker broke the protocol",
                    ));
                }
                Event::Gone(error) => break Err(error),
            },
        }
    };
    peer.stop();
    let (value, attachments, unsent) = match result {
        Ok(done) => done,
        Err(error) => return Err(error.with_console(console)),
    };
    // CM-1: calls the program did not wait for never outlive it unseen. Those never sent
    // never start; those already running finish (so their effects are whole, the same every
    // run) within the program's time, and their results are dropped. Both are said.
    if unsent > 0 {
        console.push(format!(
            "[{unsent} tool call{} the program did not await {} cancelled before {} started]",
            plural(unsent),
            if unsent == 1 { "was" } else { "were" },
            if unsent == 1 { "it" } else { "they" },
        ));
    }
    let running = calls.len();
    if running > 0 {
        let finished = tokio::time::timeout_at(deadline, async {
            while !calls.is_empty() {
                let _ = calls.next().await;
            }
        })
        .await
        .is_ok();
        console.push(if finished {
            format!(
                "[{running} tool call{} the program did not await finished after it returned; {} dropped]",
                plural(running),
                if running == 1 { "its result was" } else { "their results were" },
            )
        } else {
            format!(
                "[{running} tool call{} the program did not await {} stopped at the time limit; {} dropped]",
                plural(running),
                if running == 1 { "was" } else { "were" },
                if running == 1 { "its result was" } else { "their results were" },
            )
        });
    }
    Ok(Outcome {
        value,
        attachments,
        console,
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// One tool call on the host: input schema, execute, output schema, size (CM-2, CM-3).
/// `Ok(Err(message))` becomes a catchable JS error; `Err` ends the program.
async fn call_tool(
    inner: &Inner,
    tool: Arc<dyn CallableTool>,
    input: Value,
) -> Result<ToolResult, CodemodeError> {
    let name = tool.name().to_owned();
    if let Some((path, number)) = inexact_number(&input) {
        return Ok(Err(format!(
            "invalid input for tools.{name}: the number at {path} ({number}) is beyond 2^53, where JavaScript numbers are no longer exact integers; pass it as a string"
        )));
    }
    match inner.validators.check(tool.input_schema(), &input) {
        Ok(()) => {}
        Err(SchemaProblem::Invalid(problem)) => {
            return Ok(Err(format!("invalid input for tools.{name}: {problem}")));
        }
        Err(SchemaProblem::BadSchema(problem)) => {
            return Ok(Err(format!(
                "tools.{name} cannot be called: its input schema is invalid ({problem})"
            )));
        }
    }
    let output = match tool.call(input).await {
        Ok(output) => output,
        Err(failure) => return Ok(Err(failure.message)),
    };
    if let Some(schema) = tool.output_schema() {
        match inner.validators.check(schema, &output) {
            Ok(()) => {}
            Err(SchemaProblem::Invalid(problem)) => {
                return Ok(Err(format!(
                    "tools.{name} returned a value that does not match its output schema: {problem}"
                )));
            }
            Err(SchemaProblem::BadSchema(problem)) => {
                return Ok(Err(format!(
                    "tools.{name} has an invalid output schema ({problem})"
                )));
            }
        }
    }
    // Serializing a `Value` cannot fail: its map keys are strings.
    let text = serde_json::to_string(&output).unwrap_or_default();
    let max = inner.config.limits.max_transfer_bytes;
    if text.len() > max {
        return Err(CodemodeError::new(
            ErrorKind::TransferTooLarge,
            format!(
                "tools.{name} returned {} as JSON; the per-call transfer limit is {}",
                human_bytes(text.len() as u64),
                human_bytes(max as u64)
            ),
        ));
    }
    let depth = json_depth(&text);
    if depth > MAX_JSON_DEPTH {
        return Ok(Err(format!(
            "tools.{name} returned a value nested {depth} levels deep; the limit is {MAX_JSON_DEPTH}"
        )));
    }
    Ok(Ok((output, text)))
}

/// 2^53: past it, a double no longer holds every integer, so a program's big integer (an id,
/// a byte offset) has already been rounded by the time it reaches a tool.
const EXACT_LIMIT: u64 = 1 << 53;

/// The first number in `value` whose magnitude is beyond 2^53, with its JSON Pointer path.
fn inexact_number(value: &Value) -> Option<(String, serde_json::Number)> {
    fn walk(value: &Value, path: &mut String) -> Option<(String, serde_json::Number)> {
        match value {
            Value::Number(number) => {
                let beyond = match (number.as_u64(), number.as_i64(), number.as_f64()) {
                    (Some(n), _, _) => n > EXACT_LIMIT,
                    (None, Some(n), _) => n.unsigned_abs() > EXACT_LIMIT,
                    (None, None, Some(n)) => n.abs() > EXACT_LIMIT as f64,
                    (None, None, None) => false,
                };
                beyond.then(|| {
                    let at = if path.is_empty() { "/" } else { path.as_str() };
                    (at.to_owned(), number.clone())
                })
            }
            Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                let len = path.len();
                path.push('/');
                path.push_str(&i.to_string());
                let found = walk(item, path);
                path.truncate(len);
                found
            }),
            Value::Object(map) => map.iter().find_map(|(key, item)| {
                let len = path.len();
                path.push('/');
                path.push_str(&key.replace('~', "~0").replace('/', "~1"));
                let found = walk(item, path);
                path.truncate(len);
                found
            }),
            _ => None,
        }
    }
    walk(value, &mut String::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_past_2_pow_53_are_found_with_their_path() {
        assert_eq!(
            inexact_number(&json!({ "a": [1, 9007199254740992_u64] })),
            None
        );
        assert_eq!(inexact_number(&json!(-9007199254740992_i64)), None);
        let found = |v: Value| inexact_number(&v).map(|(path, n)| format!("{path} {n}"));
        assert_eq!(
            found(json!({ "a": [1, 9007199254740993_u64] })),
            Some("/a/1 9007199254740993".to_owned())
        );
        assert_eq!(
            found(json!({ "x/y": { "~": -9007199254740994_i64 } })),
            Some("/x~1y/~0 -9007199254740994".to_owned())
        );
        assert_eq!(found(json!(1e300)), Some("/ 1e+300".to_owned()));
        assert_eq!(found(json!([0.5, -2.5e-300, "1e300"])), None);
    }
}
