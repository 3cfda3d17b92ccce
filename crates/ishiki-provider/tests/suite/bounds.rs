//! Hostile provider answers (issue 24): every one is bounded the same way streamed or not, and
//! none costs more than a fixed multiple of its own size to assemble.

use ishiki_provider::sse::{MAX_STREAM_ITEMS, StreamAssembler};
use ishiki_provider::{
    Protocol, ProviderErrorKind, StreamEvent, parse_anthropic_response, parse_openai_response,
    parse_responses_response,
};
use serde_json::{Value, json};

fn event(kind: &str, data: &Value) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

fn message_start() -> String {
    event(
        "message_start",
        &json!({ "type": "message_start", "message": { "id": "m", "type": "message",
            "role": "assistant", "model": "claude-test", "content": [],
            "usage": { "input_tokens": 1, "output_tokens": 1 } } }),
    )
}

fn message_end() -> String {
    event(
        "message_delta",
        &json!({ "type": "message_delta", "delta": { "stop_reason": "end_turn" },
            "usage": { "output_tokens": 2 } }),
    ) + &event("message_stop", &json!({ "type": "message_stop" }))
}

fn block_start(index: usize, block: &Value) -> String {
    event(
        "content_block_start",
        &json!({ "type": "content_block_start", "index": index, "content_block": block }),
    )
}

fn assemble(
    stream: &str,
) -> (
    Vec<StreamEvent>,
    Result<Value, ishiki_provider::ProviderError>,
) {
    let mut events = Vec::new();
    let mut assembler = StreamAssembler::new(Protocol::Anthropic);
    if let Err(error) = assembler.push(stream.as_bytes(), &mut |e| events.push(e)) {
        return (events, Err(error));
    }
    (events, assembler.finish())
}

/// A non-streamed answer used to carry any number of tool calls (20,000 ran in one step) while
/// a stream stopped at 1,024: one response now has at most `MAX_STREAM_ITEMS` calls, blocks or
/// items in each of the three APIs, and one more is refused with the count and the limit.
#[test]
fn a_non_streamed_answer_is_held_to_the_item_limit_of_a_stream() {
    let call = |k: usize| {
        json!({ "id": format!("c{k}"), "type": "function",
            "function": { "name": "read", "arguments": "{}" } })
    };
    let openai = |n: usize| {
        json!({ "object": "chat.completion", "model": "m", "choices": [{ "index": 0,
            "message": { "role": "assistant", "content": null,
                "tool_calls": (0..n).map(call).collect::<Vec<_>>() },
            "finish_reason": "tool_calls" }] })
    };
    let anthropic = |n: usize| {
        json!({ "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
            "content": (0..n).map(|k| json!({ "type": "tool_use", "id": format!("c{k}"),
                "name": "read", "input": {} })).collect::<Vec<_>>() })
    };
    let responses = |n: usize| {
        json!({ "object": "response", "model": "m", "status": "completed",
            "output": (0..n).map(|k| json!({ "type": "function_call", "id": format!("fc{k}"),
                "call_id": format!("c{k}"), "name": "read", "arguments": "{}" }))
                .collect::<Vec<_>>() })
    };
    let at_limit = [
        parse_openai_response(&openai(MAX_STREAM_ITEMS)),
        parse_anthropic_response(&anthropic(MAX_STREAM_ITEMS)),
        parse_responses_response(&responses(MAX_STREAM_ITEMS)),
    ];
    for parsed in at_limit {
        let parsed = parsed.expect("an answer at the limit is read");
        assert_eq!(parsed.response.calls().len(), MAX_STREAM_ITEMS);
    }
    let over = [
        (
            parse_openai_response(&openai(MAX_STREAM_ITEMS + 1)),
            "tool calls",
        ),
        (
            parse_anthropic_response(&anthropic(MAX_STREAM_ITEMS + 1)),
            "content blocks",
        ),
        (
            parse_responses_response(&responses(MAX_STREAM_ITEMS + 1)),
            "output items",
        ),
    ];
    for (parsed, what) in over {
        let error = parsed.expect_err("one more than the limit is refused");
        assert_eq!(error.kind(), ProviderErrorKind::Malformed, "{error}");
        assert_eq!(
            error.message(),
            format!("the response has 1025 {what}, more than 1024 (the limit of one response)")
        );
    }
}

