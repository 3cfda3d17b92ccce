//! The live model against a local server on 127.0.0.1 that replays recorded responses of each
//! API: tool call, text, 429 then success, 500, malformed body, unreachable endpoint.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ishiki_core::{
    Durability, Model, ModelErrorKind, ModelsDoc, Part, Profile, Request, Runtime, assemble,
};
use ishiki_provider::{HttpConfig, HttpModel, Protocol, ProviderErrorKind, StreamEvent};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One recorded HTTP request: its head (request line and headers) and JSON body.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Value,
}

/// Serves `script` in order, one response per connection, then stops listening.
async fn replay(script: Vec<(u16, &'static str, String)>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        for (status, headers, body) in script {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut data = Vec::new();
            let mut buf = [0u8; 8192];
            let (head, length) = loop {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0, "client closed early");
                data.extend_from_slice(&buf[..n]);
                if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&data[..end]).to_string();
                    let length = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0usize);
                    data.drain(..end + 4);
                    break (head, length);
                }
            };
            while data.len() < length {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0, "client closed early");
                data.extend_from_slice(&buf[..n]);
            }
            log.lock().unwrap().push(Seen {
                head,
                body: serde_json::from_slice(&data).unwrap(),
            });
            let kind = if headers.contains("content-type") {
                ""
            } else {
                "content-type: application/json\r\n"
            };
            let response = format!(
                "HTTP/1.1 {status} Replayed\r\n{kind}content-length: {}\r\nconnection: close\r\n{headers}\r\n{body}",
                body.len()
            );
            socket.write_all(response.as_bytes()).await.unwrap();
            socket.shutdown().await.unwrap();
        }
    });
    (url, seen)
}

/// A request with no tools and no messages.
fn empty() -> Request {
    Request {
        tools: vec![],
        messages: vec![],
    }
}

fn config(protocol: Protocol, url: &str) -> HttpConfig {
    HttpConfig {
        max_retries: 2,
        backoff: Duration::ZERO,
        timeout: Duration::from_secs(10),
        ..HttpConfig::new(protocol, url, "test-model")
    }
}

fn openai_call(id: &str) -> String {
    json!({
        "choices": [{ "finish_reason": "tool_calls", "message": { "role": "assistant", "content": null,
            "tool_calls": [{ "id": id, "type": "function",
                "function": { "name": "read", "arguments": "{\"url\":\"workspace:///notes.txt\"}" } }] } }],
        "usage": { "prompt_tokens": 50, "completion_tokens": 9 }
    })
    .to_string()
}

fn openai_text(text: &str) -> String {
    json!({ "choices": [{ "finish_reason": "stop", "message": { "role": "assistant", "content": text } }] })
        .to_string()
}

fn anthropic_call(id: &str) -> String {
    json!({ "type": "message", "role": "assistant", "stop_reason": "tool_use",
        "content": [{ "type": "tool_use", "id": id, "name": "read", "input": { "url": "workspace:///notes.txt" } }],
        "usage": { "input_tokens": 40, "output_tokens": 8, "cache_read_input_tokens": 0 } })
    .to_string()
}

fn anthropic_text(text: &str) -> String {
    json!({ "type": "message", "role": "assistant", "stop_reason": "end_turn",
        "content": [{ "type": "text", "text": text }],
        "usage": { "input_tokens": 60, "output_tokens": 3, "cache_read_input_tokens": 40 } })
    .to_string()
}

fn responses_call(id: &str) -> String {
    json!({ "object": "response", "status": "completed", "model": "test-model",
        "output": [{ "type": "function_call", "id": "fc_1", "call_id": id, "name": "read",
            "arguments": "{\"url\":\"workspace:///notes.txt\"}", "status": "completed" }],
        "usage": { "input_tokens": 50, "output_tokens": 9, "input_tokens_details": { "cached_tokens": 0 } } })
    .to_string()
}

