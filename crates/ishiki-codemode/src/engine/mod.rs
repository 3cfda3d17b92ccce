//! The Boa engine as the sandbox shapes it, and one program's run on it.
//!
//! An [`Engine`] is built before its program arrives (so a warm worker pays neither process
//! start nor realm creation), runs exactly one program, and is dropped. What the program can
//! reach is decided here: `tools`, a bounded `console`, a seeded `Math.random`, a `Date` frozen
//! at the host's clock — and nothing else: no module loader, no `eval` or `Function`, no
//! timers, no `WeakRef` (its timing would make runs differ).
//!
//! Tool calls leave through a [`Link`]. A call returns a pending promise at once and is queued;
//! queued calls are sent, as one batch of at most [`MAX_CALLS_IN_FLIGHT`] unanswered calls, only
//! when the microtask queue is empty and the program waits — then the engine blocks on the link
//! for the next reply, and tops the batch up as replies come in. So the program never has more
//! calls outstanding than the host will run (flow control without unbounded buffers), and calls
//! a program never waited for are never sent: which calls run depends on the program alone, not
//! on timing. Errors the engine cannot let JavaScript catch (limits, a fatal transfer)
//! surface from the job queue here instead of leaving the program's promise pending forever.

mod nesting;
pub(crate) mod strings;

use crate::config::EngineConfig;
use crate::error::{CodemodeError, ErrorKind, human_bytes};
use crate::protocol::{MAX_CALLS_IN_FLIGHT, MAX_JSON_DEPTH};
use crate::tool::{clip, is_callable_name};
use boa_engine::builtins::promise::{PromiseState, ResolvingFunctions};
use boa_engine::context::time::{Clock, JsInstant};
use boa_engine::context::{ContextBuilder, HostHooks};
use boa_engine::error::{EngineError, PanicError, RuntimeLimitError};
use boa_engine::job::{Job, JobExecutor};
use boa_engine::module::{Module, ModuleLoader, ModuleRequest, Referrer};
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::object::builtins::{JsFunction, JsPromise, JsProxyBuilder};
use boa_engine::property::{PropertyDescriptor, PropertyKey};
use boa_engine::realm::Realm;
use boa_engine::script::Script;
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, Source,
};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// The engine's side of the channel to the host.
pub(crate) trait Link {
    /// Sends one line of console output; false when the host is gone.
    fn console(&mut self, line: &str) -> bool;
    /// Sends tool call `id` with input that is valid JSON text (it may stay buffered until
    /// [`flush`](Self::flush)); false when the host is gone.
    fn call(&mut self, id: u64, tool: &str, input_json: &str) -> bool;
    /// Sends what [`call`](Self::call) buffered; false when the host is gone.
    fn flush(&mut self) -> bool {
        true
    }
    /// Waits for the next tool reply; `None` when the host is gone.
    fn reply(&mut self) -> Option<Reply>;
}

/// The outcome of one tool call, as the host reports it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    pub(crate) id: u64,
    pub(crate) result: Result<Value, String>,
}

/// A program's successful end: its return value as JSON text, and how many of its tool calls
/// were never sent because it returned without waiting for them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finished {
    pub(crate) json: String,
    pub(crate) unsent: usize,
}

/// A tool call made but not sent yet.
struct QueuedCall {
    id: u64,
    tool: String,
    input: String,
}

/// A built engine waiting for its one program.
pub(crate) struct Engine {
    context: Context,
    config: EngineConfig,
    session: Rc<RefCell<Session>>,
    clock: Rc<FrozenClock>,
}

/// The time `Date` sees: set by the host, still while the program runs.
struct FrozenClock(Cell<u64>);

impl Clock for FrozenClock {
    fn now(&self) -> JsInstant {
        let ms = self.0.get();
        JsInstant::new(ms / 1000, u32::try_from(ms % 1000).unwrap_or(0) * 1_000_000)
    }

