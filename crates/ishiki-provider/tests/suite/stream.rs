//! Streamed responses of the three APIs (`tests/data/streams/*.sse`, shaped like the providers'
//! documented event streams, with keep-alive comments): cut into pieces at every byte, they
//! assemble into the same response as in one piece; text and tool-call starts arrive as events
//! in order; every stream cut before its end event is a retryable error.

use ishiki_core::{ModelResponse, ToolCall, Usage};
use ishiki_provider::sse::StreamAssembler;
use ishiki_provider::{
    Protocol, ProviderErrorKind, StreamEvent, parse_anthropic_response, parse_openai_response,
    parse_responses_response,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::common::data_dir;

const PROTOCOLS: [Protocol; 3] = [
    Protocol::OpenAi,
    Protocol::Anthropic,
    Protocol::OpenAiResponses,
];

fn stream(protocol: Protocol) -> Vec<u8> {
    std::fs::read(data_dir().join(format!("streams/{}.sse", protocol.name()))).unwrap()
}

/// Feeds `chunks` and returns the events and the assembled body (or the error).
fn assemble(
    protocol: Protocol,
    chunks: &[&[u8]],
) -> (
    Vec<StreamEvent>,
    Result<Value, ishiki_provider::ProviderError>,
) {
    let mut events = Vec::new();
    let mut assembler = StreamAssembler::new(protocol);
    for chunk in chunks {
        if let Err(e) = assembler.push(chunk, &mut |e| events.push(e)) {
            return (events, Err(e));
        }
    }
    (events, assembler.finish())
}

fn parse(protocol: Protocol, body: &Value) -> ishiki_provider::ParsedResponse {
    match protocol {
        Protocol::OpenAi => parse_openai_response(body),
        Protocol::Anthropic => parse_anthropic_response(body),
        _ => parse_responses_response(body),
    }
    .unwrap()
}

fn expected(protocol: Protocol) -> ModelResponse {
    let usage = match protocol {
        Protocol::OpenAi => Usage {
            input_tokens: 50,
            output_tokens: 9,
            cache_read_tokens: 32,
            cache_write_tokens: 0,
        },
        Protocol::Anthropic => Usage {
            input_tokens: 95,
            output_tokens: 42,
            cache_read_tokens: 80,
            cache_write_tokens: 5,
        },
        _ => Usage {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 64,
            cache_write_tokens: 0,
        },
    };
    let id = match protocol {
        Protocol::Anthropic => "toolu_1",
        _ => "call_1",
    };
    ModelResponse {
        usage: Some(usage),
        ..ModelResponse::from_text_and_calls(
            Some("Let me read it — ok.".into()),
            [ToolCall {
                id: id.into(),
                name: "read".into(),
                input: json!({ "url": "workspace:///notes.txt" }),
            }],
        )
    }
}

fn expected_reasoning(protocol: Protocol) -> Vec<Value> {
    match protocol {
        Protocol::OpenAi => vec![],
        Protocol::Anthropic => vec![
            json!({ "type": "thinking", "thinking": "The user wants the notes — read them.",
                "signature": "EqQBCkYIARgCIkBsig+/==" }),
            json!({ "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT" }),
        ],
        _ => vec![json!({ "type": "reasoning", "id": "rs_1", "summary": [],
            "encrypted_content": "gAAAAABoISQ24Ot+/==" })],
    }
}

fn check(protocol: Protocol, chunks: &[&[u8]]) -> Result<(), String> {
    let (events, body) = assemble(protocol, chunks);
    let body = body.map_err(|e| e.to_string())?;
    let parsed = parse(protocol, &body);
    let reasoning: Vec<Value> = parsed
        .response
        .reasoning()
        .map(|r| r.data.clone())
        .collect();
    if reasoning != expected_reasoning(protocol) {
        return Err(format!("reasoning {reasoning:?}"));
    }
    let mut response = parsed.response;
    response
        .parts
        .retain(|p| !matches!(p, ishiki_core::Part::Reasoning(_)));
    if response != expected(protocol) {
        return Err(format!("response {response:?}"));
    }
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    let start = events
        .iter()
        .position(|e| matches!(e, StreamEvent::ToolCall { name, .. } if name == "read"));
    let last_text = events
        .iter()
        .rposition(|e| matches!(e, StreamEvent::Text(_)));
    if text != "Let me read it — ok." || start.is_none() || last_text > start {
        return Err(format!("events {events:?}"));
    }
    Ok(())
}

#[test]
fn streams_split_at_every_byte_assemble_to_the_whole_response() {
    for protocol in PROTOCOLS {
        let bytes = stream(protocol);
        assert_eq!(check(protocol, &[&bytes]), Ok(()), "{protocol:?} whole");
        for cut in 0..bytes.len() {
            let (a, b) = bytes.split_at(cut);
            assert_eq!(
                check(protocol, &[a, b]),
                Ok(()),
                "{protocol:?} cut at {cut}"
            );
        }
        let bytes_one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(check(protocol, &bytes_one_by_one), Ok(()), "{protocol:?}");
    }
}

#[test]
fn streams_assemble_to_what_the_non_streaming_parser_reads() {
    // The assembled body has the shape of the API's non-streaming answer.
    for protocol in PROTOCOLS {
        let (_, body) = assemble(protocol, &[&stream(protocol)]);
        let body = body.unwrap();
        match protocol {
            Protocol::OpenAi => {
                assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
                assert_eq!(
                    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
                    "{\"url\":\"workspace:///notes.txt\"}"
                );
            }
            Protocol::Anthropic => {
                assert_eq!(body["stop_reason"], "tool_use");
                assert_eq!(body["usage"]["output_tokens"], 42);
                assert_eq!(body["content"].as_array().unwrap().len(), 4);
            }
            _ => assert_eq!(body["status"], "completed"),
        }
    }
}

#[test]
fn a_stream_cut_before_its_end_is_a_retryable_error() {
    for protocol in PROTOCOLS {
        let bytes = stream(protocol);
        // The end event is complete once its blank line arrived: the last byte.
        // Chat Completions ends at its finish reason, as the official SDK judges it: a cut
        // after that chunk (before the usage chunk or `[DONE]`) is a whole answer.
        let finished = match protocol {
            Protocol::OpenAi => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let at = text.find("\"finish_reason\":\"tool_calls\"").unwrap();
                text[at..].find("\n\n").unwrap() + at + 2
            }
            _ => bytes.len(),
        };
        for cut in 0..bytes.len() {
            let (_, body) = assemble(protocol, &[&bytes[..cut]]);
            if cut >= finished {
                assert!(body.is_ok(), "{protocol:?} {cut}");
                continue;
            }
            let error = body.expect_err("an incomplete stream");
            assert_eq!(
                error.kind(),
                ProviderErrorKind::Transport,
                "{protocol:?} {cut}"
            );
            assert_eq!(
                error.message(),
                format!(
                    "the {} stream ended before the response was complete",
                    protocol.name()
                )
            );
        }
    }
}