fn responses_text(text: &str) -> String {
    json!({ "object": "response", "status": "completed", "model": "test-model",
        "output": [{ "type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{ "type": "output_text", "text": text, "annotations": [] }] }] })
    .to_string()
}

async fn runtime(dir: &std::path::Path) -> Runtime {
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "milk, eggs\n").unwrap();
    let assembly = assemble(
        Profile::from_yaml("{}").unwrap(),
        ModelsDoc::from_yaml("models:\n  main: { input: [text, image] }\n").unwrap(),
        "main",
    )
    .unwrap();
    let mut runtime = Runtime::builder(assembly, dir.join("state"))
        .workspace_root(&workspace)
        .durability(Durability::Normal)
        .build()
        .await
        .unwrap();
    runtime
        .add_user_message("m1", "What is in notes.txt?", &[])
        .await
        .unwrap();
    runtime
}

/// A session over each protocol: a tool call runs, its result reaches the next request.
#[tokio::test]
async fn http_session_continues_after_a_tool_call() {
    for protocol in [
        Protocol::OpenAi,
        Protocol::Anthropic,
        Protocol::OpenAiResponses,
    ] {
        let script = match protocol {
            Protocol::OpenAi => vec![
                (200, "", openai_call("call_1")),
                (200, "", openai_text("Milk and eggs.")),
            ],
            Protocol::Anthropic => vec![
                (200, "", anthropic_call("toolu_1")),
                (200, "", anthropic_text("Milk and eggs.")),
            ],
            _ => vec![
                (200, "", responses_call("call_1")),
                (200, "", responses_text("Milk and eggs.")),
            ],
        };
        let (url, seen) = replay(script).await;
        let dir = tempfile::tempdir().unwrap();
        let mut runtime = runtime(dir.path()).await;
        let model = HttpModel::new(config(protocol, &url)).unwrap();
        let reports = runtime.step_with(&model).await.unwrap();
        assert!(
            reports[0].text.contains("milk, eggs"),
            "{}",
            reports[0].text
        );
        assert!(runtime.step_with(&model).await.unwrap().is_empty());
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 2);
        let second = seen[1].body.to_string();
        assert!(
            second.contains("milk, eggs"),
            "the result reached the model: {second}"
        );
        match protocol {
            Protocol::OpenAi => assert!(seen[0].head.starts_with("POST /chat/completions ")),
            Protocol::Anthropic => {
                assert!(seen[0].head.starts_with("POST /v1/messages "));
                assert!(seen[0].head.contains("anthropic-version: 2023-06-01"));
            }
            _ => {
                assert!(seen[0].head.starts_with("POST /responses "));
                // The call and its output travel as paired input items.
                let input = seen[1].body["input"].as_array().unwrap();
                let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
                assert_eq!(kinds, ["message", "function_call", "function_call_output"]);
            }
        }
    }
}

#[tokio::test]
async fn http_429_then_success_is_retried() {
    let error =
        json!({ "error": { "message": "Rate limit reached", "type": "requests" } }).to_string();
    let (url, seen) = replay(vec![
        (429, "retry-after: 0\r\n", error),
        (200, "", openai_text("ok")),
    ])
    .await;
    let model = HttpModel::new(config(Protocol::OpenAi, &url)).unwrap();
    let parsed = model.send(&empty()).await.unwrap();
    assert_eq!(parsed.response.text().as_deref(), Some("ok"));
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn http_500_fails_after_the_retries_with_a_clear_message() {
    let body = || {
        json!({ "type": "error", "error": { "type": "api_error", "message": "Internal server error" } }).to_string()
    };
    let (url, seen) = replay(vec![
        (500, "", body()),
        (500, "", body()),
        (500, "", body()),
    ])
    .await;
    let model = HttpModel::new(config(Protocol::Anthropic, &url)).unwrap();
    let error = model.send(&empty()).await.unwrap_err();
    assert_eq!(error.kind(), ProviderErrorKind::Status);
    assert_eq!(
        error.message(),
        format!(
            "{url}/v1/messages answered 500 Internal Server Error: Internal server error (after 3 attempts)"
        )
    );
    assert_eq!(seen.lock().unwrap().len(), 3);
}

/// A model without retries pointed at a port that was just free: nothing listens there.
async fn unreachable_model() -> (HttpModel, u16) {
    let port = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let model = HttpModel::new(HttpConfig {
        max_retries: 0,
        ..config(Protocol::OpenAi, &format!("http://127.0.0.1:{port}"))
    })
    .unwrap();
    (model, port)
}

/// The runtime sees a typed [`ModelError`]: what outlasted the retries but may pass later
/// (a server error, an unreachable endpoint) is retryable; a refusal or a malformed body is
/// permanent. The message is the provider's, unchanged.
#[tokio::test]
async fn model_errors_say_whether_trying_again_may_help() {
    let empty = Request {
        tools: vec![],
        messages: vec![],
    };
    let refusal =
        json!({ "error": { "message": "image too large", "type": "invalid_request_error" } })
            .to_string();
    let overloaded = json!({ "error": { "message": "overloaded", "type": "server" } }).to_string();
    let (url, _) = replay(vec![
        (400, "", refusal),
        (503, "", overloaded),
        (200, "", "not json".to_owned()),
    ])
    .await;
    let model = HttpModel::new(HttpConfig {
        max_retries: 0,
        ..config(Protocol::OpenAi, &url)
    })
    .unwrap();
    let bad_request = model.respond(&empty).await.unwrap_err();
    assert_eq!(bad_request.kind(), ModelErrorKind::Permanent);
    assert_eq!(
        bad_request.message(),
        format!("{url}/chat/completions answered 400 Bad Request: image too large")
    );
    let unavailable = model.respond(&empty).await.unwrap_err();
    assert_eq!(unavailable.kind(), ModelErrorKind::Retryable);
    assert!(
        unavailable.message().contains("answered 503"),
        "{unavailable}"
    );
    let malformed = model.respond(&empty).await.unwrap_err();
    assert_eq!(malformed.kind(), ModelErrorKind::Permanent);

    let (unreachable, _) = unreachable_model().await;
    let error = unreachable.respond(&empty).await.unwrap_err();
    assert!(error.is_retryable(), "{error}");
    assert!(error.message().starts_with("cannot reach "), "{error}");
}

#[tokio::test]
async fn http_malformed_body_fails_without_retry_and_the_session_reports_it() {
    let (url, seen) = replay(vec![(200, "", "<html>gateway</html>".to_owned())]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut runtime = runtime(dir.path()).await;
    let model = HttpModel::new(config(Protocol::OpenAi, &url)).unwrap();
    let error = runtime.step_with(&model).await.unwrap_err();
    assert_eq!(
        error.message(),
        format!(
            "the model request failed: {url}/chat/completions answered with a body that is not json: <html>gateway</html>"
        )
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
    // A failed step commits nothing (PRJ-4): the next request starts from the same history.
    assert_eq!(runtime.prepare().await.unwrap().request.messages.len(), 1);
}

#[tokio::test]
async fn http_unreachable_endpoint_and_missing_key_are_clear_errors() {
    let (model, port) = unreachable_model().await;
    let error = model.send(&empty()).await.unwrap_err();
    assert_eq!(error.kind(), ProviderErrorKind::Transport);
    assert!(
        error.message().starts_with(&format!(
            "cannot reach http://127.0.0.1:{port}/chat/completions: "
        )),
        "{error}"
    );

    let missing = HttpModel::new(HttpConfig {
        api_key_env: Some("ISHIKI_PROVIDER_TEST_NO_SUCH_KEY".into()),
        ..config(Protocol::OpenAi, "http://127.0.0.1:9")
    })
    .unwrap_err();
    assert_eq!(
        missing.message(),
        "the api key variable `ISHIKI_PROVIDER_TEST_NO_SUCH_KEY` is not set"
    );
    assert_eq!(
        "anthropic".parse::<Protocol>().unwrap(),
        Protocol::Anthropic
    );
    assert_eq!("openai".parse::<Protocol>().unwrap(), Protocol::OpenAi);
    let unknown = "gemini".parse::<Protocol>().unwrap_err();
    assert_eq!(
        unknown.message(),
        "unknown provider `gemini` (expected openai, anthropic or openai-responses)"
    );
}

#[tokio::test]
async fn http_api_key_goes_in_the_protocol_header() {
    // `PATH` stands in for a key variable: setting one is unsafe in edition 2024 with threads.
    let key = std::env::var("PATH").unwrap();
    for protocol in [
        Protocol::OpenAi,
        Protocol::Anthropic,
        Protocol::OpenAiResponses,
    ] {
        let body = match protocol {
            Protocol::OpenAi => openai_text("hi"),
            Protocol::Anthropic => anthropic_text("hi"),
            _ => responses_text("hi"),
        };
        let (url, seen) = replay(vec![(200, "", body)]).await;
        let model = HttpModel::new(HttpConfig {
            api_key_env: Some("PATH".into()),
            ..config(protocol, &url)
        })
        .unwrap();
        let parsed = model.send(&empty()).await.unwrap();
        assert_eq!(parsed.response.text().as_deref(), Some("hi"));
        let head = seen.lock().unwrap()[0].head.to_lowercase();
        let expected = match protocol {
            Protocol::Anthropic => format!("x-api-key: {key}"),
            _ => format!("authorization: bearer {key}"),
        };
        assert!(head.contains(&expected.to_lowercase()), "{head}");
    }
}

const SSE: &str = "content-type: text/event-stream\r\n";

fn sse(protocol: Protocol) -> String {
    let file = super::common::data_dir().join(format!("streams/{}.sse", protocol.name()));
    std::fs::read_to_string(file).unwrap()
}

/// Each protocol streams: text arrives before the call starts, the assembled response is the
/// whole one, and the request asked for a stream.
#[tokio::test]
async fn http_streams_each_protocol_through_the_callback() {
    for protocol in [
        Protocol::OpenAi,
        Protocol::Anthropic,
        Protocol::OpenAiResponses,
    ] {
        let (url, seen) = replay(vec![(200, SSE, sse(protocol))]).await;
        let model = HttpModel::new(config(protocol, &url)).unwrap();
        let mut events = Vec::new();
        let parsed = model
            .send_with(
                &Request {
                    tools: vec![],
                    messages: vec![],
                },
                |e| events.push(e),
            )
            .await
            .unwrap();
        assert_eq!(
            parsed.response.text().as_deref(),
            Some("Let me read it — ok."),
            "{protocol:?}"
        );
        assert_eq!(parsed.response.calls()[0].name, "read");
        assert_eq!(
            parsed.response.calls()[0].input,
            json!({ "url": "workspace:///notes.txt" })
        );
        assert!(
            parsed
                .response
                .usage
                .is_some_and(|u| u.cache_read_tokens > 0)
        );
        // Reasoning is tagged with the configured model, as the next render compares it.
        assert!(
            parsed
                .response
                .reasoning()
                .all(|r| r.model == "test-model" && r.prefix.is_some())
        );
        let first_call = events
            .iter()
            .position(|e| matches!(e, StreamEvent::ToolCall { .. }))
            .unwrap();
        // Thinking summaries come as reasoning events, before the answer's text.
        let first_answer = events
            .iter()
            .find(|e| !matches!(e, StreamEvent::Reasoning(_)))
            .unwrap();
        assert!(matches!(first_answer, StreamEvent::Text(_)), "{events:?}");
        assert!(
            events[first_call..]
                .iter()
                .all(|e| !matches!(e, StreamEvent::Text(_)))
        );
        let seen = seen.lock().unwrap().clone();
        let body = &seen[0].body;
        assert_eq!(body["stream"], true);
        let endpoint = match protocol {
            Protocol::OpenAi => {
                assert_eq!(body["stream_options"]["include_usage"], true);
                "POST /chat/completions "
            }
            Protocol::Anthropic => "POST /v1/messages ",
            _ => {
                assert_eq!(body["store"], false);
                "POST /responses "
            }
        };
        assert!(seen[0].head.starts_with(endpoint));
    }
}

/// A stream cut before it showed anything is retried from the start; one cut after it showed
/// part of the answer is not resent (the user would read two answers): the caller gets an
/// `Interrupted` error, worth trying again. A step whose attempt broke commits nothing.
#[tokio::test]
async fn http_stream_cut_midway_is_retried_only_before_it_showed_anything() {
    let whole = sse(Protocol::OpenAi);
    // Cut inside the first data line: nothing was shown yet.
    let early = whole[..whole.find("\n\n").unwrap() / 2].to_owned();
    let half = whole[..whole.len() / 2].to_owned();
    let (url, seen) = replay(vec![(200, SSE, early), (200, SSE, whole.clone())]).await;
    let model = HttpModel::new(config(Protocol::OpenAi, &url)).unwrap();
    let mut events = Vec::new();
    let parsed = model.send_with(&empty(), |e| events.push(e)).await.unwrap();
    assert_eq!(parsed.response.calls().len(), 1);
    assert_eq!(seen.lock().unwrap().len(), 2);
    let retry = events
        .iter()
        .position(|e| matches!(e, StreamEvent::Retry { .. }))
        .expect("a retry event");
    assert!(
        matches!(&events[retry], StreamEvent::Retry { reason } if reason.starts_with("the openai stream ended before the response was complete")),
        "{events:?}"
    );
    assert!(
        events[..retry]
            .iter()
            .all(|e| !matches!(e, StreamEvent::Text(_))),
        "{events:?}"
    );

    // Cut after text was shown: one attempt only, an interruption the caller sees.
    let (url, seen) = replay(vec![(200, SSE, half.clone()), (200, SSE, whole)]).await;
    let model = HttpModel::new(config(Protocol::OpenAi, &url)).unwrap();
    let mut events = Vec::new();
    let error = model
        .send_with(&empty(), |e| events.push(e))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ProviderErrorKind::Interrupted);
    assert!(error.is_retryable());
    assert!(
        error.message().starts_with("the answer was interrupted: "),
        "{error}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "never resent on its own");
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, StreamEvent::Retry { .. }))
    );

    let (url, _) = replay(vec![(200, SSE, half)]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut runtime = runtime(dir.path()).await;
    let model = HttpModel::new(HttpConfig {
        max_retries: 0,
        ..config(Protocol::OpenAi, &url)
    })
    .unwrap();
    let error = runtime.step_with(&model).await.unwrap_err();
    assert_eq!(
        error.message(),
        format!(
            "the model request failed: the answer was interrupted: the openai stream ended before the response was complete ({url}/chat/completions)"
        )
    );
    assert_eq!(runtime.prepare().await.unwrap().request.messages.len(), 1);
}

/// Reasoning and usage reach the store with the assistant message, and the next request replays
/// the reasoning verbatim to the same model.
#[tokio::test]
async fn http_reasoning_is_committed_and_replayed_to_the_same_model() {
    let (url, seen) = replay(vec![
        (200, SSE, sse(Protocol::Anthropic)),
        (200, "", anthropic_text("Milk and eggs.")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let mut runtime = runtime(dir.path()).await;
    let model = HttpModel::new(config(Protocol::Anthropic, &url)).unwrap();
    runtime.step_with(&model).await.unwrap();
    let prepared = runtime.prepare().await.unwrap();
    let assistant = &prepared.request.messages[1];
    assert!(
        matches!(&assistant.content[0], Part::Reasoning(r) if r.provider == "anthropic" && r.model == "test-model")
    );
    runtime.abandon(prepared);
    runtime.step_with(&model).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    let replayed = &seen[1].body["messages"][1]["content"];
    assert_eq!(
        replayed[0],
        json!({ "type": "thinking", "thinking": "The user wants the notes — read them.",
            "signature": "EqQBCkYIARgCIkBsig+/==" })
    );
    assert_eq!(
        replayed[1],
        json!({ "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT" })
    );
    assert_eq!(replayed[3]["type"], "tool_use");
}

/// A 307 to another origin is not followed: the conversation and the `x-api-key` stay with the
/// configured endpoint (the other server sees nothing), and the step fails clearly.
#[tokio::test]
async fn a_redirect_to_another_origin_is_never_followed_and_the_key_stays_home() {
    let (elsewhere, seen_elsewhere) = replay(vec![(200, "", anthropic_text("stolen"))]).await;
    let location = format!("location: {elsewhere}/v1/messages\r\n");
    let location: &'static str = Box::leak(location.into_boxed_str());
    let (url, seen) = replay(vec![(307, location, String::new())]).await;
    let model = HttpModel::new(HttpConfig {
        api_key_env: Some("PATH".into()),
        max_retries: 0,
        ..config(Protocol::Anthropic, &url)
    })
    .unwrap();
    let error = model.send(&empty()).await.unwrap_err();
    assert_eq!(error.kind(), ProviderErrorKind::Status, "{error}");
    assert!(error.message().contains("307"), "{error}");
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert!(
        seen_elsewhere.lock().unwrap().is_empty(),
        "nothing went to the other origin"
    );
}

/// The timeout is the longest wait for the next bytes, not a total: a stream that keeps
/// sending for longer than it is read whole and never resent.
#[tokio::test]
async fn a_stream_longer_than_the_timeout_is_read_whole_while_it_keeps_sending() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let whole = sse(Protocol::OpenAi);
    let served = Arc::new(Mutex::new(0usize));
    let count = served.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            *count.lock().unwrap() += 1;
            let mut buf = vec![0u8; 65536];
            let _ = socket.read(&mut buf).await;
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            socket.write_all(head.as_bytes()).await.unwrap();
            // Six pieces 250 ms apart: 1.5 s in all, each gap well under the 1 s timeout.
            let pieces: Vec<&[u8]> = whole.as_bytes().chunks(whole.len() / 6 + 1).collect();
            for piece in pieces {
                tokio::time::sleep(Duration::from_millis(250)).await;
                socket.write_all(piece).await.unwrap();
                socket.flush().await.unwrap();
            }
            let _ = socket.shutdown().await;
        }
    });
    let model = HttpModel::new(HttpConfig {
        timeout: Duration::from_secs(1),
        ..config(Protocol::OpenAi, &url)
    })
    .unwrap();
    let parsed = model.send(&empty()).await.unwrap();
    assert_eq!(parsed.response.calls().len(), 1);
    assert_eq!(*served.lock().unwrap(), 1, "read in one attempt");
}

/// A provider's "too long" refusal is its own kind, so the caller can shorten the request
/// instead of ending the session: Anthropic's 400, OpenAI's `context_length_exceeded`, a 413.
#[tokio::test]
async fn a_request_longer_than_the_window_fails_with_its_own_kind() {
    let anthropic = json!({ "type": "error", "error": { "type": "invalid_request_error",
        "message": "prompt is too long: 219898 tokens > 200000 maximum" } })
    .to_string();
    let openai = json!({ "error": { "type": "invalid_request_error", "code": "context_length_exceeded",
        "message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "param": "input" } })
    .to_string();
    let cases = [
        (Protocol::Anthropic, 400, anthropic),
        (Protocol::OpenAiResponses, 400, openai),
        (Protocol::OpenAi, 413, "request entity too large".to_owned()),
    ];
    for (protocol, status, body) in cases {
        let (url, _) = replay(vec![(status, "", body)]).await;
        let model = HttpModel::new(config(protocol, &url)).unwrap();
        let error = model.send(&empty()).await.unwrap_err();
        assert_eq!(error.kind(), ProviderErrorKind::ContextTooLong, "{error}");
        let model_error = ishiki_core::ModelError::from(error);
        assert_eq!(model_error.kind(), ModelErrorKind::ContextTooLong);
        assert!(!model_error.is_retryable(), "the same request fails again");
    }
    // Another 400 stays what it was.
    let (url, _) = replay(vec![(
        400,
        "",
        json!({ "error": { "message": "bad image" } }).to_string(),
    )])
    .await;
    let model = HttpModel::new(config(Protocol::OpenAi, &url)).unwrap();
    let error = model.send(&empty()).await.unwrap_err();
    assert_eq!(error.kind(), ProviderErrorKind::Status);
}
