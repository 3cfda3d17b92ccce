//! The official SDKs' stream accumulators as the oracle of stream assembly: each recorded
//! stream below goes to the SDK (`tests/sdk-oracle.cjs`: `@anthropic-ai/sdk`'s
//! `messages.stream().finalMessage()`, `openai`'s `chat.completions.stream()` and
//! `responses.stream()`, pinned in `provider-schemas.sh`, run by node) and, split into small
//! chunks, to Ishiki's `StreamAssembler`; both assembled bodies go through the same parser, and
//! the turns must be the same — or both must refuse the stream.

use std::path::Path;
use std::process::Command;

use ishiki_core::ModelResponse;
use ishiki_provider::sse::StreamAssembler;
use ishiki_provider::{
    Protocol, parse_anthropic_response, parse_openai_response, parse_responses_response,
};
use serde_json::{Value, json};

use super::schema::sdk_dir;

fn sse(events: &[Value]) -> String {
    let mut out = String::new();
    for event in events {
        if let Some(kind) = event.get("type").and_then(Value::as_str) {
            out.push_str(&format!("event: {kind}\n"));
        }
        out.push_str(&format!("data: {event}\n\n"));
    }
    out
}

fn chat(chunks: &[Value], done: bool) -> String {
    let mut out: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    if done {
        out.push_str("data: [DONE]\n\n");
    }
    out
}

fn parse(protocol: Protocol, body: &Value) -> Result<(ModelResponse, String), String> {
    let parsed = match protocol {
        Protocol::Anthropic => parse_anthropic_response(body),
        Protocol::OpenAi => parse_openai_response(body),
        Protocol::OpenAiResponses => parse_responses_response(body),
    }
    .map_err(|e| e.to_string())?;
    Ok((parsed.response, parsed.stop_reason))
}

fn ours(protocol: Protocol, stream: &str) -> Result<(ModelResponse, String), String> {
    let mut assembler = StreamAssembler::new(protocol);
    for chunk in stream.as_bytes().chunks(7) {
        assembler
            .push(chunk, &mut |_| {})
            .map_err(|e| e.to_string())?;
    }
    let body = assembler.finish().map_err(|e| e.to_string())?;
    parse(protocol, &body)
}

fn sdk(protocol: Protocol, stream: &str) -> Result<(ModelResponse, String), String> {
    sdk_as(protocol.name(), protocol, stream)
}

/// The SDK's accumulator named `accumulator` (a protocol's name, or `anthropic-beta`).
fn sdk_as(
    accumulator: &str,
    protocol: Protocol,
    stream: &str,
) -> Result<(ModelResponse, String), String> {
    let dir = sdk_dir();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), stream).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk-oracle.cjs");
    let output = Command::new("node")
        .arg(&script)
        .arg(accumulator)
        .arg(file.path())
        .current_dir(&dir)
        .output()
        .expect("node runs (installed with the SDKs by provider-schemas.sh)");
    let line = String::from_utf8_lossy(&output.stdout);
    let value: Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| {
        panic!(
            "the oracle printed no JSON ({e}): {line} {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    if let Some(error) = value.get("error").and_then(Value::as_str) {
        return Err(error.to_owned());
    }
    parse(protocol, &value)
}

fn anthropic_message(events: Vec<Value>) -> Vec<Value> {
    let mut all = vec![
        json!({ "type": "message_start", "message": { "id": "msg_1", "type": "message",
        "role": "assistant", "model": "m", "content": [], "stop_reason": null,
        "usage": { "input_tokens": 12, "cache_read_input_tokens": 80, "cache_creation_input_tokens": 5, "output_tokens": 1 } } }),
    ];
    all.extend(events);
    all
}

fn block(index: u64, block: Value) -> Value {
    json!({ "type": "content_block_start", "index": index, "content_block": block })
}

fn delta(index: u64, delta: Value) -> Value {
    json!({ "type": "content_block_delta", "index": index, "delta": delta })
}

fn stop(index: u64) -> Value {
    json!({ "type": "content_block_stop", "index": index })
}

fn end(stop_reason: &str) -> Vec<Value> {
    vec![
        json!({ "type": "message_delta", "delta": { "stop_reason": stop_reason, "stop_sequence": null },
            "usage": { "output_tokens": 42 } }),
        json!({ "type": "message_stop" }),
    ]
}

