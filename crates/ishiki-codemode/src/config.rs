//! Sandbox configuration: limits, determinism inputs and how workers start.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Limits one program runs under (CM-3, SEC-1).
///
/// The hard ones (`timeout`, `memory_bytes`, CPU time) are enforced by the operating system and
/// the host around a worker process; the engine ones (`instruction_budget`,
/// `loop_iteration_limit`, `recursion_limit`, `max_source_nesting`) end a spinning or runaway
/// program early with a precise message. With [`WorkerSpawn::InProcess`] only the engine ones
/// and the size limits apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock time for the whole program, tool calls included. Default 30 s.
    pub timeout: Duration,
    /// Address-space cap of the worker process (`RLIMIT_AS`), stack included. Default 1 GiB.
    pub memory_bytes: u64,
    /// Largest JSON input or output of one tool call. Default 16 MiB.
    pub max_transfer_bytes: usize,
    /// Largest final return value, as JSON. Default 4 MiB.
    pub max_result_bytes: usize,
    /// Captured `console` output kept per program; the rest is dropped with a marker. Default 16 KiB.
    pub max_console_bytes: usize,
    /// Bytecode instructions one program may execute. Default 2 000 000 000 (about ten seconds
    /// of pure JS); native work such as sorting or `JSON.parse` is bounded by the timeout
    /// instead. This is what ends a spinning loop, before or after an `await`.
    pub instruction_budget: u64,
    /// Loop iterations within one function call; `u64::MAX` (the default) turns it off. Boa
    /// loses this error when it happens after an `await` (the program then ends with a less
    /// precise message), while the instruction budget is always reported exactly.
    pub loop_iteration_limit: u64,
    /// Nested function calls. Default 10 000.
    pub recursion_limit: usize,
    /// Native stack of the thread that runs the program. Default 256 MiB (reserved address
    /// space; only touched pages use memory).
    pub stack_bytes: usize,
    /// Deepest bracket nesting accepted in the source; deeper code is refused before parsing,
    /// because the parser recurses on the native stack. Default 1000.
    pub max_source_nesting: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            memory_bytes: 1 << 30,
            max_transfer_bytes: 16 << 20,
            max_result_bytes: 4 << 20,
            max_console_bytes: 16 << 10,
            instruction_budget: 2_000_000_000,
            loop_iteration_limit: u64::MAX,
            recursion_limit: 10_000,
            stack_bytes: 256 << 20,
            max_source_nesting: 1000,
        }
    }
}

/// How the sandbox starts the process a program runs in (SEC-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkerSpawn {
    /// Re-execute the current binary in worker mode; its `main()` must call
    /// [`run_if_worker`](crate::run_if_worker) first.
    CurrentExe,
    /// Execute this program in worker mode (for example the `ishiki-codemode-worker` binary).
    Program(PathBuf),
    /// Run on a thread of the calling process. Soft limits only: no memory cap, and a program
    /// that outlives its timeout keeps a thread busy until its instruction budget ends. For
    /// tests and trusted code.
    InProcess,
}

/// Everything a [`Sandbox`](crate::Sandbox) needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// How workers start.
    pub worker: WorkerSpawn,
    /// Limits for each program.
    pub limits: Limits,
    /// What `Date.now()` returns, in milliseconds since the Unix epoch: programs are
    /// deterministic, the clock does not move while they run. `Sandbox::run_at` overrides it
    /// per program.
    pub clock_ms: u64,
    /// Seed of `Math.random`.
    pub random_seed: u64,
    /// Workers kept started, with their engine built, waiting for a program. Each runs exactly
    /// one program. Ignored for [`WorkerSpawn::InProcess`].
    pub prespawn: usize,
    /// Start workers by forking them from a fork server (Linux): one process per sandbox,
    /// started from the worker program, that builds an engine once; each worker is a fresh
    /// copy of it taken before any program ran, confined as an executed worker is. A start
    /// then costs a fork instead of an exec, a dynamic link and an engine build. When the
    /// server cannot start (an older worker binary, a kernel before 5.3), workers are
    /// executed. Default `true`; ignored elsewhere and for [`WorkerSpawn::InProcess`].
    pub fork_server: bool,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            worker: WorkerSpawn::CurrentExe,
            limits: Limits::default(),
            clock_ms: 0,
            random_seed: 0,
            prespawn: 1,
            fork_server: true,
        }
    }
}

/// What the engine inside a worker needs; sent once when the worker starts.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct EngineConfig {
    pub(crate) memory_bytes: u64,
    pub(crate) cpu_seconds: u64,
    pub(crate) max_transfer_bytes: usize,
    pub(crate) max_result_bytes: usize,
    pub(crate) max_console_bytes: usize,
    pub(crate) instruction_budget: u64,
    pub(crate) loop_iteration_limit: u64,
    pub(crate) recursion_limit: usize,
    pub(crate) stack_bytes: usize,
    pub(crate) max_source_nesting: usize,
    pub(crate) clock_ms: u64,
    pub(crate) random_seed: u64,
}

impl EngineConfig {
    pub(crate) fn from_config(config: &SandboxConfig) -> Self {
        let limits = &config.limits;
        Self {
            memory_bytes: limits.memory_bytes,
            // A backstop for a host that stopped watching: the wall clock normally ends a
            // program first, and the engine build before the program counts too.
            cpu_seconds: limits.timeout.as_secs().saturating_add(2),
            max_transfer_bytes: limits.max_transfer_bytes,
            max_result_bytes: limits.max_result_bytes,
            max_console_bytes: limits.max_console_bytes,
            instruction_budget: limits.instruction_budget,
            loop_iteration_limit: limits.loop_iteration_limit,
            recursion_limit: limits.recursion_limit,
            stack_bytes: limits.stack_bytes,
            max_source_nesting: limits.max_source_nesting,
            clock_ms: config.clock_ms,
            random_seed: config.random_seed,
        }
    }
}
