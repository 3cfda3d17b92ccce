//! The transcript: the events a scenario run prints, exactly as docs/scenario-format.md defines them, and
//! the writer that prints them as JSON Lines (or `--format pretty`) as they happen and keeps
//! only what `${…}` interpolation can refer to (inbound messages and tool results by id): a
//! request event carries the whole history, so keeping every event would grow quadratically
//! with a conversation's length.
//!
//! Field order is the order of the struct fields (serde_json keeps it), which follows the
//! examples in docs/scenario-format.md, so a transcript reads the same as the contract.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Write};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::interpolate::EventLookup;
use crate::pretty;

/// One line of the transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// A `user` step's platform message, after its images were registered as assets.
    Inbound(Inbound),
    /// What the model received at one model step.
    Request(RequestEvent),
    /// A model step whose scripted response is a failure: nothing was persisted.
    ModelFailed(ModelFailed),
    /// One call's result, as the outlet passed it to the model.
    ToolResult(ToolResultEvent),
    /// Messages a `send_message` call delivered to the platform.
    Sent(Sent),
    /// An assembly (or run) error; the run exits with status 2 after it.
    Error(ErrorEvent),
    /// The last event of a run.
    End(End),
}

/// `{"event":"inbound","id","images"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Inbound {
    /// The scenario's message id (`m1`).
    pub id: String,
    /// The message's images as registered assets.
    pub images: Vec<Attachment>,
}

/// `{"event":"request","step","request"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestEvent {
    /// Model step number, from 1 in file order.
    pub step: u64,
    /// The projected request.
    pub request: Request,
    /// What the context engine folded or compacted for this request (only when it did).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<ishiki_core::context::ContextReport>,
}

/// The request shapes are the runtime's own: docs/scenario-format.md's `request` is exactly
/// `ishiki_core::Request`, so the transcript prints what the model received without a copy.
pub use ishiki_core::{
    DeltaEntry as CatalogEntry, MediaPart as Media, Message, Part, Request, Role, ToolSpec as Tool,
};

/// `ATTACHMENT` = `{url, media_type, bytes, lifetime}`: the runtime's own
/// [`AttachmentInfo`](ishiki_core::AttachmentInfo), with projection's [`Lifetime`].
pub use ishiki_core::{AttachmentInfo as Attachment, Lifetime};

/// `{"event":"model_failed","step","reason"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelFailed {
    /// Model step number.
    pub step: u64,
    /// The scripted failure.
    pub reason: String,
}

/// `{"event":"tool_result","step","call_id","name","is_error","text","attachments","continue"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResultEvent {
    /// Model step number.
    pub step: u64,
    /// The scenario's call id.
    pub call_id: String,
    /// The tool called.
    pub name: String,
    /// Whether the tool failed.
    pub is_error: bool,
    /// Exactly the text the model will see.
    pub text: String,
    /// What came with the result.
    pub attachments: Vec<Attachment>,
    /// The next page, or `null` (always printed) when there is none.
    #[serde(rename = "continue")]
    pub continuation: Option<Continuation>,
}

/// `{"url"}` of a continuation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Continuation {
    /// The URL that reads the next page.
    pub url: String,
}

/// `{"event":"sent","step","call_id","messages","dropped"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sent {
    /// Model step number.
    pub step: u64,
    /// The `send_message` call.
    pub call_id: String,
    /// The messages as delivered.
    pub messages: Vec<String>,
    /// Images removed from them, and why.
    pub dropped: Vec<Dropped>,
}

/// An image `send_message` removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dropped {
    /// The `src` as written.
    pub src: String,
    /// Why it was removed.
    pub reason: String,
}

/// `{"event":"error","code","message"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorEvent {
    /// Stable error code (`vision_model_unsupported`).
    pub code: String,
    /// Human-readable message.
    pub message: String,
}

/// `{"event":"end","steps"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct End {
    /// How many steps ran.
    pub steps: u64,
}

impl Event {
    /// Removes every `data` field (base64 media), as `--no-data` asks.
    pub fn strip_data(&mut self) {
        if let Event::Request(r) = self {
            let has_data = |p: &Part| matches!(p, Part::Image(media) | Part::Audio(media) if media.data.is_some());
            // Messages are shared with the runtime's history: copy only those with data.
            for m in &mut r.request.messages {
                if !m.content.iter().any(has_data) {
                    continue;
                }
                for p in &mut std::sync::Arc::make_mut(m).content {
                    if let Part::Image(media) | Part::Audio(media) = p {
                        media.data = None;
                    }
                }
            }
        }
    }

    /// The id `${…}` references use for this event: a user message id for `inbound`, a call
    /// id for `tool_result`; other events are not referable.
    pub fn reference_id(&self) -> Option<&str> {
        match self {
            Event::Inbound(e) => Some(&e.id),
            Event::ToolResult(e) => Some(&e.call_id),
            Event::Request(_)
            | Event::ModelFailed(_)
            | Event::Sent(_)
            | Event::Error(_)
            | Event::End(_) => None,
        }
    }