#[test]
fn stream_errors_and_garbage_are_clear_errors() {
    let (_, anthropic) = assemble(
        Protocol::Anthropic,
        &[b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"],
    );
    let error = anthropic.unwrap_err();
    assert_eq!(
        error.kind(),
        ProviderErrorKind::Transport,
        "overload is retried"
    );
    assert_eq!(
        error.message(),
        "provider error (overloaded_error): Overloaded"
    );
    let (_, openai) = assemble(Protocol::OpenAi, &[b"data: {not json\n\n"]);
    let error = openai.unwrap_err();
    assert_eq!(error.kind(), ProviderErrorKind::Malformed);
    assert!(
        error
            .message()
            .starts_with("openai stream: an event is not json: "),
        "{error}"
    );
    let (_, responses) = assemble(
        Protocol::OpenAiResponses,
        &[b"event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n"],
    );
    assert_eq!(
        responses.unwrap_err().message(),
        "provider error (error): boom"
    );
    // A hostile index does not allocate: calls are kept by index in a map, with a bound.
    let (_, huge) = assemble(
        Protocol::OpenAi,
        &[b"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":4000000000,\"id\":\"c\",\"function\":{\"name\":\"read\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"],
    );
    assert_eq!(
        huge.unwrap()["choices"][0]["message"]["tool_calls"][0]["id"],
        "c"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any partition of any of the three streams, with keep-alive comments between events.
    #[test]
    fn any_partition_with_keep_alives_assembles_the_same(
        protocol in prop::sample::select(PROTOCOLS.to_vec()),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..40),
        crlf in any::<bool>(),
    ) {
        let text = String::from_utf8(stream(protocol)).unwrap()
            .replace("\n\n", "\n\n: ping\n\n");
        let text = if crlf { text.replace('\n', "\r\n") } else { text };
        let bytes = text.as_bytes();
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len())).collect();
        points.sort_unstable();
        points.dedup();
        let mut chunks = Vec::new();
        let mut last = 0;
        for p in points.into_iter().chain([bytes.len()]) {
            chunks.push(&bytes[last..p]);
            last = p;
        }
        prop_assert_eq!(check(protocol, &chunks), Ok(()));
    }
}
