//! One program's conversation: answering `call` messages by running tools (schemas, sizes,
//! exact numbers checked), collecting console lines, and stopping at the end, the deadline or
//! the worker's death.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::peer::{Event, Peer, ToolResult};
use super::{Inner, Outcome};
use crate::attachments::split_attachments;
use crate::error::{CodemodeError, CodemodeErrorKind, human_bytes};
use crate::protocol::{MAX_CALLS_IN_FLIGHT, MAX_JSON_DEPTH, ToHost, json_depth};
use crate::tool::{CallableTool, SchemaProblem};

pub(super) fn describe_timeout(timeout: Duration) -> String {
    if timeout.subsec_millis() == 0 {
        format!("{} s", timeout.as_secs())
    } else {
        format!("{} ms", timeout.as_millis())
    }
}

pub(super) type CallFuture =
    Pin<Box<dyn Future<Output = Result<ToolResult, CodemodeError>> + Send>>;

/// What one call's future gave: its result, or `Err(())` when its tool panicked.
type Settled = Result<Result<ToolResult, CodemodeError>, ()>;

/// Tool calls in flight (at most [`MAX_CALLS_IN_FLIGHT`]: the engine sends no more), polled
/// inside the conversation's own task: no spawn, no hop between threads on the way back.
///
/// All of them run at once, but they are answered in call order (ids rise in call order): a
/// call that finishes early waits for the calls before it. The engine reads one reply each
/// time its program waits, so the order of replies is all that could make two runs differ;
/// fixed, `Promise.race` between two tool calls and what a program saw before it returned
/// depend on the program alone, never on which tool the host finished first (issue 24).
#[derive(Default)]
pub(super) struct Calls {
    /// In call order; a finished call keeps its place until the calls before it are answered.
    pub(super) running: Vec<(u64, String, Option<CallFuture>, Option<Settled>)>,
}

impl Calls {
    pub(super) fn push(&mut self, id: u64, name: String, future: CallFuture) {
        let at = self.running.partition_point(|(other, ..)| *other < id);
        self.running.insert(at, (id, name, Some(future), None));
    }

    pub(super) fn len(&self) -> usize {
        self.running.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// The first call in call order, once it has finished; every running call is polled
    /// meanwhile. `Err(())` when its tool panicked.
    pub(super) async fn next(&mut self) -> (u64, String, Settled) {
        std::future::poll_fn(|cx| {
            for (_, _, slot, settled) in &mut self.running {
                let Some(future) = slot else { continue };
                let polled =
                    std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
                let result = match polled {
                    Ok(Poll::Pending) => continue,
                    Ok(Poll::Ready(result)) => Ok(result),
                    Err(_) => Err(()),
                };
                // Dropped as soon as it is done, like a finished task.
                *slot = None;
                *settled = Some(result);
            }
            if self.running.first().is_some_and(|(.., s)| s.is_some()) {
                let (id, name, _, settled) = self.running.remove(0);
                if let Some(result) = settled {
                    return Poll::Ready((id, name, result));
                }
            }
            Poll::Pending
        })
        .await
    }
}

/// One program's conversation, until it returns, fails, or runs out of time.
pub(super) async fn converse<P: Peer>(
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
                    CodemodeErrorKind::Timeout,
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
                            CodemodeErrorKind::Worker,
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
                Event::Message(ToHost::Done { value, unsent, unanswered }) => {
                    break split_attachments(value)
                        .map(|(value, attachments)| (value, attachments, unsent, unanswered));
                }
                Event::Message(ToHost::Failed { kind, message }) => {
                    break Err(CodemodeError::new(kind, message));
                }
                Event::Message(ToHost::Ready { .. }) => {
                    break Err(CodemodeError::new(
                        CodemodeErrorKind::Worker,
                        "the sandbox worker broke the protocol",
                    ));
                }
                Event::Gone(error) => break Err(error),
            },
        }
    };
    peer.stop();
    let (value, attachments, unsent, unanswered) = match result {
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
    // The engine's count of calls whose replies the program never read: the same every run.
    // The host's own count (calls it had not answered yet) would depend on tool timing.
    let running = unanswered.max(calls.len());
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

pub(super) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// One tool call on the host: input schema, execute, output schema, size (CM-2, CM-3).
/// `Ok(Err(message))` becomes a catchable JS error; `Err` ends the program.
pub(super) async fn call_tool(
    inner: &Inner,
    tool: Arc<dyn CallableTool>,
    input: Value,
) -> Result<ToolResult, CodemodeError> {
    let name = tool.name().to_owned();
    if let Some((path, number)) = inexact_number(&input) {
        return Ok(Err(format!(
            "invalid input for tools.{name}: the number at {path} ({number}) is beyond ±{MAX_EXACT_INTEGER} (2^53 - 1), past which JavaScript numbers are no longer exact integers; pass it as a string"
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
            CodemodeErrorKind::TransferTooLarge,
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

/// The largest integer a program's number carries exactly: 2^53 - 1, JavaScript's
/// `Number.MAX_SAFE_INTEGER`. Past it a double no longer holds every integer, so a program's
/// big integer (an id, a byte offset) has already been rounded by the time it reaches a tool;
/// 2^53 itself is one (2^53 + 1 arrives as it). The runtime refuses the same numbers in
/// direct calls (`ishiki-core`'s guard checks its limit against this one).
pub const MAX_EXACT_INTEGER: u64 = (1 << 53) - 1;

/// The first number in `value` whose magnitude is beyond [`MAX_EXACT_INTEGER`], with its JSON
/// Pointer path.
pub(super) fn inexact_number(value: &Value) -> Option<(String, serde_json::Number)> {
    fn walk(value: &Value, path: &mut String) -> Option<(String, serde_json::Number)> {
        match value {
            Value::Number(number) => {
                let beyond = match (number.as_u64(), number.as_i64(), number.as_f64()) {
                    (Some(n), _, _) => n > MAX_EXACT_INTEGER,
                    (None, Some(n), _) => n.unsigned_abs() > MAX_EXACT_INTEGER,
                    (None, None, Some(n)) => n.abs() > MAX_EXACT_INTEGER as f64,
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