    /// The event as one JSON line (without the newline).
    pub fn to_json_line(&self) -> String {
        // Serializing these types cannot fail: every map key is a string and every value
        // is plain data, so the fallback is unreachable.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// How the transcript is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// JSON Lines, one event per line: the contract.
    #[default]
    Json,
    /// Readable text for a person (`--format pretty`).
    Pretty,
}

/// Writing the transcript failed.
#[derive(Debug)]
pub struct TranscriptError {
    source: io::Error,
}

impl fmt::Display for TranscriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write the transcript: {}", self.source)
    }
}

impl std::error::Error for TranscriptError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Whether a transcript prints media bytes (base64 `data` fields) or leaves them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Data {
    /// Every `data` field as the runtime produced it.
    Include,
    /// `--no-data`: `data` fields left out (the URLs, types and sizes stay).
    Omit,
}

/// Prints events as they happen and keeps the referable ones, so later steps can refer to
/// them.
#[derive(Debug)]
pub struct TranscriptWriter<W> {
    out: W,
    format: Format,
    include_data: bool,
    emitted: usize,
    by_id: HashMap<String, Value>,
}

impl<W: Write> TranscriptWriter<W> {
    /// A writer printing to `out`; [`Data::Omit`] is `--no-data`.
    pub fn new(out: W, format: Format, data: Data) -> Self {
        Self {
            out,
            format,
            include_data: data == Data::Include,
            emitted: 0,
            by_id: HashMap::new(),
        }
    }

    /// Prints one event (flushed, so a crash still leaves every earlier line); keeps it when
    /// later steps can refer to it.
    pub fn emit(&mut self, mut event: Event) -> Result<(), TranscriptError> {
        if !self.include_data {
            event.strip_data();
        }
        let text = match self.format {
            Format::Json => {
                let mut line = event.to_json_line();
                line.push('\n');
                line
            }
            Format::Pretty => pretty::render_event(&event),
        };
        self.out
            .write_all(text.as_bytes())
            .and_then(|()| self.out.flush())
            .map_err(|source| TranscriptError { source })?;
        if let Some(id) = event.reference_id() {
            // Same reasoning as in `to_json_line`: these types always serialize.
            let value = serde_json::to_value(&event).unwrap_or(Value::Null);
            self.by_id.insert(id.to_owned(), value);
        }
        if let Event::Request(RequestEvent {
            context: Some(context),
            ..
        }) = &event
        {
            // `${c1.folded.url}`: where a folded result reads back, reachable from the call's
            // own `tool_result` event once a request folded it.
            for fold in &context.folded {
                if let Some(Value::Object(result)) = self.by_id.get_mut(&fold.call_id) {
                    result.insert("folded".to_owned(), serde_json::json!({ "url": fold.url }));
                }
            }
        }
        self.emitted += 1;
        Ok(())
    }

    /// How many events were printed so far.
    pub fn emitted(&self) -> usize {
        self.emitted
    }

    /// The output, e.g. to read back a buffer in tests.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W> EventLookup for TranscriptWriter<W> {
    fn get(&self, id: &str) -> Option<&Value> {
        self.by_id.get(id)
    }
}

