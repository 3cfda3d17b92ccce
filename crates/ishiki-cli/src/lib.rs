//! `ishiki-cli`: the `ishiki scenario run` runner (docs/scenario-format.md v1) and its pieces.
//!
//! * [`scenario`] loads and checks a scenario file; a malformed one yields a
//!   [`scenario::ScenarioError`] naming the field, line and column (the CLI exits with 2).
//! * [`fixtures`] generates the bytes of its files and images (real PNG, JPEG, GIF and
//!   lossless WebP encodings, padded or corrupted on request).
//! * [`clock`] parses `clock` step durations; the run's fake clock is `ishiki_core::ManualClock`,
//!   so the runtime and the transcript read one clock and reruns are byte-identical.
//! * [`interpolate`] resolves `${c1.continue.url}` references and `{ $continue: c1 }` inputs
//!   against earlier events.
//! * [`chat`] is `ishiki chat`: a live session against an OpenAI- or Anthropic-style endpoint.
//! * [`search_eval`] is `ishiki search-eval`: tool search quality on a user's own catalog.
//! * [`runner`] drives the real runtime with the scripted model; [`fixture_tools`] holds the
//!   fixture tools, dynamic `example://` schemes, scripted vision model and recording platform.
//! * [`transcript`] holds the event types and the JSON Lines writer; [`pretty`] renders the
//!   same events for a person (`--format pretty`).
//!
//! # Example
//!
//! ```
//! use std::path::Path;
//! use ishiki_cli::scenario::{self, Step};
//! use ishiki_cli::transcript::{Event, End, Format, TranscriptWriter};
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
//! let mut out = TranscriptWriter::new(Vec::new(), Format::Json, false);
//! out.emit(Event::End(End { steps: 2 })).expect("writes to memory");
//! assert_eq!(out.into_inner(), b"{\"event\":\"end\",\"steps\":2}\n");
//! ```

pub mod chat;
pub mod clock;
pub mod fixture_tools;
pub mod fixtures;
pub mod interpolate;
pub mod pretty;
pub mod runner;
pub mod scenario;
pub mod search_eval;
pub mod transcript;
