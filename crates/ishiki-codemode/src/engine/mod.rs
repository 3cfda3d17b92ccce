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
mod sort;
pub(crate) mod strings;

use crate::config::EngineConfig;
use crate::error::{CodemodeError, CodemodeErrorKind, human_bytes};
use crate::protocol::{MAX_CALLS_IN_FLIGHT, MAX_JSON_DEPTH};
use crate::tool::is_callable_name;
use boa_engine::builtins::promise::{PromiseState, ResolvingFunctions};
use boa_engine::context::time::{Clock, JsInstant};
use boa_engine::context::{ContextBuilder, HostHooks};
use boa_engine::error::EngineError;
use boa_engine::job::{Job, JobExecutor};
use boa_engine::module::{Module, ModuleLoader, ModuleRequest, Referrer};
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::object::builtins::{JsFunction, JsPromise};
use boa_engine::realm::Realm;
use boa_engine::script::Script;
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, Source,
};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

mod console;
mod failure;
mod realm;
mod tools;
mod warm_up;

use console::*;
use failure::*;
use realm::*;
use tools::*;
pub(crate) use warm_up::{touch_engine_pages, warm_up};

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

/// A program's successful end: its return value as JSON text, how many of its tool calls were
/// never sent because it returned without waiting for them, and how many were sent but their
/// replies never read (the engine's count, which depends on the program alone, not on when the
/// host's tools finished).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Finished {
    pub(crate) json: String,
    pub(crate) unsent: usize,
    pub(crate) unanswered: usize,
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

fn engine_failure(error: impl std::fmt::Display) -> CodemodeError {
    CodemodeError::new(
        CodemodeErrorKind::Worker,
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
        sort::install(&mut context).map_err(engine_failure)?;
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
                CodemodeErrorKind::Limit,
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
                CodemodeErrorKind::Syntax,
                "syntax error: the program closes more braces than it opens",
            ));
        };
        let promise = function
            .call(&JsValue::undefined(), &[], &mut self.context)
            .map_err(|e| self.classify(e))?;
        let Some(promise) = promise.as_promise() else {
            return Err(CodemodeError::new(
                CodemodeErrorKind::Syntax,
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
                    let session = self.session.borrow();
                    return Ok(Finished {
                        json,
                        unsent: session.queued.len(),
                        unanswered: session.in_flight,
                    });
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
                    CodemodeErrorKind::Worker,
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
            CodemodeErrorKind::Limit,
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
                    CodemodeErrorKind::Limit,
                    format!("the return value nests more than {MAX_JSON_DEPTH} levels deep"),
                ));
            }
            Err(error) => {
                let thrown = error.into_opaque(&mut self.context).unwrap_or_default();
                let described = describe_thrown(&thrown, &mut self.context);
                return Err(CodemodeError::new(
                    CodemodeErrorKind::Thrown,
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
                CodemodeErrorKind::ResultTooLarge,
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
                CodemodeErrorKind::Limit,
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
                CodemodeErrorKind::Memory,
                format!(
                    "the program ran out of memory (the limit is {}; a buffer could not be allocated)",
                    human_bytes(self.config.memory_bytes)
                ),
            );
        }
        CodemodeError::new(CodemodeErrorKind::Thrown, format!("uncaught {described}"))
    }
}