/// The recorded streams: (name, protocol, stream).
fn cases() -> Vec<(&'static str, Protocol, String)> {
    let interleaved = {
        let mut e = anthropic_message(vec![
            block(
                0,
                json!({ "type": "thinking", "thinking": "", "signature": "" }),
            ),
            delta(0, json!({ "type": "signature_delta", "signature": "EqQB" })),
            delta(
                0,
                json!({ "type": "signature_delta", "signature": "EqQBCkYIARgC" }),
            ),
            stop(0),
            block(
                1,
                json!({ "type": "tool_use", "id": "toolu_1", "name": "read", "input": {} }),
            ),
            delta(
                1,
                json!({ "type": "input_json_delta", "partial_json": "{\"url\": \"works" }),
            ),
            delta(
                1,
                json!({ "type": "input_json_delta", "partial_json": "pace:///a.txt\"}" }),
            ),
            stop(1),
            block(
                2,
                json!({ "type": "thinking", "thinking": "", "signature": "" }),
            ),
            delta(
                2,
                json!({ "type": "thinking_delta", "thinking": "Then the " }),
            ),
            delta(
                2,
                json!({ "type": "thinking_delta", "thinking": "second file." }),
            ),
            delta(2, json!({ "type": "signature_delta", "signature": "Zm9v" })),
            stop(2),
            block(3, json!({ "type": "text", "text": "" })),
            delta(3, json!({ "type": "text_delta", "text": "First block." })),
            stop(3),
            block(4, json!({ "type": "text", "text": "" })),
            delta(4, json!({ "type": "text_delta", "text": "Second block." })),
            stop(4),
            block(
                5,
                json!({ "type": "tool_use", "id": "toolu_2", "name": "read", "input": {} }),
            ),
            delta(5, json!({ "type": "input_json_delta", "partial_json": "" })),
            stop(5),
        ]);
        e.extend(end("tool_use"));
        sse(&e)
    };
    let redacted = {
        let mut e = anthropic_message(vec![
            block(
                0,
                json!({ "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p" }),
            ),
            stop(0),
            block(1, json!({ "type": "text", "text": "Hi" })),
            stop(1),
        ]);
        e.extend(end("end_turn"));
        sse(&e)
    };
    let cut_input = {
        let mut e = anthropic_message(vec![
            block(
                0,
                json!({ "type": "tool_use", "id": "toolu_1", "name": "write", "input": {} }),
            ),
            delta(
                0,
                json!({ "type": "input_json_delta", "partial_json": "{\"path\": \"a.txt\", \"lines\": [1, 2" }),
            ),
            stop(0),
            block(
                1,
                json!({ "type": "tool_use", "id": "toolu_2", "name": "write", "input": {} }),
            ),
            delta(
                1,
                json!({ "type": "input_json_delta", "partial_json": "{\"path\": \"b.t" }),
            ),
            stop(1),
        ]);
        e.extend(end("max_tokens"));
        sse(&e)
    };
    let cut_stream = sse(&anthropic_message(vec![
        block(0, json!({ "type": "text", "text": "" })),
        delta(0, json!({ "type": "text_delta", "text": "Half an ans" })),
    ]));
    let overloaded = {
        let mut e = anthropic_message(vec![
            block(0, json!({ "type": "text", "text": "" })),
            delta(0, json!({ "type": "text_delta", "text": "Part" })),
        ]);
        e.push(json!({ "type": "error", "error": { "type": "overloaded_error", "message": "Overloaded" } }));
        sse(&e)
    };
    let chunk = |delta: Value, finish: Value| {
        json!({ "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish }] })
    };
    let repeated_ids = chat(
        &[
            chunk(json!({ "role": "assistant", "content": "" }), Value::Null),
            chunk(
                json!({ "tool_calls": [{ "index": 0, "id": "call_R", "type": "function",
                "function": { "name": "read", "arguments": "{\"url\":" } }] }),
                Value::Null,
            ),
            chunk(
                json!({ "tool_calls": [{ "index": 0, "id": "call_R", "type": "function",
                "function": { "name": "read", "arguments": "\"workspace:///a\"}" } }] }),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
        ],
        true,
    );
    let refusal = chat(
        &[
            chunk(
                json!({ "role": "assistant", "content": null, "refusal": "" }),
                Value::Null,
            ),
            chunk(json!({ "refusal": "I can't " }), Value::Null),
            chunk(json!({ "refusal": "help with that." }), Value::Null),
            chunk(json!({}), json!("stop")),
        ],
        true,
    );
    let no_done = chat(
        &[
            chunk(
                json!({ "role": "assistant", "content": "Done" }),
                Value::Null,
            ),
            chunk(json!({}), json!("stop")),
            json!({ "id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
                "usage": { "prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59,
                    "prompt_tokens_details": { "cached_tokens": 32 } } }),
        ],
        false,
    );
    let chat_cut = chat(
        &[chunk(
            json!({ "role": "assistant", "content": "Half" }),
            Value::Null,
        )],
        false,
    );
    let responses = {
        let item = |n: u64, item: Value| {
            vec![
                json!({ "type": "response.output_item.added", "sequence_number": n * 2 + 1, "output_index": n, "item": item }),
                json!({ "type": "response.output_item.done", "sequence_number": n * 2 + 2, "output_index": n, "item": item }),
            ]
        };
        let output = vec![
            json!({ "type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "enc1" }),
            json!({ "type": "function_call", "id": "fc_1", "call_id": "call_X", "name": "read",
                "arguments": "{\"url\":\"workspace:///a\"}", "status": "completed" }),
            json!({ "type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "enc2" }),
            json!({ "type": "function_call", "id": "fc_2", "call_id": "call_Y", "name": "read",
                "arguments": "{\"url\":\"workspace:///b\"}", "status": "completed" }),
        ];
        let response = |status: &str, output: Value| {
            json!({ "id": "resp_1", "object": "response", "created_at": 1, "status": status,
                "model": "m", "output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
                "usage": { "input_tokens": 100, "output_tokens": 20, "total_tokens": 120,
                    "input_tokens_details": { "cached_tokens": 64 }, "output_tokens_details": { "reasoning_tokens": 10 } } })
        };
        let mut events = vec![json!({ "type": "response.created", "sequence_number": 0,
            "response": response("in_progress", json!([])) })];
        for (n, o) in output.iter().enumerate() {
            events.extend(item(n as u64, o.clone()));
        }
        events.push(json!({ "type": "response.completed", "sequence_number": 20,
            "response": response("completed", Value::Array(output)) }));
        sse(&events)
    };
    vec![
        (
            "anthropic interleaved thinking, split input, two text blocks",
            Protocol::Anthropic,
            interleaved,
        ),
        ("anthropic redacted thinking", Protocol::Anthropic, redacted),
        (
            "anthropic tool input cut by max_tokens",
            Protocol::Anthropic,
            cut_input,
        ),
        (
            "anthropic stream cut before message_stop",
            Protocol::Anthropic,
            cut_stream,
        ),
        (
            "anthropic overloaded_error mid-stream",
            Protocol::Anthropic,
            overloaded,
        ),
        (
            "chat id and name repeated in every chunk",
            Protocol::OpenAi,
            repeated_ids,
        ),
        ("chat refusal", Protocol::OpenAi, refusal),
        (
            "chat finish reason and usage without [DONE]",
            Protocol::OpenAi,
            no_done,
        ),
        (
            "chat stream cut before a finish reason",
            Protocol::OpenAi,
            chat_cut,
        ),
        (
            "responses rs_1, call_X, rs_2, call_Y",
            Protocol::OpenAiResponses,
            responses,
        ),
    ]
}

#[test]
fn every_recorded_stream_assembles_to_the_turn_the_official_sdk_assembles() {
    for (name, protocol, stream) in cases() {
        let expected = sdk(protocol, &stream);
        let got = ours(protocol, &stream);
        match (&expected, &got) {
            (Ok(expected), Ok(got)) => assert_eq!(got, expected, "{name}"),
            (Err(_), Err(_)) => {}
            _ => panic!("{name}: the sdk says {expected:?}, ishiki says {got:?}"),
        }
    }
}

#[test]
fn a_streamed_compaction_assembles_to_the_block_the_official_beta_sdk_assembles() {
    let block_start = json!({ "type": "compaction", "content": null, "encrypted_content": null,
        "signature": "cmp-sig", "tool_changes": [] });
    let mut events = anthropic_message(vec![
        block(0, block_start),
        delta(
            0,
            json!({ "type": "compaction_delta", "content": "The user asked", "encrypted_content": null }),
        ),
        delta(
            0,
            json!({ "type": "compaction_delta", "content": "The user asked for a survey; three districts are done.",
                "encrypted_content": "enc-1" }),
        ),
        stop(0),
    ]);
    events.extend(end("compaction"));
    let stream = sse(&events);
    let expected = sdk_as("anthropic-beta", Protocol::Anthropic, &stream).expect("the sdk");
    let got = ours(Protocol::Anthropic, &stream).expect("ishiki");
    assert_eq!(got, expected);
    // A delta carries the block's final value: assigned, not appended.
    let [ishiki_core::Part::Compaction(c)] = got.0.parts.as_slice() else {
        panic!("one compaction block: {:?}", got.0.parts);
    };
    assert_eq!(
        c.summary.as_deref(),
        Some("The user asked for a survey; three districts are done.")
    );
    assert_eq!(c.data["encrypted_content"], "enc-1");
    assert_eq!(c.data["signature"], "cmp-sig");
    assert_eq!(got.1, "compaction");
}