/// One event of every kind, with every kind of part.
#[cfg(test)]
pub(crate) fn sample_events() -> Vec<Event> {
    let image = Media {
        media_type: "image/png".into(),
        url: "asset://019b76da-a800-7000-8000-000000000001".into(),
        bytes: 1234,
        sha256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
        data: Some("iVBORw0KGgo=".into()),
    };
    vec![
        Event::Inbound(Inbound {
            id: "m1".into(),
            images: vec![Attachment {
                url: image.url.clone(),
                media_type: "image/png".into(),
                bytes: 1234,
                lifetime: Lifetime::Retain,
            }],
        }),
        Event::Request(RequestEvent {
            step: 1,
            request: Request {
                tools: vec![Tool {
                    name: "read".into(),
                    description: "Read a resource by URL".into(),
                    input_schema: serde_json::json!({"type": "object", "properties": {"url": {"type": "string"}}}),
                }],
                messages: vec![
                    Message {
                        id: "sys".into(),
                        role: Role::System,
                        created_at: "2026-01-01T00:00:00Z".into(),
                        content: vec![Part::Text {
                            text: "You are helpful.\nBe brief.".into(),
                        }],
                    },
                    Message {
                        id: "m1".into(),
                        role: Role::User,
                        created_at: "2026-01-01T00:00:01Z".into(),
                        content: vec![
                            Part::Text {
                                text: "look at this".into(),
                            },
                            Part::Image(image.clone()),
                            Part::Audio(Media {
                                media_type: "audio/wav".into(),
                                url: "artifact://read/a.wav".into(),
                                bytes: 44,
                                sha256: "00".into(),
                                data: None,
                            }),
                        ],
                    },
                    Message {
                        id: "a1".into(),
                        role: Role::Assistant,
                        created_at: "2026-01-01T00:00:02Z".into(),
                        content: vec![Part::ToolCall {
                            id: "c1".into(),
                            name: "search".into(),
                            input: serde_json::json!({"query": "write_file"}),
                        }],
                    },
                    Message {
                        id: "t1".into(),
                        role: Role::Tool,
                        created_at: "2026-01-01T00:00:03Z".into(),
                        content: vec![
                            Part::ToolResult {
                                call_id: "c1".into(),
                                is_error: false,
                                text: "write_file: Write a file".into(),
                            },
                            Part::CatalogDelta {
                                added: vec![CatalogEntry {
                                    name: "write_file".into(),
                                    description: "Write a file".into(),
                                    input_schema: serde_json::json!({"type": "object"}),
                                    signature: Some(
                                        "write_file(input: { path: string }): Promise<unknown>"
                                            .into(),
                                    ),
                                }],
                            },
                        ],
                    },
                ]
                .into_iter()
                .map(std::sync::Arc::new)
                .collect(),
            },
            context: None,
        }),
        Event::ModelFailed(ModelFailed {
            step: 2,
            reason: "provider 500".into(),
        }),
        Event::ToolResult(ToolResultEvent {
            step: 3,
            call_id: "r1".into(),
            name: "read".into(),
            is_error: false,
            text: "line 1\nline 2\n[Continue: read artifact://read/x.txt?offset=2]".into(),
            attachments: vec![Attachment {
                url: "artifact://screenshot/1.png".into(),
                media_type: "image/png".into(),
                bytes: 99,
                lifetime: Lifetime::Recent,
            }],
            continuation: Some(Continuation {
                url: "artifact://read/x.txt?offset=2".into(),
            }),
        }),
        Event::ToolResult(ToolResultEvent {
            step: 3,
            call_id: "f1".into(),
            name: "fail".into(),
            is_error: true,
            text: "boom".into(),
            attachments: vec![],
            continuation: None,
        }),
        Event::Sent(Sent {
            step: 4,
            call_id: "s1".into(),
            messages: vec!["Here it is <img src=\"asset://a\"/>".into()],
            dropped: vec![Dropped {
                src: "https://example.com/x.png".into(),
                reason: "only asset:, artifact:, local: and workspace: sources are allowed".into(),
            }],
        }),
        Event::Error(ErrorEvent {
            code: "vision_model_unsupported".into(),
            message: "vision-main does not accept images".into(),
        }),
        Event::End(End { steps: 4 }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_print_in_contract_field_order() {
        let mut w = TranscriptWriter::new(Vec::new(), Format::Json, Data::Include);
        for e in sample_events() {
            w.emit(e).expect("write to a vec");
        }
        let out = String::from_utf8(w.into_inner()).expect("utf-8");
        insta::assert_snapshot!(out);
    }

    #[test]
    fn no_data_removes_base64_only() {
        let mut w = TranscriptWriter::new(Vec::new(), Format::Json, Data::Omit);
        for e in sample_events() {
            w.emit(e).expect("write to a vec");
        }
        let out = String::from_utf8(w.into_inner()).expect("utf-8");
        assert!(!out.contains("\"data\""));
        assert!(out.contains("\"sha256\""));
    }

    #[test]
    fn events_round_trip_through_json() {
        for e in sample_events() {
            let line = e.to_json_line();
            let back: Event = serde_json::from_str(&line).expect("parses back");
            assert_eq!(back, e);
            assert!(line.starts_with("{\"event\":"), "{line}");
        }
    }

    #[test]
    fn null_continue_is_printed() {
        let e = &sample_events()[4];
        assert!(
            e.to_json_line()
                .ends_with(",\"attachments\":[],\"continue\":null}")
        );
    }

    #[test]
    fn writer_looks_up_inbound_and_results_by_id() {
        let mut w = TranscriptWriter::new(io::sink(), Format::Json, Data::Omit);
        for e in sample_events() {
            w.emit(e).expect("sink");
        }
        let r1 = w.get("r1").expect("r1 kept");
        assert_eq!(r1["continue"]["url"], "artifact://read/x.txt?offset=2");
        let m1 = w.get("m1").expect("m1 kept");
        assert_eq!(m1["images"][0]["lifetime"], "retain");
        assert!(w.get("s1").is_none());
        assert_eq!(w.emitted(), 8);
    }

    /// The shapes `check_scenarios.py` requires, checked on our own output.
    #[test]
    fn output_matches_checker_shapes() {
        for e in sample_events() {
            let v: Value = serde_json::from_str(&e.to_json_line()).expect("json");
            let kind = v["event"].as_str().expect("event");
            match kind {
                "tool_result" => assert!(v.get("continue").is_some()),
                "request" => {
                    for m in v["request"]["messages"].as_array().expect("messages") {
                        assert!(m["content"].is_array() && m["created_at"].is_string());
                    }
                }
                _ => {}
            }
        }
    }
}
