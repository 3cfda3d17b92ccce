//! Servers that fail: one that cannot start, one that never answers, one that exits mid-call.
//! Each gives a clear error within its timeout, the session goes on, and the next call
//! restarts the server.

use std::time::Duration;

use ishiki_core::Profile;
use ishiki_mcp::{McpErrorKind, McpServer, connect_all};
use serde_json::json;

use super::{fake_config, runtime, step, with_snapshots};

// Long enough for `node` to start on a loaded 2-core machine, short enough to keep the suite fast.
// Long enough that starting node and listing tools never hits it on a loaded CI machine,
// short enough to keep the hung-call tests quick.
const SHORT: Duration = Duration::from_millis(5000);

#[tokio::test]
async fn sec_servers_that_fail_to_start_are_reported_and_the_rest_connect() {
    let configs = vec![
        fake_config("good", "normal", Duration::from_secs(20)),
        fake_config("crash", "crash", Duration::from_secs(20)),
        fake_config("silent", "silent", SHORT),
        ishiki_mcp::McpServerConfig::new("missing", "/nonexistent/ishiki-mcp-test-server"),
    ];
    let (tools, errors) = connect_all(&configs).await;
    let names: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
    assert_eq!(names, ["good_ping", "good_hang", "good_exit", "good_huge"]);
    let kinds: Vec<McpErrorKind> = errors.iter().map(|e| e.kind()).collect();
    assert_eq!(kinds, [McpErrorKind::Start; 3]);
    let script = configs[0].args[0].clone();
    let text: String = errors
        .iter()
        .map(|e| {
            format!(
                "{}: {}\n",
                e.server(),
                e.message().replace(&script, "<fake_server.js>")
            )
        })
        .collect();
    assert!(
        text.contains("configuration missing"),
        "stderr is quoted: {text}"
    );
    with_snapshots(|| insta::assert_snapshot!("start_errors", text));
}

#[tokio::test]
async fn sec_a_hung_server_times_out_and_restarts_on_the_next_call() {
    let (tools, errors) = connect_all(&[fake_config("fake", "normal", SHORT)]).await;
    assert!(errors.is_empty(), "{errors:?}");
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = Profile::default();
    let mut rt = runtime(&profile, tools, dir.path()).await;

    let hung = step(&mut rt, &[("fake_hang", json!({}))]).await;
    assert!(hung[0].is_error);
    with_snapshots(|| insta::assert_snapshot!("hung_server_error", hung[0].text));

    let next = step(&mut rt, &[("fake_ping", json!({}))]).await;
    assert!(!next[0].is_error, "{}", next[0].text);
    assert_eq!(next[0].text, "pong");
}

#[tokio::test]
async fn sec_a_server_that_exits_mid_call_fails_fast_and_restarts() {
    let server = McpServer::start(fake_config("fake", "normal", Duration::from_secs(20)))
        .await
        .expect("starts");
    assert_eq!(server.starts(), 1);
    let error = server.call("exit", json!({})).await.expect_err("it exits");
    // The exit is noticed, not waited out: the kind says closed, not timeout.
    assert_eq!(error.kind(), McpErrorKind::Closed, "{error}");
    assert!(error.message().contains("exiting on request"), "{error}");
    with_snapshots(|| insta::assert_snapshot!("exited_server_error", error.message()));

    let pong = server.call("ping", json!({})).await.expect("restarted");
    assert_eq!(pong["content"][0]["text"], "pong");
    assert_eq!(server.starts(), 2);

    // A refused request (unknown tool) is a protocol error and keeps the server running.
    let refused = server.call("nope", json!({})).await.expect_err("refused");
    assert_eq!(refused.kind(), McpErrorKind::Protocol, "{refused}");
    assert_eq!(server.starts(), 2);
    server.stop().await;
}

#[tokio::test]
async fn sec_a_reply_over_16_mib_fails_at_once_saying_so() {
    // A timeout far longer than the test may take: the answer must not be waited out.
    let server = McpServer::start(fake_config("fake", "normal", Duration::from_secs(120)))
        .await
        .expect("starts");
    let started = std::time::Instant::now();
    let error = server.call("huge", json!({})).await.expect_err("too large");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "not waited out"
    );
    assert_eq!(error.kind(), McpErrorKind::BadReply, "{error}");
    assert_eq!(
        error.message(),
        "mcp server `fake` sent a message over 16 MiB (the limit for one message) during `huge`; it was stopped and restarts on the next call"
    );
    let pong = server.call("ping", json!({})).await.expect("restarted");
    assert_eq!(pong["content"][0]["text"], "pong");
    server.stop().await;
}
