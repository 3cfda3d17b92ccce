//! A server whose tool list changes mid-session (`notifications/tools/list_changed`, TS-5):
//! new tools are announced in an appended catalog delta, removed ones in an appended "no longer
//! available" note; no earlier message or listed tool changes, and a removed tool called later
//! gets a clear error.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ishiki_core::{ModelResponse, Part, Profile, Request, Runtime, ToolCall};
use ishiki_mcp::{McpServer, apply_tool_changes, server_tools, start_all};
use serde_json::json;

use super::{fake_config, runtime, step, with_snapshots};

fn tool_names(request: &Request) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

fn last_texts(request: &Request) -> String {
    request
        .messages
        .last()
        .into_iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fake server in `mode` (a `changing` one), and a runtime on its tools with state in
/// `dir`.
async fn started(mode: &str, dir: &Path) -> (Vec<Arc<McpServer>>, Runtime) {
    let config = fake_config("fake", mode, Duration::from_secs(20));
    let (servers, errors) = start_all(&[config]).await;
    assert!(errors.is_empty(), "{errors:?}");
    let (tools, errors) = server_tools(&servers[0]);
    assert!(errors.is_empty(), "{errors:?}");
    let rt = runtime(&Profile::default(), tools, dir).await;
    (servers, rt)
}

#[tokio::test]
async fn ts5_tools_a_server_adds_and_removes_mid_session_are_announced_by_appending() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (servers, mut rt) = started("changing", dir.path()).await;

    let pong = step(&mut rt, &[("fake_ping", json!({}))]).await;
    assert_eq!(pong[0].text, "pong");
    assert!(!servers[0].tools_changed(), "no notification yet");
    assert!(apply_tool_changes(&servers, &mut rt).await.is_empty());

    // The server drops `ping`, adds `echo` and says so before it answers.
    let swapped = step(&mut rt, &[("fake_swap", json!({}))]).await;
    assert_eq!(swapped[0].text, "swapped");
    tokio::time::timeout(Duration::from_secs(20), servers[0].tools_change())
        .await
        .expect("the list_changed notification arrives");

    // The request as it was before the change (an abandoned attempt commits nothing).
    let attempt = rt.prepare().await.expect("prepare");
    let before = attempt.request.clone();
    rt.abandon(attempt);
    let errors = apply_tool_changes(&servers, &mut rt).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert!(!servers[0].tools_changed(), "listed again");

    let prepared = rt.prepare().await.expect("prepare");
    let now = prepared.request.clone();
    // Append-only: every tool and message of the previous request comes back unchanged.
    assert_eq!(
        tool_names(&now)[..before.tools.len()],
        tool_names(&before)[..]
    );
    assert!(
        tool_names(&now).contains(&"fake_ping".to_owned()),
        "still listed"
    );
    assert_eq!(
        tool_names(&now).last().map(String::as_str),
        Some("fake_echo")
    );
    assert_eq!(now.messages[..before.messages.len()], before.messages[..]);
    assert_eq!(
        now.messages.len(),
        before.messages.len() + 1,
        "one appended delta"
    );
    let delta = last_texts(&now);
    with_snapshots(|| insta::assert_snapshot!("list_changed_delta", delta));

    let response = ModelResponse::from_calls([
        ToolCall {
            id: "late-ping".into(),
            name: "fake_ping".into(),
            input: json!({}),
        },
        ToolCall {
            id: "echo".into(),
            name: "fake_echo".into(),
            input: json!({ "text": "hello" }),
        },
    ]);
    rt.commit(prepared, response).await.expect("commit");
    let reports = rt.execute().await.expect("execute");
    assert!(reports[0].is_error);
    assert_eq!(
        reports[0].text,
        "the tool `fake_ping` is no longer available: it was removed from the catalog (its server no longer offers it)"
    );
    assert!(!reports[1].is_error, "{}", reports[1].text);
    assert_eq!(reports[1].text, "hello");

    // Announced once: the next request appends no further delta.
    let next = rt.prepare().await.expect("prepare").request;
    assert!(!last_texts(&next).contains("no longer available"));
    assert_eq!(next.messages[..now.messages.len()], now.messages[..]);
}

/// A tool whose new definition the runtime refuses (its schema does not compile) counts as
/// removed: its old definition is not called by mistake, and the refusal is reported.
#[tokio::test]
async fn a_changed_tool_whose_new_schema_does_not_compile_is_removed_and_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (servers, mut rt) = started("changing-bad", dir.path()).await;
    assert_eq!(
        step(&mut rt, &[("fake_ping", json!({}))]).await[0].text,
        "pong"
    );

    step(&mut rt, &[("fake_swap", json!({}))]).await;
    tokio::time::timeout(Duration::from_secs(20), servers[0].tools_change())
        .await
        .expect("the list_changed notification arrives");
    let errors = apply_tool_changes(&servers, &mut rt).await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .message()
            .contains("tool `fake_ping` has an invalid input schema"),
        "{}",
        errors[0].message()
    );
    let after = step(&mut rt, &[("fake_ping", json!({}))]).await;
    assert!(after[0].is_error, "{after:?}");
    assert!(
        after[0].text.contains("no longer available"),
        "{}",
        after[0].text
    );
}
