//! Worker mode: a process that builds one engine, runs one program, and exits (SEC-1).
//!
//! The host starts a binary with the `ISHIKI_CODEMODE_WORKER` environment variable holding the
//! engine configuration; [`run_if_worker`] notices it, closes inherited descriptors, applies
//! the OS limits, drops what a worker never needs (see [`crate::confine`]), builds the engine
//! on a thread with a large stack, says `ready`, and then serves exactly one program over
//! stdin/stdout as JSON lines.

use crate::config::EngineConfig;
use crate::engine::{Engine, Link, Reply};
use crate::error::{CodemodeError, CodemodeErrorKind};
use crate::protocol::{ToEngine, ToHost, WORKER_ENV, call_line, done_line, line};
use std::io::{BufRead, BufReader, BufWriter, Stdin, Stdout, Write};

/// If this process was started as a codemode worker, serves one program and exits; otherwise
/// returns at once.
///
/// Call it first thing in `main()` of any binary used with
/// [`WorkerSpawn::CurrentExe`](crate::WorkerSpawn::CurrentExe):
///
/// ```no_run
/// // The first line of `main()`:
/// ishiki_codemode::run_if_worker();
/// // … then the host program as usual.
/// ```
pub fn run_if_worker() {
    #[cfg(target_os = "linux")]
    if let Ok(config) = std::env::var(crate::zygote::ZYGOTE_ENV) {
        std::process::exit(crate::zygote::serve(&config));
    }
    let Ok(config) = std::env::var(WORKER_ENV) else {
        return;
    };
    let code = serve(&config);
    std::process::exit(code);
}

fn send(out: &mut Stdout, text: &str) -> bool {
    let mut out = out.lock();
    out.write_all(text.as_bytes()).is_ok() && out.flush().is_ok()
}

fn fail(out: &mut Stdout, error: &CodemodeError) {
    send(
        out,
        &line(&ToHost::Failed {
            kind: error.kind(),
            message: error.message().to_owned(),
        }),
    );
}

fn serve(config_json: &str) -> i32 {
    let mut out = std::io::stdout();
    let config: EngineConfig = match serde_json::from_str(config_json) {
        Ok(config) => config,
        Err(e) => {
            fail(
                &mut out,
                &CodemodeError::new(
                    CodemodeErrorKind::Worker,
                    format!("bad worker configuration: {e}"),
                ),
            );
            return 2;
        }
    };
    // Before any thread starts, so every thread inherits it: no inherited descriptors, limits,
    // no capabilities, no new privileges, no filesystem, only the system calls a worker makes.
    // A layer the kernel lacks is reported, not fatal; the limits are.
    let parent = crate::os::parent_pid();
    let Some(confinement) = start_up(&config, &mut out) else {
        return 2;
    };
    crate::os::exit_when_orphaned(parent);
    let stack = config.stack_bytes;
    let thread = std::thread::Builder::new()
        .name("codemode".to_owned())
        .stack_size(stack)
        .spawn(move || serve_one(&config, confinement));
    match thread.map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        Ok(Err(panic)) => {
            fail(&mut out, &panic_failure(&*panic));
            3
        }
        Err(e) => {
            fail(
                &mut out,
                &CodemodeError::new(
                    CodemodeErrorKind::Worker,
                    format!("cannot start the engine thread: {e}"),
                ),
            );
            2
        }
    }
}

/// Closes inherited descriptors, applies the limits and the confinement layers
/// (`confine::start_up`), or says why not (then the worker exits with 2).
fn start_up(config: &EngineConfig, out: &mut Stdout) -> Option<crate::confine::ConfinementReport> {
    match crate::confine::start_up(config.memory_bytes, config.cpu_seconds) {
        Ok(report) => Some(report),
        Err(e) => {
            fail(
                out,
                &CodemodeError::new(
                    CodemodeErrorKind::Worker,
                    format!("cannot limit the worker: {e}"),
                ),
            );
            None
        }
    }
}

/// What a panic of the engine says, as the program's failure.
fn panic_failure(panic: &(dyn std::any::Any + Send)) -> CodemodeError {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    if message.contains("capacity overflow") || message.contains("alloc") {
        CodemodeError::new(
            CodemodeErrorKind::Memory,
            format!("the program ran out of memory ({message})"),
        )
    } else {
        CodemodeError::new(
            CodemodeErrorKind::Worker,
            format!("the engine failed: {}", crate::tool::clip(&message, 200)),
        )
    }
}

