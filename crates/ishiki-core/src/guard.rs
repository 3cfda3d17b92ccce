//! Limits on every tool call, direct or from a codemode program (issue 13): a deadline and a
//! cap on the bytes of the raw result (`tools.timeoutMs`, `tools.maxResultBytes`).
//!
//! An async tool (the default) is a task on the caller's runtime: at the deadline the task is
//! cancelled, and nothing of it is left running. A tool that blocks its thread (synchronous
//! work inside `execute`) says so ([`Tool::blocking`]) and runs on tokio's blocking pool,
//! driven by the runtime's handle, so it cannot stall the caller: when the deadline passes,
//! the call fails and its thread is abandoned to finish on its own. The raw result is
//! measured as JSON by a counting writer that stops at the cap, so measuring allocates
//! nothing. Over a limit, only that call fails, with an error naming the tool and the limit.
//!
//! Abandoned work is counted ([`AbandonedWork`]): a blocking call abandoned at its deadline
//! keeps its thread until it returns, so a burst of tools that never return would take the
//! whole blocking pool and stall every conversation of the process. Two limits: per tool (16 by
//! default), so that a tool that keeps stalling is refused alone while every other blocking
//! tool still runs, and per process (256 by default, half of tokio's blocking pool), a
//! backstop against many stalling tools at once. At either, a new blocking call fails at once
//! with an error that says why, and the calls already running are untouched. Both are checked
//! when a call starts, so calls started side by side before the first of them is abandoned may
//! each be abandoned: the count can pass a limit by the calls that were running when it was
//! reached, never by a call started after.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use ishiki_tool::{Tool, ToolContext, ToolError, ToolErrorKind};
use serde_json::Value;

use crate::profile::ToolsSection;

/// Tool calls abandoned at their deadline that are still running, and how many may be: shared
/// by every runtime that holds it ([`AbandonedWork::process`], the default, is one per process;
/// `RuntimeBuilder::abandoned_work` gives a group of runtimes its own).
///
/// ```
/// use ishiki_core::AbandonedWork;
///
/// let work = AbandonedWork::new(8);
/// assert_eq!((work.running(), work.limit()), (0, 8));
/// ```
#[derive(Debug)]
pub struct AbandonedWork {
    running: AtomicUsize,
    limit: usize,
    /// Abandoned calls still running, by tool name (no entry at zero).
    by_tool: Mutex<HashMap<String, usize>>,
    tool_limit: usize,
}

impl AbandonedWork {
    /// The default limit of [`AbandonedWork::process`].
    pub const PROCESS_LIMIT: usize = 256;

    /// The default limit per tool of [`AbandonedWork::process`].
    pub const TOOL_LIMIT: usize = 16;

    /// A counter of its own, allowing `limit` abandoned calls at once (at least 1), of any
    /// tools.
    pub fn new(limit: usize) -> Arc<Self> {
        Self::with_tool_limit(limit, limit)
    }

    /// A counter of its own, allowing `limit` abandoned calls at once and `tool_limit` of any
    /// one tool (each at least 1).
    ///
    /// ```
    /// use ishiki_core::AbandonedWork;
    ///
    /// let work = AbandonedWork::with_tool_limit(64, 8);
    /// assert_eq!((work.limit(), work.tool_limit(), work.running_of("fetch")), (64, 8, 0));
    /// ```
    pub fn with_tool_limit(limit: usize, tool_limit: usize) -> Arc<Self> {
        Arc::new(Self {
            running: AtomicUsize::new(0),
            limit: limit.max(1),
            by_tool: Mutex::new(HashMap::new()),
            tool_limit: tool_limit.max(1),
        })
    }

    /// The process-wide counter every runtime uses unless given another.
    pub fn process() -> Arc<Self> {
        static PROCESS: OnceLock<Arc<AbandonedWork>> = OnceLock::new();
        PROCESS
            .get_or_init(|| Self::with_tool_limit(Self::PROCESS_LIMIT, Self::TOOL_LIMIT))
            .clone()
    }

    /// Abandoned calls of the tool `name` still running.
    pub fn running_of(&self, name: &str) -> usize {
        self.tools().get(name).copied().unwrap_or(0)
    }

    /// How many abandoned calls of one tool may run at once before its new calls are refused.
    pub fn tool_limit(&self) -> usize {
        self.tool_limit
    }

    fn tools(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.by_tool
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts one more abandoned call of `name`.
    fn abandon(&self, name: &str) {
        self.running.fetch_add(1, Ordering::SeqCst);
        *self.tools().entry(name.to_owned()).or_insert(0) += 1;
    }

    /// An abandoned call of `name` returned.
    fn finished(&self, name: &str) {
        self.running.fetch_sub(1, Ordering::SeqCst);
        let mut tools = self.tools();
        if let Some(n) = tools.get_mut(name) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                tools.remove(name);
            }
        }
    }

    /// Abandoned calls still running.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// How many may run at once before new calls are refused.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// The limits of one tool call.
