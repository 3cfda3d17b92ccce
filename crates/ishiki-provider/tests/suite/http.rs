//! The live model against a local server on 127.0.0.1 that replays recorded responses of each
//! API: tool call, text, 429 then success, 500, malformed body, unreachable endpoint.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ishiki_core::{Durability, ModelsDoc, Profile, Request, Runtime, assemble};
use ishiki_provider::{HttpConfig, HttpModel, Protocol, ProviderErrorKind};
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
            let response = format!(
                "HTTP/1.1 {status} Replayed\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{headers}\r\n{body}",
                body.len()
            );
            socket.write_all(response.as_bytes()).await.unwrap();
            socket.shutdown().await.unwrap();
        }
    });
    (url, seen)
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

fn runtime(dir: &std::path::Path) -> Runtime {
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
        .unwrap();
    runtime
        .add_user_message("m1", "What is in notes.txt?", &[])
        .unwrap();
    runtime
}

/// A session over each protocol: a tool call runs, its result reaches the next request.
#[tokio::test]
async fn http_session_continues_after_a_tool_call() {
    for protocol in [Protocol::OpenAi, Protocol::Anthropic] {
        let script = match protocol {
            Protocol::OpenAi => vec![
                (200, "", openai_call("call_1")),
                (200, "", openai_text("Milk and eggs.")),
            ],
            Protocol::Anthropic => vec![
                (200, "", anthropic_call("toolu_1")),
                (200, "", anthropic_text("Milk and eggs.")),
            ],
        };
        let (url, seen) = replay(script).await;
        let dir = tempfile::tempdir().unwrap();
        let mut runtime = runtime(dir.path());
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
    let parsed = model
        .send(&Request {
            tools: vec![],
            messages: vec![],
        })
        .await
        .unwrap();
    assert_eq!(parsed.response.text.as_deref(), Some("ok"));
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
    let error = model
        .send(&Request {
            tools: vec![],
            messages: vec![],
        })
        .await
        .unwrap_err();
    assert_eq!(error.kind(), ProviderErrorKind::Status);
    assert_eq!(
        error.message(),
        format!(
            "{url}/v1/messages answered 500 Internal Server Error: Internal server error (after 3 attempts)"
        )
    );
    assert_eq!(seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn http_malformed_body_fails_without_retry_and_the_session_reports_it() {
    let (url, seen) = replay(vec![(200, "", "<html>gateway</html>".to_owned())]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut runtime = runtime(dir.path());
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
    assert_eq!(runtime.prepare().unwrap().request.messages.len(), 1);
}

#[tokio::test]
async fn http_unreachable_endpoint_and_missing_key_are_clear_errors() {
    // A port that was just free: nothing listens there.
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
    let error = model
        .send(&Request {
            tools: vec![],
            messages: vec![],
        })
        .await
        .unwrap_err();
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
        "unknown provider `gemini` (expected openai or anthropic)"
    );
}

#[tokio::test]
async fn http_api_key_goes_in_the_protocol_header() {
    // `PATH` stands in for a key variable: setting one is unsafe in edition 2024 with threads.
    let key = std::env::var("PATH").unwrap();
    for protocol in [Protocol::OpenAi, Protocol::Anthropic] {
        let body = match protocol {
            Protocol::OpenAi => openai_text("hi"),
            Protocol::Anthropic => anthropic_text("hi"),
        };
        let (url, seen) = replay(vec![(200, "", body)]).await;
        let model = HttpModel::new(HttpConfig {
            api_key_env: Some("PATH".into()),
            ..config(protocol, &url)
        })
        .unwrap();
        let parsed = model
            .send(&Request {
                tools: vec![],
                messages: vec![],
            })
            .await
            .unwrap();
        assert_eq!(parsed.response.text.as_deref(), Some("hi"));
        let head = seen.lock().unwrap()[0].head.to_lowercase();
        let expected = match protocol {
            Protocol::OpenAi => format!("authorization: bearer {key}"),
            Protocol::Anthropic => format!("x-api-key: {key}"),
        };
        assert!(head.contains(&expected.to_lowercase()), "{head}");
    }
}