/// A worker forked by the fork server `server` (`crate::zygote`), on the server's engine
/// thread with a copy of its pristine engine: confines itself as [`serve`] does, then serves
/// one program.
#[cfg(target_os = "linux")]
pub(crate) fn serve_forked(config: &EngineConfig, engine: &mut Engine, server: u32) -> i32 {
    let mut out = std::io::stdout();
    let Some(confinement) = start_up(config, &mut out) else {
        return 2;
    };
    crate::os::exit_when_orphaned(server);
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        serve_engine(engine, confinement)
    }));
    served.unwrap_or_else(|panic| {
        fail(&mut out, &panic_failure(&*panic));
        3
    })
}

fn serve_one(config: &EngineConfig, confinement: crate::confine::ConfinementReport) -> i32 {
    crate::engine::warm_up(config);
    match Engine::new(config) {
        Ok(mut engine) => serve_engine(&mut engine, confinement),
        Err(error) => {
            fail(&mut std::io::stdout(), &error);
            2
        }
    }
}

/// Says `ready` and runs the one program the host sends on `engine`; never returns after a
/// program ran.
fn serve_engine(engine: &mut Engine, confinement: crate::confine::ConfinementReport) -> i32 {
    let mut out = std::io::stdout();
    let ready = ToHost::Ready {
        confinement: Some(confinement),
    };
    if !send(&mut out, &line(&ready)) {
        return 0;
    }
    let mut input = BufReader::new(std::io::stdin());
    let mut text = String::new();
    // End of input before a program: the host let this warm worker go.
    if input.read_line(&mut text).unwrap_or(0) == 0 {
        return 0;
    }
    let (code, tools) = match serde_json::from_str::<ToEngine>(&text) {
        Ok(ToEngine::Run {
            code,
            tools,
            clock_ms,
        }) => {
            engine.set_clock(clock_ms);
            (code, tools)
        }
        Ok(ToEngine::Reply { .. }) | Err(_) => {
            fail(
                &mut out,
                &CodemodeError::new(CodemodeErrorKind::Worker, "the worker expected a program"),
            );
            return 2;
        }
    };
    let link = PipeLink {
        input,
        out: BufWriter::with_capacity(64 << 10, std::io::stdout()),
        line: String::new(),
    };
    let result = engine.run(&code, &tools, Box::new(link));
    match result {
        Ok(finished) => send(
            &mut out,
            &done_line(&finished.json, finished.unsent, finished.unanswered),
        ),
        Err(error) => {
            fail(&mut out, &error);
            true
        }
    };
    // Leave without dropping the engine: freeing a large heap only delays the exit.
    std::process::exit(0);
}

/// The engine's link over the worker's own stdin and stdout. Calls are buffered and leave as
/// one write when the engine flushes (it does before it waits for a reply); console lines leave
/// at once, so a program killed later still shows what it printed.
struct PipeLink {
    input: BufReader<Stdin>,
    out: BufWriter<Stdout>,
    line: String,
}

impl Link for PipeLink {
    fn console(&mut self, line: &str) -> bool {
        let text = crate::protocol::line(&ToHost::Console {
            line: line.to_owned(),
        });
        self.out.write_all(text.as_bytes()).is_ok() && self.out.flush().is_ok()
    }

    fn call(&mut self, id: u64, tool: &str, input_json: &str) -> bool {
        self.out
            .write_all(call_line(id, tool, input_json).as_bytes())
            .is_ok()
    }

    fn flush(&mut self) -> bool {
        self.out.flush().is_ok()
    }

    fn reply(&mut self) -> Option<Reply> {
        self.line.clear();
        match self.input.read_line(&mut self.line) {
            Ok(0) | Err(_) => None,
            Ok(_) => match serde_json::from_str::<ToEngine>(&self.line) {
                Ok(ToEngine::Reply { id, ok, err }) => Some(Reply {
                    id,
                    result: match (ok, err) {
                        (_, Some(message)) => Err(message),
                        (Some(value), None) => Ok(value),
                        (None, None) => Ok(serde_json::Value::Null),
                    },
                }),
                Ok(ToEngine::Run { .. }) | Err(_) => None,
            },
        }
    }
}
