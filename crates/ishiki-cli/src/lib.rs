//! `ishiki-cli`: the `ishiki` binary — `scenario run` (docs/scenario-format.md v1), `chat`,
//! `doctor`, `search-eval` — and the small library it is built from.
//!
//! The library surface is what the binary and the fuzz targets call, nothing more:
//! * [`scenario`] loads and checks a scenario file; a malformed one yields a
//!   [`scenario::ScenarioError`] naming the field, line and column (the CLI exits with 2).
//! * [`runner`] drives the real runtime with the scripted model; [`transcript`] holds the event
//!   types and the JSON Lines writer (`--format pretty` renders the same events for a person).
//! * [`chat`] is `ishiki chat`: a live session against an OpenAI- or Anthropic-style endpoint.
//! * [`search_eval`] is `ishiki search-eval`: tool search quality on a user's own catalog.
//! * `conformance` (hidden) is `ishiki mcp-conformance-client URL`, the client the official MCP
//!   conformance suite runs (`cargo xtask mcp-conformance`).
//!
//! Inside (private): fixture generation (real PNG, JPEG, GIF and lossless WebP encodings, padded
//! or corrupted on request), the fixture tools and scripted vision model, `clock` step durations
//! (the run's fake clock is `ishiki_core::ManualClock`, so reruns are byte-identical), and
//! `${c1.continue.url}` interpolation.
//!
//! # Example
//!
//! ```
//! use std::path::Path;
//! use ishiki_cli::scenario::{self, Step};
//! use ishiki_cli::transcript::{Data, Event, End, Format, TranscriptWriter};
//!
//! let yaml = r#"
//! version: 1
//! name: hello
//! models: { models: { main: { input: [text] } } }
//! main_model: main
//! workspace:
//!   /home/workspace/a.txt: { lines: { count: 2, text: "line {n}" } }
//! steps:
//!   - user: { id: m1, text: "hi" }
//!   - model: { text: "hello" }
//! "#;
//! let scenario = scenario::parse(yaml, Path::new(".")).expect("a valid scenario");
//! assert_eq!(scenario.workspace[0].bytes, b"line 1\nline 2\n");
//! assert!(matches!(scenario.steps[1], Step::Model(_)));
//!
//! let mut out = TranscriptWriter::new(Vec::new(), Format::Json, Data::Omit);
//! out.emit(Event::End(End { steps: 2 })).expect("writes to memory");
//! assert_eq!(out.into_inner(), b"{\"event\":\"end\",\"steps\":2}\n");
//! ```

pub mod chat;
mod clock;
#[doc(hidden)]
pub mod conformance;
mod fixture_tools;
mod fixtures;
mod interpolate;
mod pretty;
pub mod runner;
pub mod scenario;
pub mod search_eval;
pub mod transcript;