#[derive(Debug, Clone)]
pub(crate) struct CallLimits {
    /// The deadline of the whole call.
    pub(crate) timeout: Duration,
    /// The largest raw result, in bytes of compact JSON.
    pub(crate) max_result_bytes: u64,
    /// Where abandoned calls are counted.
    pub(crate) abandoned: Arc<AbandonedWork>,
}

impl CallLimits {
    pub(crate) fn from_profile(tools: &ToolsSection, abandoned: Arc<AbandonedWork>) -> Self {
        Self {
            timeout: Duration::from_millis(tools.timeout_ms),
            max_result_bytes: tools.max_result_bytes,
            abandoned,
        }
    }
}

/// A call's state, for counting it as abandoned exactly while it runs past its deadline.
const RUNNING: u8 = 0;
const FINISHED: u8 = 1;
const ABANDONED: u8 = 2;

/// Runs `tool.execute` under `limits`: fails when the deadline passes first (an async tool's
/// task is cancelled, a blocking tool's thread abandoned), when the tool panics, or when its
/// raw result is larger than the cap.
pub(crate) async fn execute(
    tool: Arc<dyn Tool>,
    name: &str,
    input: Value,
    context: &ToolContext,
    limits: &CallLimits,
) -> Result<Value, ToolError> {
    let raw = if tool.blocking() {
        execute_blocking(tool, name, input, context, limits).await?
    } else {
        let context = context.clone();
        let mut task = tokio::spawn(async move { tool.execute(input, &context).await });
        match tokio::time::timeout(limits.timeout, &mut task).await {
            Err(_elapsed) => {
                // Cancelled at its next await: it holds no thread and is not abandoned work.
                task.abort();
                return Err(timed_out(name, limits.timeout));
            }
            Ok(Err(join)) => return Err(stopped(name, &join)),
            Ok(Ok(result)) => result?,
        }
    };
    check_size(name, &raw, limits.max_result_bytes)?;
    Ok(raw)
}

fn stopped(name: &str, join: &tokio::task::JoinError) -> ToolError {
    ToolError::new(format!(
        "the tool `{name}` stopped unexpectedly: {}",
        if join.is_panic() {
            "it panicked"
        } else {
            "it was cancelled"
        }
    ))
}

/// A blocking tool on the blocking pool, abandoned (and counted) at its deadline.
async fn execute_blocking(
    tool: Arc<dyn Tool>,
    name: &str,
    input: Value,
    context: &ToolContext,
    limits: &CallLimits,
) -> Result<Value, ToolError> {
    let work = limits.abandoned.clone();
    let not_started = |why: String| {
        Err(ToolError::with_kind(
            ToolErrorKind::Limit,
            format!("the tool `{name}` was not started: {why}"),
        ))
    };
    let running = work.running();
    if running >= work.limit {
        return not_started(format!(
            "{running} earlier tool calls of this process are still running after their deadline (at most {} may be); try again later",
            work.limit
        ));
    }
    let of_tool = work.running_of(name);
    if of_tool >= work.tool_limit {
        return not_started(format!(
            "{of_tool} earlier calls of it are still running after their deadline (at most {} of one tool may be); it seems to hang, so try another way or try again later",
            work.tool_limit
        ));
    }
    let context = context.clone();
    let handle = tokio::runtime::Handle::current();
    let state = Arc::new(AtomicU8::new(RUNNING));
    let finished = Finished {
        state: state.clone(),
        work: work.clone(),
        name: name.to_owned(),
    };
    let task = tokio::task::spawn_blocking(move || {
        // Dropped when the call returns or panics: either way it is no longer running.
        let _finished = finished;
        handle.block_on(async move { tool.execute(input, &context).await })
    });
    match tokio::time::timeout(limits.timeout, task).await {
        Err(_elapsed) => {
            // Counted first, so the finishing thread can never take away what is not there.
            work.abandon(name);
            if state
                .compare_exchange(RUNNING, ABANDONED, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                // It finished in the meantime: nothing is left running.
                work.finished(name);
            }
            Err(timed_out(name, limits.timeout))
        }
        Ok(Err(join)) => Err(stopped(name, &join)),
        Ok(Ok(result)) => result,
    }
}

/// Marks a blocking call finished when dropped (after it returned, or while a panic unwinds),
/// and takes it off the abandoned count if it had been abandoned.
struct Finished {
    state: Arc<AtomicU8>,
    work: Arc<AbandonedWork>,
    name: String,
}

impl Drop for Finished {
    fn drop(&mut self) {
        if self.state.swap(FINISHED, Ordering::SeqCst) == ABANDONED {
            self.work.finished(&self.name);
        }
    }
}