    fn system_time_millis(&self) -> i64 {
        i64::try_from(self.0.get()).unwrap_or(i64::MAX)
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

/// Immutable pieces the natives need, kept in the context's host data.
struct Shared {
    /// The original `JSON.stringify`: programs may replace the global one.
    stringify: JsFunction,
    /// A replacer that stops `stringify` past [`MAX_JSON_DEPTH`]: Boa's `stringify` is
    /// quadratic in depth (seconds for a 10 000-deep object), so depth is checked on the way.
    depth_guard: JsFunction,
    config: EngineConfig,
}

/// Per-program state the natives and the run loop share.
struct Session {
    link: Option<Box<dyn Link>>,
    next_id: u64,
    /// Promises of calls made and not settled: the queued ones and those in flight.
    pending: HashMap<u64, ResolvingFunctions>,
    /// Calls made but not sent; they leave when the program waits.
    queued: VecDeque<QueuedCall>,
    /// Calls sent and not answered yet.
    in_flight: usize,
    console_used: usize,
    console_closed: bool,
    /// A failure decided by a native function; it wins over the error that unwinds to us.
    fatal: Option<CodemodeError>,
    rng: u64,
    /// The containers `stringify` is inside, outermost first (see `depth_guard`).
    json_path: Vec<JsObject>,
    /// Set when `depth_guard` stopped a conversion.
    json_too_deep: bool,
    /// The callable tools, sorted, for the message about a name that is none.
    tool_names: Vec<String>,
}

type SessionRef = Rc<RefCell<Session>>;

impl Session {
    /// Sends queued calls, oldest first, until [`MAX_CALLS_IN_FLIGHT`] are unanswered, as one
    /// batch; false when the host is gone.
    fn send_queued(&mut self) -> bool {
        let Some(link) = self.link.as_mut() else {
            return false;
        };
        let mut sent = false;
        while self.in_flight < MAX_CALLS_IN_FLIGHT {
            let Some(call) = self.queued.pop_front() else {
                break;
            };
            if !link.call(call.id, &call.tool, &call.input) {
                return false;
            }
            self.in_flight += 1;
            sent = true;
        }
        !sent || link.flush()
    }
}

struct Hooks {
    max_buffer: u64,
}

impl HostHooks for Hooks {
    fn ensure_can_compile_strings(
        &self,
        _realm: Realm,
        _parameters: &[JsString],
        _body: &JsString,
        _direct: bool,
        _context: &mut Context,
    ) -> JsResult<()> {
        Err(JsNativeError::eval()
            .with_message("eval and new Function are disabled in codemode; write the code directly")
            .into())
    }

    fn local_timezone_offset_seconds(&self, _unix_time_seconds: i64) -> i32 {
        // UTC everywhere: the host's time zone must not change a program's output.
        0
    }

    fn max_buffer_size(&self, _context: &mut Context) -> u64 {
        self.max_buffer
    }
}

/// Refuses every module: `import()` rejects at once instead of reading files.
struct NoModules;

impl ModuleLoader for NoModules {
    fn load_imported_module(
        self: Rc<Self>,
        _referrer: Referrer,
        _request: ModuleRequest,
        _context: &RefCell<&mut Context>,
    ) -> impl Future<Output = JsResult<Module>> {
        std::future::ready(Err(JsNativeError::typ()
            .with_message("import() is not available in codemode; reach data through tools")
            .into()))
    }
}

/// A FIFO of jobs. The sandbox offers no timers or finalizers, so such jobs are dropped; the
/// only host futures are module loads, which [`NoModules`] settles at once. A job that fails
/// carries an error JavaScript could not catch, which ends the program.
#[derive(Default)]
struct Jobs {
    queue: RefCell<VecDeque<Job>>,
}

impl JobExecutor for Jobs {
    fn enqueue_job(self: Rc<Self>, job: Job, _context: &mut Context) {
        if matches!(
            job,
            Job::PromiseJob(_) | Job::GenericJob(_) | Job::AsyncJob(_)
        ) {
            self.queue.borrow_mut().push_back(job);
        }
    }

    fn run_jobs(self: Rc<Self>, context: &mut Context) -> JsResult<()> {
        loop {
            let next = self.queue.borrow_mut().pop_front();
            let result = match next {
                None => break,
                Some(Job::PromiseJob(job)) => job.call(context),
                Some(Job::GenericJob(job)) => job.call(context),
                Some(Job::AsyncJob(job)) => {
                    let context = RefCell::new(&mut *context);
                    let mut future = job.call(&context);
                    let mut poll = std::task::Context::from_waker(std::task::Waker::noop());
                    match std::pin::Pin::new(&mut future).poll(&mut poll) {
                        std::task::Poll::Ready(result) => result,
                        // Nothing here waits on the outside world; a future that does is dropped.
                        std::task::Poll::Pending => Ok(JsValue::undefined()),
                    }
                }
                Some(_) => Ok(JsValue::undefined()),
            };
            if let Err(error) = result {
                self.queue.borrow_mut().clear();
                return Err(error);
            }
        }
        context.clear_kept_objects();
        Ok(())
    }
}

/// A program touching the paths most programs take: tool call, promises, strings, arrays,
/// JSON, exceptions, console.
const WARM_UP: &str = r#"
const r = await tools.t({ a: [1, "x", true, null], b: { c: 1.5 } });
const lines = String(r.text).split("\n").filter((l) => l.startsWith("a")).map((l) => l.trim());
let n = 0;
for (const l of lines) { n += l.length; }
const o = { n, s: lines.join(","), j: JSON.parse(JSON.stringify({ k: [1, 2] })), i: r.text.indexOf("b") };
try { throw new Error("x"); } catch (e) { o.e = e.message; }
console.log("warm", o);
return o;
"#;

/// Answers the warm-up program's tool call at once.
struct WarmUpLink(u64);

impl Link for WarmUpLink {
    fn console(&mut self, _line: &str) -> bool {
        true
    }

    fn call(&mut self, id: u64, _tool: &str, _input_json: &str) -> bool {
        self.0 = id;
        true
    }

    fn reply(&mut self) -> Option<Reply> {
        Some(Reply {
            id: self.0,
            result: Ok(serde_json::json!({ "text": "a1\nb2\na3" })),
        })
    }
}

/// Runs a throwaway program on a throwaway engine, so the first real program does not pay
/// for a fresh process: code pages faulted in, allocator arenas grown. Worth about half of a
/// small program's latency in a new worker.
pub(crate) fn warm_up(config: &EngineConfig) {
    if let Ok(mut engine) = Engine::new(config) {
        let _ = engine.run(WARM_UP, &["t".to_owned()], Box::new(WarmUpLink(0)));
    }
}

fn engine_failure(error: impl std::fmt::Display) -> CodemodeError {
    CodemodeError::new(
        ErrorKind::Worker,
        format!("the sandbox engine could not start: {error}"),
    )
}

impl Engine {
    /// Builds the realm and installs the sandbox's globals.
    pub(crate) fn new(config: &EngineConfig) -> Result<Self, CodemodeError> {
        let hooks = Rc::new(Hooks {
            max_buffer: (config.memory_bytes / 4).max(1 << 20),
        });
        let clock = Rc::new(FrozenClock(Cell::new(config.clock_ms)));
        let mut context = ContextBuilder::new()
            .host_hooks(hooks)
            .clock(Rc::clone(&clock))
            .job_executor(Rc::new(Jobs::default()))
            .module_loader(Rc::new(NoModules))
            .instructions_remaining(
                usize::try_from(config.instruction_budget).unwrap_or(usize::MAX),
            )
            .build()
            .map_err(engine_failure)?;
        let limits = context.runtime_limits_mut();
        limits.set_loop_iteration_limit(config.loop_iteration_limit);
        limits.set_recursion_limit(config.recursion_limit);
        // The value stack grows with recursion depth and argument counts; keep it in step with
        // the recursion limit so that limit, not this one, is what deep code meets.
        limits.set_stack_size_limit(config.recursion_limit.saturating_mul(64).max(1 << 16));
        limits.set_backtrace_limit(8);

        let session = Rc::new(RefCell::new(Session {
            link: None,
            next_id: 0,
            pending: HashMap::new(),
            queued: VecDeque::new(),
            in_flight: 0,
            console_used: 0,
            console_closed: false,
            fatal: None,
            rng: splitmix(config.random_seed),
            json_path: Vec::new(),
            json_too_deep: false,
            tool_names: Vec::new(),
        }));
        install_globals(&mut context).map_err(engine_failure)?;
        strings::install(&mut context).map_err(engine_failure)?;
        let json = context
            .global_object()
            .get(JsString::from("JSON"), &mut context)
            .map_err(engine_failure)?;
        let stringify = json
            .as_object()
            .map(|json| json.get(JsString::from("stringify"), &mut context))
            .transpose()
            .map_err(engine_failure)?
            .and_then(|f| f.as_object())
            .and_then(JsFunction::from_object)
            .ok_or_else(|| engine_failure("JSON.stringify is missing"))?;
        let depth_guard =
            FunctionObjectBuilder::new(context.realm(), NativeFunction::from_fn_ptr(depth_guard))
                .length(2)
                .build();
        context.insert_data(Shared {
            stringify,
            depth_guard,
            config: config.clone(),
        });
        context.insert_data(Rc::clone(&session));
        Ok(Self {
            context,
            config: config.clone(),
            session,
            clock,
        })
    }

    /// Sets what `Date.now()` returns for the program about to run.
    pub(crate) fn set_clock(&self, clock_ms: u64) {
        self.clock.0.set(clock_ms);
    }

    /// Runs `code` as the body of an async function with `tools` callable; returns the
    /// return value as JSON text (checked for size and depth).
    pub(crate) fn run(
        &mut self,
        code: &str,
        tools: &[String],
        link: Box<dyn Link>,
    ) -> Result<Finished, CodemodeError> {
        self.session.borrow_mut().link = Some(link);
        let depth = nesting::max_nesting(code);
        if depth > self.config.max_source_nesting {
            return Err(CodemodeError::new(
                ErrorKind::Limit,
                format!(
                    "the program nests brackets {depth} levels deep; the limit is {}",
                    self.config.max_source_nesting
                ),
            ));
        }
        install_tools(&mut self.context, tools)
            .map_err(|e| engine_failure(format!("tools: {e}")))?;
        self.session.borrow_mut().tool_names = tools
            .iter()
            .filter(|name| is_callable_name(name))
            .cloned()
            .collect();

        // Line 1 of the program stays line 2 of the script; messages are renumbered below.
        let wrapped = format!("(async function () {{\n{code}\n}})");
        let script = Script::parse(
            Source::from_bytes(wrapped.as_bytes()),
            None,
            &mut self.context,
        )
        .map_err(|e| syntax_error(&e, code.lines().count() + 1))?;
        let function = script
            .evaluate(&mut self.context)
            .map_err(|e| self.classify(e))?;
        let Some(function) = function.as_callable() else {
            return Err(CodemodeError::new(
                ErrorKind::Syntax,
                "syntax error: the program closes more braces than it opens",
            ));
        };
        let promise = function
            .call(&JsValue::undefined(), &[], &mut self.context)
            .map_err(|e| self.classify(e))?;
        let Some(promise) = promise.as_promise() else {
            return Err(CodemodeError::new(
                ErrorKind::Syntax,
                "syntax error: the program closes more braces than it opens",
            ));
        };
        self.drive(&promise)
    }

    /// Runs jobs and answers tool calls until the program's promise settles.
    fn drive(&mut self, promise: &JsPromise) -> Result<Finished, CodemodeError> {
        loop {
            if let Err(error) = self.context.run_jobs() {
                return Err(self.classify(error));
            }
            if let Some(fatal) = self.session.borrow_mut().fatal.take() {
                return Err(fatal);
            }
            match promise.state() {
                PromiseState::Fulfilled(value) => {
                    let json = self.result_json(&value)?;
                    let unsent = self.session.borrow().queued.len();
                    return Ok(Finished { json, unsent });
                }
                PromiseState::Rejected(value) => {
                    let described = describe_uncaught(&value, &mut self.context);
                    if let Some(fatal) = self.session.borrow_mut().fatal.take() {
                        return Err(fatal);
                    }
                    return Err(self.uncaught(described));
                }
                PromiseState::Pending => {}
            }
            let reply = {
                let mut session = self.session.borrow_mut();
                if session.pending.is_empty() {
                    return Err(self.stalled());
                }
                if !session.send_queued() {
                    None
                } else {
                    session.link.as_mut().and_then(|link| link.reply())
                }
            };
            let Some(reply) = reply else {
                return Err(CodemodeError::new(
                    ErrorKind::Worker,
                    "the host stopped answering tool calls",
                ));
            };
            self.settle(reply)?;
        }
    }

    /// Why the program's promise is still pending with nothing left to run.
    ///
    /// Boa drops an uncatchable error raised after an `await` (the continuation discards the
    /// resumed function's completion), so a limit hit there leaves the promise pending. The
    /// instruction budget can be read back, so that case is named precisely.
    fn stalled(&self) -> CodemodeError {
        if self.context.instructions_remaining() == 0 {
            return engine_error(&EngineError::NoInstructionsRemain, &self.config);
        }
        let loops = if self.config.loop_iteration_limit == u64::MAX {
            String::new()
        } else {
            format!(
                " or the loop limit ({} iterations in one call)",
                self.config.loop_iteration_limit
            )
        };
        CodemodeError::new(
            ErrorKind::Limit,
            format!(
                "the program stopped without returning: it awaits a promise that nothing settles, or after an await it hit the recursion limit ({} nested calls){loops}",
                self.config.recursion_limit
            ),
        )
    }

    /// Resolves or rejects the promise of one tool call.
    fn settle(&mut self, reply: Reply) -> Result<(), CodemodeError> {
        let resolvers = {
            let mut session = self.session.borrow_mut();
            // Ids rise in call order and calls leave in that order: every queued id is at least
            // the first queued one.
            let queued = session
                .queued
                .front()
                .is_some_and(|call| reply.id >= call.id);
            match session.pending.remove(&reply.id) {
                Some(resolvers) if !queued => {
                    session.in_flight = session.in_flight.saturating_sub(1);
                    resolvers
                }
                Some(resolvers) => {
                    // Not sent yet, so not the host's to answer: keep waiting for the real one.
                    session.pending.insert(reply.id, resolvers);
                    return Ok(());
                }
                // A reply for a call this program never made: ignore it rather than trust it.
                None => return Ok(()),
            }
        };
        let context = &mut self.context;
        let outcome = match reply.result {
            Ok(value) => match JsValue::from_json(&value, context) {
                Ok(value) => resolvers
                    .resolve
                    .call(&JsValue::undefined(), &[value], context),
                Err(error) => {
                    let error = error.into_opaque(context).unwrap_or_default();
                    resolvers
                        .reject
                        .call(&JsValue::undefined(), &[error], context)
                }
            },
            Err(message) => {
                let error = JsNativeError::error()
                    .with_message(message)
                    .into_opaque(context);
                resolvers
                    .reject
                    .call(&JsValue::undefined(), &[error.into()], context)
            }
        };
        outcome.map(|_| ()).map_err(|e| self.classify(e))
    }

    /// Converts the return value with the original `JSON.stringify`, within the result limit.
    fn result_json(&mut self, value: &JsValue) -> Result<String, CodemodeError> {
        let text = match to_json(value, &mut self.context) {
            Ok(text) => text,
            Err(error) if error.as_engine().is_some() => return Err(self.classify(error)),
            Err(_) if self.session.borrow().json_too_deep => {
                return Err(CodemodeError::new(
                    ErrorKind::Limit,
                    format!("the return value nests more than {MAX_JSON_DEPTH} levels deep"),
                ));
            }
            Err(error) => {
                let thrown = error.into_opaque(&mut self.context).unwrap_or_default();
                let described = describe_thrown(&thrown, &mut self.context);
                return Err(CodemodeError::new(
                    ErrorKind::Thrown,
                    format!("the return value cannot be converted to JSON: {described}"),
                ));
            }
        };
        let Some(text) = text else {
            // `undefined`, a function or a symbol: JSON has no such value.
            return Ok("null".to_owned());
        };
        let size = utf8_len(&text);
        if size > self.config.max_result_bytes {
            return Err(CodemodeError::new(
                ErrorKind::ResultTooLarge,
                format!(
                    "the return value is {} as JSON; the limit is {} (return less, or write it somewhere with a tool and return its URL)",
                    human_bytes(size as u64),
                    human_bytes(self.config.max_result_bytes as u64)
                ),
            ));
        }
        let text = json_string(&text);
        let depth = crate::protocol::json_depth(&text);
        if depth > MAX_JSON_DEPTH {
            return Err(CodemodeError::new(
                ErrorKind::Limit,
                format!(
                    "the return value nests {depth} levels deep; the limit is {MAX_JSON_DEPTH}"
                ),
            ));
        }
        Ok(text)
    }

    /// Turns an error that reached the Rust side into the program's failure.
    fn classify(&mut self, error: JsError) -> CodemodeError {
        if let Some(fatal) = self.session.borrow_mut().fatal.take() {
            return fatal;
        }
        if let Some(engine) = error.as_engine() {
            return engine_error(engine, &self.config);
        }
        let thrown = error.into_opaque(&mut self.context).unwrap_or_default();
        let described = describe_uncaught(&thrown, &mut self.context);
        self.uncaught(described)
    }

    /// An uncaught exception; Boa reports a failed buffer allocation (the address-space cap)
    /// as a `RangeError`, which is really the memory limit.
    fn uncaught(&self, described: String) -> CodemodeError {
        if described.starts_with("RangeError") && described.contains("while allocating") {
            return CodemodeError::new(
                ErrorKind::Memory,
                format!(
                    "the program ran out of memory (the limit is {}; a buffer could not be allocated)",
                    human_bytes(self.config.memory_bytes)
                ),
            );
        }
        CodemodeError::new(ErrorKind::Thrown, format!("uncaught {described}"))
    }
}

fn engine_error(error: &EngineError, config: &EngineConfig) -> CodemodeError {
    let message = match error {
        EngineError::RuntimeLimit(RuntimeLimitError::LoopIteration) => format!(
            "the program ran more than {} loop iterations in one function call; it probably loops forever",
            config.loop_iteration_limit
        ),
        EngineError::RuntimeLimit(RuntimeLimitError::Recursion) => format!(
            "the program nested function calls more than {} deep; it probably recurses without end",
            config.recursion_limit
        ),
        EngineError::RuntimeLimit(RuntimeLimitError::StackSize) => {
            "the program overflowed the engine's value stack (deep recursion or a huge argument list)"
                .to_owned()
        }
        EngineError::NoInstructionsRemain => format!(
            "the program used its whole budget of {} instructions; it probably loops forever",
            config.instruction_budget
        ),
        EngineError::Panic(panic) => {
            // Boa wraps a limit met inside some built-ins (a promise capability for a deeply
            // recursing async function) in an internal "cannot fail per spec" panic: name the
            // limit instead.
            if let Some(limit) = limit_behind(panic) {
                return engine_error(&limit, config);
            }
            return CodemodeError::new(
                ErrorKind::Worker,
                format!("the engine failed: {}", clip(panic.message(), 200)),
            );
        }
    };
    CodemodeError::new(ErrorKind::Limit, message)
}

/// The runtime limit or budget error a Boa panic was raised for, if any.
fn limit_behind(panic: &PanicError) -> Option<EngineError> {
    let mut source = std::error::Error::source(panic);
    while let Some(error) = source {
        let js = error
            .downcast_ref::<JsError>()
            .or_else(|| error.downcast_ref::<Box<JsError>>().map(AsRef::as_ref));
        match js.and_then(JsError::as_engine) {
            Some(EngineError::Panic(inner)) => return limit_behind(inner),
            Some(engine) => return Some(engine.clone()),
            None => {}
        }
        source = error.source();
    }
    None
}

/// Renumbers "at line N" in a parser message for the wrapper's first line. An error on the
/// wrapper's closing line (after `last_program_line`) means the program left something open,
/// which swallowed the wrapper's own `})`.
fn syntax_error(error: &JsError, last_program_line: usize) -> CodemodeError {
    const UNCLOSED: &str = "the program ends early (an unclosed bracket, string or comment?)";
    let raw = error
        .as_native()
        .map(|native| native.message().to_owned())
        .unwrap_or_else(|| error.to_string());
    let mut message = String::with_capacity(raw.len());
    let mut rest = raw.as_str();
    let mut past_end = false;
    while let Some(at) = rest.find("line ") {
        let (head, tail) = rest.split_at(at + "line ".len());
        message.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        match tail[..digits].parse::<usize>() {
            Ok(line) => {
                past_end |= line > last_program_line;
                message.push_str(&line.saturating_sub(1).max(1).to_string());
            }
            Err(_) => message.push_str(&tail[..digits]),
        }
        rest = &tail[digits..];
    }
    message.push_str(rest);
    let message = if past_end || message == "abrupt end" {
        UNCLOSED.to_owned()
    } else {
        message
    };
    CodemodeError::new(
        ErrorKind::Syntax,
        format!("syntax error: {}", clip(&message, 300)),
    )
}

fn shared(context: &Context) -> JsResult<&Shared> {
    context.get_data::<Shared>().ok_or_else(|| {
        JsNativeError::typ()
            .with_message("sandbox state is missing")
            .into()
    })
}

fn session(context: &Context) -> JsResult<SessionRef> {
    context.get_data::<SessionRef>().cloned().ok_or_else(|| {
        JsNativeError::typ()
            .with_message("sandbox state is missing")
            .into()
    })
}

/// Ends the program with `failure`, past any `try`/`catch` in it.
fn fatal(context: &Context, failure: CodemodeError) -> JsError {
    if let Ok(session) = session(context) {
        session.borrow_mut().fatal = Some(failure);
    }
    PanicError::new("codemode: program stopped by the sandbox").into()
}

/// Defines a non-enumerable, non-constructor native method `name` on `object`.
pub(super) fn define_function(
    object: &JsObject,
    name: &str,
    length: usize,
    function: NativeFunction,
    context: &mut Context,
) -> JsResult<()> {
    let function = FunctionObjectBuilder::new(context.realm(), function)
        .name(JsString::from(name))
        .length(length)
        .constructor(false)
        .build();
    object.define_property_or_throw(
        JsString::from(name),
        PropertyDescriptor::builder()
            .value(function)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        context,
    )?;
    Ok(())
}

/// `console`, `Math.random`, and removal of what makes runs differ.
fn install_globals(context: &mut Context) -> JsResult<()> {
    let global = context.global_object();
    for name in ["WeakRef", "FinalizationRegistry"] {
        global.delete_property_or_throw(JsString::from(name), context)?;
    }
    let math = global.get(JsString::from("Math"), context)?;
    if let Some(math) = math.as_object() {
        define_function(
            &math,
            "random",
            0,
            NativeFunction::from_fn_ptr(random),
            context,
        )?;
    }
    let console = JsObject::with_object_proto(context.intrinsics());
    for (name, level) in [
        ("log", 0u8),
        ("info", 0),
        ("debug", 0),
        ("warn", 1),
        ("error", 2),
    ] {
        let function = NativeFunction::from_copy_closure(match level {
            1 => console_warn,
            2 => console_error,
            _ => console_log,
        });
        define_function(&console, name, 0, function, context)?;
    }
    global.define_property_or_throw(
        JsString::from("console"),
        PropertyDescriptor::builder()
            .value(console)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        context,
    )?;
    Ok(())
}

/// The `tools` object: one function per callable name, nothing inherited.
fn install_tools(context: &mut Context, tools: &[String]) -> JsResult<()> {
    let object = JsObject::with_null_proto();
    for name in tools.iter().filter(|name| is_callable_name(name)) {
        let function = NativeFunction::from_copy_closure_with_captures(
            call_tool,
            JsString::from(name.as_str()),
        );
        let function = FunctionObjectBuilder::new(context.realm(), function)
            .name(JsString::from(name.as_str()))
            .length(1)
            .constructor(false)
            .build();
        object.create_data_property_or_throw(JsString::from(name.as_str()), function, context)?;
    }
    // `finish` and `wait` exist only as direct calls (CM-4): say so instead of "not a function".
    for name in crate::tool::RESERVED_TOOL_NAMES {
        let function =
            NativeFunction::from_copy_closure_with_captures(reserved_tool, JsString::from(name));
        let function = FunctionObjectBuilder::new(context.realm(), function)
            .name(JsString::from(name))
            .length(1)
            .constructor(false)
            .build();
        // Not enumerable: `Object.keys(tools)` lists what a program can call.
        object.define_property_or_throw(
            JsString::from(name),
            PropertyDescriptor::builder()
                .value(function)
                .writable(false)
                .enumerable(false)
                .configurable(false),
            context,
        )?;
    }
    // Reading a name that is no tool throws a TypeError naming it, instead of Boa's nameless
    // "not a callable function" at the call.
    let proxy = JsProxyBuilder::new(object).get(tools_get).build(context)?;
    context.global_object().define_property_or_throw(
        JsString::from("tools"),
        PropertyDescriptor::builder()
            .value(proxy)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        context,
    )?;
    Ok(())
}

/// Names JavaScript itself probes on objects (`await tools`, `JSON.stringify(tools)`,
/// `String(tools)`): reading them gives `undefined`, as on a plain object, rather than an error.
const PROBED_NAMES: [&str; 5] = ["then", "toJSON", "toString", "valueOf", "constructor"];

/// The `get` trap of `tools`: a tool, or a TypeError that names the missing one.
fn tools_get(_this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let Some(target) = args.first().and_then(JsValue::as_object) else {
        return Ok(JsValue::undefined());
    };
    let key = args
        .get(1)
        .cloned()
        .unwrap_or_default()
        .to_property_key(context)?;
    if matches!(key, PropertyKey::Symbol(_)) || target.has_own_property(key.clone(), context)? {
        return target.get(key, context);
    }
    let name = key.to_string();
    if PROBED_NAMES.contains(&name.as_str()) {
        return Ok(JsValue::undefined());
    }
    let names = session(context)?.borrow().tool_names.clone();
    let listed = if names.is_empty() {
        "this program has no tools".to_owned()
    } else {
        const SHOWN: usize = 30;
        let mut listed = format!(
            "the tools are {}",
            names
                .iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
        if names.len() > SHOWN {
            listed.push_str(&format!(" and {} more", names.len() - SHOWN));
        }
        listed
    };
    Err(JsNativeError::typ()
        .with_message(format!(
            "tools.{} is not a tool; {listed}",
            clip(&name, 100)
        ))
        .into())
}

/// `tools.finish` / `tools.wait`: direct-only tools, refused with a message that says why.
fn reserved_tool(
    _this: &JsValue,
    _args: &[JsValue],
    name: &JsString,
    _context: &mut Context,
) -> JsResult<JsValue> {
    let tool = name.to_std_string_lossy();
    Err(JsNativeError::typ()
        .with_message(format!(
            "tools.{tool} cannot be called from a program: {tool} is a direct call only; return what the next step needs and call {tool} directly"
        ))
        .into())
}

/// Tool calls a program may have waiting for results at once: enough for any `Promise.all`
/// a model writes, few enough that calling in a loop without `await` stops at once. Going past
/// it ends the program (a `try` around the call cannot turn it into a spin that only the
/// instruction budget ends).
const MAX_PENDING_CALLS: usize = 1024;

/// `tools.<name>(input)`: sends the call and returns a pending promise.
fn call_tool(
    _this: &JsValue,
    args: &[JsValue],
    name: &JsString,
    context: &mut Context,
) -> JsResult<JsValue> {
    let tool = name.to_std_string_lossy();
    if session(context)?.borrow().pending.len() >= MAX_PENDING_CALLS {
        return Err(fatal(
            context,
            CodemodeError::new(
                ErrorKind::Limit,
                format!(
                    "the program started more than {MAX_PENDING_CALLS} tool calls without waiting for their results (at tools.{tool}); await some before starting more"
                ),
            ),
        ));
    }
    let config = shared(context)?.config.clone();
    let input = match args.first() {
        None => None,
        Some(value) if value.is_undefined() => None,
        Some(value) => Some(value.clone()),
    };
    let input_json = match input {
        // `tools.list()` means "no arguments": an empty object, as schemas expect.
        None => "{}".to_owned(),
        Some(input) => {
            let text = match to_json(&input, context) {
                Err(error) if session(context)?.borrow().json_too_deep => {
                    drop(error);
                    return Err(JsNativeError::typ()
                        .with_message(format!(
                            "tools.{tool}: the input nests more than {MAX_JSON_DEPTH} levels deep"
                        ))
                        .into());
                }
                other => other?,
            };
            let Some(text) = text else {
                return Err(JsNativeError::typ()
                    .with_message(format!(
                        "tools.{tool}: the input cannot be converted to JSON"
                    ))
                    .into());
            };
            let size = utf8_len(&text);
            if size > config.max_transfer_bytes {
                return Err(fatal(
                    context,
                    CodemodeError::new(
                        ErrorKind::TransferTooLarge,
                        format!(
                            "the input to tools.{tool} is {} as JSON; the per-call transfer limit is {}",
                            human_bytes(size as u64),
                            human_bytes(config.max_transfer_bytes as u64)
                        ),
                    ),
                ));
            }
            json_string(&text)
        }
    };
    let depth = crate::protocol::json_depth(&input_json);
    if depth > MAX_JSON_DEPTH {
        return Err(JsNativeError::typ()
            .with_message(format!(
                "tools.{tool}: the input nests {depth} levels deep; the limit is {MAX_JSON_DEPTH}"
            ))
            .into());
    }
    let session = session(context)?;
    let (promise, resolvers) = JsPromise::new_pending(context);
    let mut session = session.borrow_mut();
    session.next_id += 1;
    let id = session.next_id;
    // Sent when the program next waits (see `Engine::drive`).
    session.queued.push_back(QueuedCall {
        id,
        tool,
        input: input_json,
    });
    session.pending.insert(id, resolvers);
    Ok(promise.into())
}

/// `JSON.stringify(value)` with the original function and the depth guard; `None` when JSON
/// has no representation (`undefined`, functions, symbols).
fn to_json(value: &JsValue, context: &mut Context) -> JsResult<Option<JsString>> {
    let (stringify, guard) = {
        let shared = shared(context)?;
        (shared.stringify.clone(), shared.depth_guard.clone())
    };
    // A `toJSON` may log, which converts again: keep the outer conversion's path aside.
    let session = session(context)?;
    let outer = {
        let mut session = session.borrow_mut();
        session.json_too_deep = false;
        std::mem::take(&mut session.json_path)
    };
    let text = stringify.call(
        &JsValue::undefined(),
        &[value.clone(), guard.into()],
        context,
    );
    session.borrow_mut().json_path = outer;
    Ok(text?.as_string())
}

/// The replacer behind [`to_json`]: `stringify` calls it for every value with the holder as
/// `this`, depth first, so the path of open containers is the stack popped back to the holder.
fn depth_guard(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let value = args.get(1).cloned().unwrap_or_default();
    let session = session(context)?;
    let mut session = session.borrow_mut();
    if let Some(holder) = this.as_object() {
        while let Some(top) = session.json_path.last() {
            if JsObject::equals(top, &holder) {
                break;
            }
            session.json_path.pop();
        }
    }
    if let Some(object) = value.as_object()
        && !object.is_callable()
    {
        if session.json_path.len() >= MAX_JSON_DEPTH {
            session.json_too_deep = true;
            return Err(JsNativeError::range()
                .with_message(format!(
                    "value nests more than {MAX_JSON_DEPTH} levels deep"
                ))
                .into());
        }
        session.json_path.push(object);
    }
    Ok(value)
}

/// `Math.random`: xorshift64* from the configured seed, so runs repeat exactly.
fn random(_this: &JsValue, _args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let session = session(context)?;
    let mut session = session.borrow_mut();
    let mut x = session.rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    session.rng = x;
    let bits = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
    Ok(JsValue::from(bits as f64 / (1u64 << 53) as f64))
}

/// A non-zero xorshift state from any seed.
fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}

fn console_log(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    console(this, args, "", context)
}

fn console_warn(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    console(this, args, "[warn] ", context)
}

fn console_error(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    console(this, args, "[error] ", context)
}

/// Formats one console line and sends what fits in the console budget.
fn console(
    _this: &JsValue,
    args: &[JsValue],
    prefix: &str,
    context: &mut Context,
) -> JsResult<JsValue> {
    let session = session(context)?;
    if session.borrow().console_closed {
        return Ok(JsValue::undefined());
    }
    let max = shared(context)?.config.max_console_bytes;
    let mut line = prefix.to_owned();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        line.push_str(&format_value(arg, context));
        if line.len() > max {
            break;
        }
    }
    let mut session = session.borrow_mut();
    let Session {
        link,
        console_used,
        console_closed,
        ..
    } = &mut *session;
    let Some(link) = link.as_mut() else {
        return Ok(JsValue::undefined());
    };
    let room = max.saturating_sub(*console_used);
    if line.len() <= room {
        *console_used += line.len();
        link.console(&line);
    } else {
        let mut cut = room;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut > 0 {
            link.console(&line[..cut]);
        }
        link.console(&format!(
            "[console output truncated: the limit is {}]",
            human_bytes(max as u64)
        ));
        *console_used = max;
        *console_closed = true;
    }
    Ok(JsValue::undefined())
}

/// How `console.log` shows a value: strings as they are, objects as JSON.
fn format_value(value: &JsValue, context: &mut Context) -> String {
    if let Some(s) = value.as_string() {
        return s.to_std_string_lossy();
    }
    if let Some(object) = value.as_object() {
        if object.is::<boa_engine::builtins::error::Error>() {
            return describe_error(&object, context);
        }
        if object.is_callable() {
            return "[Function]".to_owned();
        }
        return match to_json(value, context) {
            Ok(text) => text.map_or_else(|| "undefined".to_owned(), |s| json_string(&s)),
            Err(_) => "[object]".to_owned(),
        };
    }
    value.display().to_string()
}

/// `Name: message` of an Error object (reads its properties, as JavaScript would).
fn describe_error(object: &JsObject, context: &mut Context) -> String {
    let mut read = |key: &str| -> String {
        object
            .get(JsString::from(key), context)
            .ok()
            .filter(|v| !v.is_undefined())
            .and_then(|v| v.to_string(context).ok())
            .map(|s| s.to_std_string_lossy())
            .unwrap_or_default()
    };
    let name = read("name");
    let message = read("message");
    let name = if name.is_empty() {
        "Error".to_owned()
    } else {
        name
    };
    if message.is_empty() {
        name
    } else {
        format!("{name}: {}", clip(&message, 1000))
    }
}

/// What was thrown, for the model: `Error: boom`, `exception: "text"`, `exception: {"a":1}`.
fn describe_thrown(value: &JsValue, context: &mut Context) -> String {
    if let Some(object) = value.as_object()
        && object.is::<boa_engine::builtins::error::Error>()
    {
        return describe_error(&object, context);
    }
    let shown = if let Some(s) = value.as_string() {
        Value::String(s.to_std_string_lossy()).to_string()
    } else {
        format_value(value, context)
    };
    format!("exception: {}", clip(&shown, 300))
}

/// [`describe_thrown`] plus where an `Error` was created, from its `stack`.
fn describe_uncaught(value: &JsValue, context: &mut Context) -> String {
    let described = describe_thrown(value, context);
    let Some(object) = value.as_object() else {
        return described;
    };
    if !object.is::<boa_engine::builtins::error::Error>() {
        return described;
    }
    let stack = object
        .get(JsString::from("stack"), context)
        .ok()
        .and_then(|v| v.as_string())
        .map(|s| s.to_std_string_lossy())
        .unwrap_or_default();
    match stack_position(&stack) {
        Some((line, column)) => format!("{described} (line {line}, col {column})"),
        None => described,
    }
}

/// The first `:line:col)` of a Boa stack, renumbered for the wrapper's first line.
fn stack_position(stack: &str) -> Option<(u64, u64)> {
    stack.lines().find_map(|frame| {
        let inner = frame.trim_end().strip_suffix(')')?;
        let mut parts = inner.rsplitn(3, ':');
        let column = parts.next()?.parse::<u64>().ok()?;
        let line = parts.next()?.parse::<u64>().ok()?;
        (line >= 2).then(|| (line - 1, column))
    })
}

/// JSON text from `JSON.stringify` as UTF-8 that any JSON reader accepts: a lone surrogate
/// (escaped by `stringify`) becomes U+FFFD (see `replace_lone_surrogates`).
fn json_string(text: &JsString) -> String {
    crate::protocol::replace_lone_surrogates(text.to_std_string_lossy())
}

/// Bytes `s` takes as UTF-8 (lone surrogates count as the replacement character).
fn utf8_len(s: &JsString) -> usize {
    match s.as_str().variant() {
        boa_engine::string::JsStrVariant::Latin1(bytes) => {
            bytes.len() + bytes.iter().filter(|&&b| b >= 0x80).count()
        }
        boa_engine::string::JsStrVariant::Utf16(units) => units
            .iter()
            .map(|&u| match u {
                0..=0x7F => 1,
                0x80..=0x7FF => 2,
                // A surrogate pair is 4 bytes, 2 per half; a lone one becomes U+FFFD (3).
                0xD800..=0xDFFF => 2,
                _ => 3,
            })
            .sum(),
    }
}
