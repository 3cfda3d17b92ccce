//! `ishiki-codemode`: model-written JavaScript programs, run in [Boa] against a set of tools,
//! under hard limits.
//!
//! A program is the body of an async function (CM-1): top-level `await` and `return` work, and
//! nothing survives between programs. It calls tools as `tools.name(input)` or
//! `tools["server_tool"](input)` (CM-2): each call's input is checked against the tool's JSON
//! Schema on the host, the tool's *execute* runs, and the raw result (checked against the
//! output schema when there is one) resolves the promise. A failing tool rejects with an
//! `Error` carrying the tool's message. `finish` and `wait` are never callable (CM-4); reading
//! any other name that is no tool throws a `TypeError` naming it (`tools.nope is not a tool`).
//!
//! Calls leave the engine when the program waits for something, at most 32 unanswered at once
//! (flow control: neither side of the worker's pipes can fill up while the other waits).
//! Calls a program never waited for are never sent, so when it returns they are cancelled and
//! its console says how many; a call already running then finishes before the result is
//! returned, its value dropped. Which tools run depends on the program, not on timing.
//!
//! Values cross the boundary as JSON. A lone UTF-16 surrogate (`'ab😀cd'.slice(0, 3)`) in a
//! tool input, the result or the console becomes U+FFFD REPLACEMENT CHARACTER. A tool input
//! holding a number beyond 2^53 fails with a catchable error naming its path, because the
//! program's double has already lost the integer's exact value; every other number arrives
//! exactly.
//!
//! The return value becomes an [`Outcome`]: the JSON value, the top-level `attachments` it
//! declares (CM-5..CM-7, see [`parse_attachments`]) and the captured `console` lines (CM-9).
//! Anything else ends as a [`CodemodeError`] whose [`CodemodeErrorKind`] says what stopped the program
//! and whose message is written for the model.
//!
//! # Isolation (SEC-1)
//!
//! Programs are untrusted. Each runs in its own worker process (see [`WorkerSpawn`]) that caps
//! its own address space and CPU time with `setrlimit` before building the engine; the host
//! kills it at the wall-clock deadline, and explains a crash (out of memory, stack overflow)
//! as an error — the host survives and the next program runs normally. Warm workers, with the
//! engine already built, wait in a pool so a call pays neither process start nor realm
//! creation. Inside, there is no module loader, `eval` and `Function` are refused, `Math.random`
//! is seeded and `Date` is frozen at the configured clock, so a program's only way out is
//! `tools`. An instruction budget, loop and recursion limits end runaway code early with a
//! precise message. On Linux a worker also drops, before its program, what it never needs:
//! every inherited descriptor but its pipes, all capabilities, `no_new_privs`, Landlock (no
//! filesystem) and an allow-list seccomp filter (only the system calls a worker makes); it
//! runs in its own process group, which the host kills as a whole. See [`ConfinementReport`]
//! and [`confinement_report`]. A binary that uses [`WorkerSpawn::CurrentExe`] must call
//! [`run_if_worker`] first thing in `main()`; this crate also ships a small
//! `ishiki-codemode-worker` binary for [`WorkerSpawn::Program`].
//!
//! Boa's own `String.prototype.split`, `indexOf`, `lastIndexOf`, `includes`, `replace` and
//! `replaceAll` are quadratic; the sandbox installs linear, spec-following versions for string
//! patterns (RegExp patterns still go to the originals).
//!
//! # Example
//!
//! In-process mode runs the engine on a thread of the caller, with soft limits only; it keeps
//! this example self-contained. Real hosts use worker processes.
//!
//! ```
//! use std::sync::Arc;
//! use ishiki_codemode::{CallableTool, Sandbox, SandboxConfig, ToolFailure, WorkerSpawn};
//! use serde_json::{json, Value};
//!
//! #[derive(Debug)]
//! struct Read(Value);
//!
//! #[async_trait::async_trait]
//! impl CallableTool for Read {
//!     fn name(&self) -> &str { "read" }
//!     fn input_schema(&self) -> &Value { &self.0 }
//!     async fn call(&self, input: Value) -> Result<Value, ToolFailure> {
//!         assert_eq!(input["url"], "workspace:///notes.txt");
//!         Ok(json!({ "type": "text", "text": "TODO: a\ndone: b\nTODO: c" }))
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let sandbox = Sandbox::new(SandboxConfig { worker: WorkerSpawn::InProcess, ..Default::default() });
//! let read = Read(json!({ "type": "object", "required": ["url"] }));
//! let outcome = sandbox
//!     .run(
//!         r#"
//!         const source = await tools.read({ url: "workspace:///notes.txt" });
//!         const tasks = source.text.split("\n").filter((line) => line.startsWith("TODO:"));
//!         console.log(`found ${tasks.length}`);
//!         return { count: tasks.length, first: tasks[0] };
//!         "#,
//!         vec![Arc::new(read)],
//!     )
//!     .await
//!     .unwrap();
//! assert_eq!(outcome.value, json!({ "count": 2, "first": "TODO: a" }));
//! assert_eq!(outcome.console, vec!["found 2"]);
//! # });
//! ```
//!
//! [Boa]: https://boajs.dev

mod attachments;
mod config;
mod confine;
mod engine;
mod error;
mod host;
mod os;
mod probe;
mod protocol;
mod tool;
mod worker;
#[cfg(target_os = "linux")]
mod zygote;

pub use attachments::{AttachmentContent, AttachmentItem, Lifetime, parse_attachments};
pub use config::{Limits, SandboxConfig, WorkerSpawn};
pub use confine::{ConfinementLayer, ConfinementReport, confinement_report};
pub use error::{CodemodeError, CodemodeErrorKind};
pub use host::{MAX_EXACT_INTEGER, Outcome, Sandbox};
#[doc(hidden)]
pub use probe::run_confinement_probe;
pub use tool::{CallableTool, RESERVED_TOOL_NAMES, ToolFailure};
pub use worker::run_if_worker;