/// A lone surrogate escape (`\ud800` without its pair) in a streamed delta failed the step for
/// good ("an event is not json"); it becomes U+FFFD and the rest of the answer is kept.
#[test]
fn a_lone_surrogate_in_a_streamed_delta_becomes_a_replacement_character() {
    let delta = r#"event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\ud800b \ud83d\ude00"}}

"#;
    let stream = message_start()
        + &block_start(0, &json!({ "type": "text", "text": "" }))
        + delta
        + &message_end();
    let (events, body) = assemble(&stream);
    let body = body.expect("the stream assembles");
    assert_eq!(body["content"][0]["text"], "a\u{fffd}b \u{1f600}");
    assert_eq!(
        events,
        [StreamEvent::Text("a\u{fffd}b \u{1f600}".to_owned())]
    );
}

/// Two blocks started at one index announced three calls but ran one (the later start replaced
/// the earlier): a second start at an index is refused before anything is announced for it.
#[test]
fn a_second_block_at_one_index_is_refused_before_it_is_announced() {
    let call = |id: &str| json!({ "type": "tool_use", "id": id, "name": "read", "input": {} });
    let stream = message_start()
        + &block_start(0, &call("c1"))
        + &block_start(0, &call("c2"))
        + &block_start(0, &call("c3"))
        + &message_end();
    let (events, body) = assemble(&stream);
    let error = body.expect_err("a second start at one index");
    assert_eq!(error.kind(), ProviderErrorKind::Malformed);
    assert_eq!(
        error.message(),
        "anthropic stream: content block 0 started twice"
    );
    assert_eq!(
        events,
        [StreamEvent::ToolCall {
            id: "c1".into(),
            name: "read".into()
        }],
        "only the call that can run was announced"
    );
}

/// Assembling 2 MiB of thinking and text, sent in 4 KiB deltas, allocates a small multiple of
/// the stream, however it is cut. Copying a block's text for every delta (as the assembler once
/// did: 16 MiB cost 89–99 s of CPU) allocates about 512 MiB here. Counted, not timed: the test
/// binary's allocator counts the bytes each thread asks for (`crate::allocated_on_this_thread`).
#[test]
fn anthropic_deltas_are_assembled_in_work_linear_in_the_stream() {
    let piece = "x".repeat(4096);
    let deltas = 256;
    let mut stream = message_start();
    for (index, (kind, key, delta)) in [
        ("thinking", "thinking", "thinking_delta"),
        ("text", "text", "text_delta"),
    ]
    .into_iter()
    .enumerate()
    {
        let mut start = json!({ "type": kind });
        start[key] = json!("");
        stream += &block_start(index, &start);
        for _ in 0..deltas {
            let mut body = json!({ "type": delta });
            body[key] = json!(piece);
            stream += &event(
                "content_block_delta",
                &json!({ "type": "content_block_delta", "index": index, "delta": body }),
            );
        }
    }
    stream += &message_end();
    let before = crate::allocated_on_this_thread();
    let mut assembler = StreamAssembler::new(Protocol::Anthropic);
    let mut text = 0usize;
    for chunk in stream.as_bytes().chunks(1000) {
        assembler
            .push(chunk, &mut |e| {
                if let StreamEvent::Text(t) | StreamEvent::Reasoning(t) = e {
                    text += t.len();
                }
            })
            .expect("the stream is read");
    }
    let body = assembler.finish().expect("the stream assembles");
    let allocated = crate::allocated_on_this_thread() - before;
    assert_eq!(text, 2 * deltas * piece.len());
    assert_eq!(
        body["content"][0]["thinking"].as_str().map(str::len),
        Some(deltas * piece.len())
    );
    assert_eq!(
        body["content"][1]["text"].as_str().map(str::len),
        Some(deltas * piece.len())
    );
    let ratio = allocated as f64 / stream.len() as f64;
    assert!(
        ratio < 16.0,
        "assembling {} bytes allocated {allocated} bytes ({ratio:.1}× the stream)",
        stream.len()
    );
}
