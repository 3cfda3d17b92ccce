//! The serde form of the model boundary is a contract (scenario transcripts print it, provider
//! adapters read it): one snapshot holds every part kind, a request and a response, and each
//! reads back to what was written.

use std::sync::Arc;

use ishiki_model::{
    Compacted, DeltaEntry, MediaPart, Message, ModelResponse, Part, Reasoning, Request, Role,
    ToolSpec, Usage,
};
use serde_json::json;

fn media(media_type: &str, url: &str) -> MediaPart {
    MediaPart {
        media_type: media_type.into(),
        url: url.into(),
        bytes: 68,
        sha256: "9f86d081884c7d65".into(),
        data: Some("iVBORw0KGgo=".into()),
    }
}

fn request() -> Request {
    let message = |id: &str, role, content| {
        Arc::new(Message {
            id: id.into(),
            role,
            created_at: "2026-12-02T10:00:00Z".into(),
            content,
        })
    };
    Request {
        tools: vec![ToolSpec {
            name: "read".into(),
            description: "Read a resource by URL.".into(),
            input_schema: json!({ "type": "object", "properties": { "url": { "type": "string" } } }),
        }],
        messages: vec![
            message(
                "m0",
                Role::System,
                vec![Part::Text {
                    text: "You are a careful assistant.".into(),
                }],
            ),
            message(
                "m1",
                Role::User,
                vec![
                    Part::Text {
                        text: "What is in this picture?".into(),
                    },
                    Part::Image(media(
                        "image/png",
                        "asset://019b76da-a800-7000-8000-000000000000",
                    )),
                    Part::Audio(MediaPart {
                        data: None,
                        ..media("audio/wav", "artifact://recorder/0123456789abcdef.wav")
                    }),
                ],
            ),
            message(
                "m2",
                Role::Assistant,
                vec![
                    Part::Compaction(Compacted {
                        provider: "anthropic".into(),
                        model: "claude-opus-5-5".into(),
                        data: json!({ "type": "compaction", "content": "…" }),
                        summary: Some("The user asked about a picture.".into()),
                    }),
                    Part::Reasoning(Reasoning {
                        provider: "anthropic".into(),
                        model: "claude-opus-5-5".into(),
                        data: json!({ "type": "thinking", "thinking": "Look first.", "signature": "c2ln" }),
                        prefix: Some("sha256:abc123".into()),
                    }),
                    Part::ToolCall {
                        id: "c1".into(),
                        name: "read".into(),
                        input: json!({ "url": "workspace:///notes.txt" }),
                    },
                ],
            ),
            message(
                "m3",
                Role::Tool,
                vec![Part::ToolResult {
                    call_id: "c1".into(),
                    is_error: false,
                    text: "buy milk".into(),
                }],
            ),
            message(
                "m4",
                Role::User,
                vec![Part::CatalogDelta {
                    added: vec![DeltaEntry {
                        name: "calendar_create".into(),
                        description: "Create an event.".into(),
                        input_schema: json!({ "type": "object" }),
                        signature: Some("calendar_create(input: { title: string }): void".into()),
                    }],
                }],
            ),
        ],
    }
}

fn response() -> ModelResponse {
    ModelResponse {
        parts: vec![
            Part::Text {
                text: "It is a cat.".into(),
            },
            Part::ToolCall {
                id: "c2".into(),
                name: "read".into(),
                input: json!({}),
            },
        ],
        usage: Some(Usage {
            input_tokens: 120,
            output_tokens: 9,
            cache_read_tokens: 100,
            cache_write_tokens: 20,
        }),
        input_transformations: vec![json!({ "type": "dropped_thinking", "blocks": 1 })],
    }
}

#[test]
fn the_serde_form_of_requests_and_responses_is_the_contract_and_reads_back() {
    let request = request();
    let response = response();
    // Serialized from the types themselves, so the snapshot holds their field order too.
    let written = format!(
        "request:\n{}\nresponse:\n{}",
        serde_json::to_string_pretty(&request).expect("serializes"),
        serde_json::to_string_pretty(&response).expect("serializes")
    );
    insta::assert_snapshot!("serde_form", written);
    let back: Request = serde_json::from_value(serde_json::to_value(&request).expect("a value"))
        .expect("the request reads back");
    assert_eq!(back, request);
    let back: ModelResponse =
        serde_json::from_value(serde_json::to_value(&response).expect("a value"))
            .expect("the response reads back");
    assert_eq!(back, response);
}