/// Runs any future of a call under the deadline of `limits` (for calls the runtime serves
/// itself, like a direct `read`).
pub(crate) async fn with_deadline<T>(
    name: &str,
    limits: &CallLimits,
    work: impl Future<Output = Result<T, ToolError>>,
) -> Result<T, ToolError> {
    tokio::time::timeout(limits.timeout, work)
        .await
        .unwrap_or_else(|_elapsed| Err(timed_out(name, limits.timeout)))
}

pub(crate) fn timed_out(name: &str, timeout: Duration) -> ToolError {
    ToolError::with_kind(
        ToolErrorKind::Limit,
        format!(
            "the tool `{name}` did not finish within its time limit of {} ms (tools.timeoutMs); it was abandoned",
            timeout.as_millis()
        ),
    )
}

/// Fails when `raw`, as compact JSON, is larger than `max` bytes.
pub(crate) fn check_size(name: &str, raw: &Value, max: u64) -> Result<(), ToolError> {
    let mut counter = Counter { bytes: 0, max };
    if serde_json::to_writer(&mut counter, raw).is_err() {
        return Err(ToolError::with_kind(
            ToolErrorKind::Limit,
            format!(
                "the result of the tool `{name}` is larger than {max} bytes (tools.maxResultBytes): ask it for less"
            ),
        ));
    }
    Ok(())
}

/// The largest integer a JSON number carries exactly everywhere it goes (a codemode program's
/// numbers are doubles): 2^53 - 1, the same limit codemode holds calls from programs to
/// (`ishiki_codemode::MAX_EXACT_INTEGER`; a test checks they agree).
const MAX_EXACT_INTEGER: u64 = (1 << 53) - 1;

/// The first number in a tool input that cannot be carried exactly, as an error text: an
/// integer beyond ±(2^53 - 1), or a whole-valued float that large (an integer literal too long
/// for 64 bits arrives as one). Such values are refused rather than silently rounded.
pub(crate) fn imprecise_number(input: &Value) -> Option<String> {
    fn walk(value: &Value, path: &mut String) -> Option<String> {
        match value {
            Value::Number(n) => {
                let too_big = if let Some(u) = n.as_u64() {
                    u > MAX_EXACT_INTEGER
                } else if let Some(i) = n.as_i64() {
                    i.unsigned_abs() > MAX_EXACT_INTEGER
                } else {
                    n.as_f64()
                        .is_some_and(|f| f.fract() == 0.0 && f.abs() > MAX_EXACT_INTEGER as f64)
                };
                too_big.then(|| {
                    let at = if path.is_empty() { "/" } else { path.as_str() };
                    format!(
                        "at {at}: the number {n} is too large to be exact; integers must be within ±{MAX_EXACT_INTEGER} (pass larger ones as strings)"
                    )
                })
            }
            Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                let len = path.len();
                path.push_str(&format!("/{i}"));
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
    walk(input, &mut String::new())
}

/// An `io::Write` that only counts, and fails once the count passes `max`.
struct Counter {
    bytes: u64,
    max: u64,
}

impl io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes = self.bytes.saturating_add(buf.len() as u64);
        if self.bytes > self.max {
            return Err(io::Error::other("over the limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One rule for big integers, direct calls and programs alike (issue 28, point 3).
    #[cfg(feature = "codemode")]
    #[test]
    fn direct_calls_and_programs_share_one_exact_integer_limit() {
        assert_eq!(MAX_EXACT_INTEGER, ishiki_codemode::MAX_EXACT_INTEGER);
    }
    use serde_json::json;

    #[test]
    fn integers_beyond_two_to_the_53_are_refused_not_rounded() {
        let exact =
            json!({ "n": 9_007_199_254_740_991_u64, "m": -9_007_199_254_740_991_i64, "f": 1.5 });
        assert_eq!(imprecise_number(&exact), None);
        let big: Value =
            serde_json::from_str(r#"{"a": [1, {"id": 123456789012345678901234}]}"#).expect("json");
        assert_eq!(
            imprecise_number(&big).as_deref(),
            Some(
                "at /a/1/id: the number 1.2345678901234569e+23 is too large to be exact; integers must be within ±9007199254740991 (pass larger ones as strings)"
            )
        );
        let u64_big = json!({ "n": 9_007_199_254_740_993_u64 });
        assert!(
            imprecise_number(&u64_big)
                .is_some_and(|m| m.starts_with("at /n: the number 9007199254740993 "))
        );
    }

    #[test]
    fn result_size_is_measured_as_compact_json() {
        let raw = json!({ "a": "xyz" });
        // {"a":"xyz"} is 11 bytes.
        assert!(check_size("t", &raw, 11).is_ok());
        assert_eq!(
            check_size("t", &raw, 10).map_err(|e| e.message().to_owned()),
            Err("the result of the tool `t` is larger than 10 bytes (tools.maxResultBytes): ask it for less".to_owned())
        );
    }
}
