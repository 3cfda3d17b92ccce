//! Parsing recorded response bodies of both APIs; malformed bodies give clear errors.

use ishiki_provider::{ProviderErrorKind, parse_anthropic_response, parse_openai_response};
use serde_json::json;

#[test]
fn openai_tool_calls_text_stop_reason_and_cached_usage() {
    let parsed = parse_openai_response(&json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
        "choices": [{ "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null,
            "tool_calls": [
                { "id": "call_1", "type": "function", "function": { "name": "read", "arguments": "{\"url\":\"workspace:///a\"}" } },
                { "id": "call_2", "type": "function", "function": { "name": "wait", "arguments": "" } },
                { "id": "call_3", "type": "function", "function": { "name": "read", "arguments": "{broken" } }
            ]
        }}],
        "usage": { "prompt_tokens": 120, "completion_tokens": 7, "prompt_tokens_details": { "cached_tokens": 100 } }
    }))
    .unwrap();
    assert_eq!(parsed.stop_reason, "tool_calls");
    assert_eq!(parsed.response.text(), None);
    let calls = &parsed.response.calls();
    assert_eq!(calls[0].input, json!({ "url": "workspace:///a" }));
    assert_eq!(calls[1].input, json!({}));
    // Broken arguments reach the runtime as a string; its schema check tells the model.
    assert_eq!(calls[2].input, json!("{broken"));
    assert_eq!(
        (
            parsed.usage.input_tokens,
            parsed.usage.output_tokens,
            parsed.usage.cache_read_tokens
        ),
        (120, 7, 100)
    );

    let text = parse_openai_response(&json!({
        "choices": [{ "finish_reason": "stop", "message": { "role": "assistant", "content": "done" } }]
    }))
    .unwrap();
    assert_eq!(text.response.text().as_deref(), Some("done"));
    assert!(text.response.calls().is_empty());
    assert_eq!(text.usage.input_tokens, 0);
}

#[test]
fn anthropic_blocks_stop_reason_and_cached_usage() {
    let parsed = parse_anthropic_response(&json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [
            { "type": "thinking", "thinking": "…", "signature": "x" },
            { "type": "text", "text": "Reading." },
            { "type": "tool_use", "id": "toolu_1", "name": "read", "input": { "url": "workspace:///a" } }
        ],
        "stop_reason": "tool_use",
        "usage": { "input_tokens": 20, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 50, "output_tokens": 9 }
    }))
    .unwrap();
    assert_eq!(parsed.response.text().as_deref(), Some("Reading."));
    assert_eq!(parsed.response.calls()[0].id, "toolu_1");
    assert_eq!(parsed.stop_reason, "tool_use");
    assert_eq!(
        (
            parsed.usage.input_tokens,
            parsed.usage.output_tokens,
            parsed.usage.cache_read_tokens
        ),
        (100, 9, 50)
    );
}

#[test]
fn malformed_and_error_bodies_are_clear_errors() {
    let cases = [
        (
            parse_openai_response(&json!({ "object": "list" })),
            ProviderErrorKind::Malformed,
            "openai response has no `choices` array",
        ),
        (
            parse_openai_response(&json!({ "choices": [] })),
            ProviderErrorKind::Malformed,
            "openai response has an empty `choices` array",
        ),
        (
            parse_openai_response(&json!({ "choices": [{ "message": { "content": 3 } }] })),
            ProviderErrorKind::Malformed,
            "openai message `content` is neither text nor null: 3",
        ),
        (
            parse_openai_response(
                &json!({ "choices": [{ "message": { "tool_calls": [{ "id": "c" }] } }] }),
            ),
            ProviderErrorKind::Malformed,
            "openai tool call 0 has no `name`",
        ),
        (
            parse_openai_response(
                &json!({ "error": { "message": "Rate limit reached", "type": "requests" } }),
            ),
            ProviderErrorKind::Api,
            "provider error (requests): Rate limit reached",
        ),
        (
            parse_anthropic_response(&json!("html")),
            ProviderErrorKind::Malformed,
            "anthropic response has no `content` array",
        ),
        (
            parse_anthropic_response(&json!({ "content": [{ "text": "x" }] })),
            ProviderErrorKind::Malformed,
            "anthropic content block 0 has no `type`",
        ),
        (
            parse_anthropic_response(&json!({ "content": [{ "type": "tool_use", "id": "t" }] })),
            ProviderErrorKind::Malformed,
            "anthropic tool_use block 0 has no `name`",
        ),
        (
            parse_anthropic_response(
                &json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }),
            ),
            ProviderErrorKind::Api,
            "provider error (overloaded_error): Overloaded",
        ),
    ];
    for (result, kind, message) in cases {
        let error = result.unwrap_err();
        assert_eq!((error.kind(), error.message()), (kind, message));
    }
}
