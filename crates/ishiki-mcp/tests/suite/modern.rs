//! Both revisions of MCP in use (issue 25): the stateless `2026-07-28` one (`server/discover`,
//! list changes on a `subscriptions/listen` stream the client opens) and `2025-11-25`
//! (`initialize`), against a server of the official TypeScript SDK v2 that speaks both.

use std::time::Duration;

use ishiki_mcp::{McpProtocol, McpServer, McpServerConfig};
use serde_json::json;

use super::{node, sdk_v2};

fn modern(protocol: McpProtocol) -> McpServerConfig {
    modern_with(protocol, &[])
}

/// The server with environment variables (`MODERN_TTL_MS`, `MODERN_ONLY_2026`).
fn modern_with(protocol: McpProtocol, env: &[(&str, &str)]) -> McpServerConfig {
    let tools = sdk_v2();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/modern_server.mjs");
    // Node resolves the SDK from the script's copy beside `.tools/node_modules`.
    let copy = tools.join("modern_server.mjs");
    std::fs::copy(&script, &copy).expect("the server script is copied next to its SDK");
    let mut config = McpServerConfig::new("modern", node())
        .args([copy.display().to_string()])
        .protocol(protocol)
        .timeout(Duration::from_secs(20));
    for (name, value) in env {
        config.env.insert((*name).to_owned(), (*value).to_owned());
    }
    config
}

fn names(server: &McpServer) -> Vec<String> {
    let mut names: Vec<_> = server
        .listed_tools()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_2026_07_28_session_discovers_calls_and_follows_list_changes_on_its_stream() {
    let server = McpServer::start(modern(McpProtocol::V2026_07_28))
        .await
        .expect("server/discover");
    assert_eq!(names(&server), ["echo", "grow"]);
    let echoed = server.call("echo", json!({ "text": "hi" })).await.unwrap();
    assert_eq!(echoed["content"][0]["text"], "echo hi");
    server.call("grow", json!({})).await.unwrap();
    // The change arrives only on the subscriptions/listen stream.
    tokio::time::timeout(Duration::from_secs(10), server.tools_change())
        .await
        .expect("the list change is announced on the listen stream");
    let change = server.refresh_tools().await.unwrap();
    let added: Vec<_> = change.added.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(added, ["late"]);
    server.stop().await;
}

#[tokio::test]
async fn by_default_a_dual_era_server_is_spoken_to_with_initialize() {
    let server = McpServer::start(modern(McpProtocol::Auto))
        .await
        .expect("initialize");
    assert_eq!(names(&server), ["echo", "grow"]);
    let echoed = server.call("echo", json!({ "text": "x" })).await.unwrap();
    assert_eq!(echoed["content"][0]["text"], "echo x");
    server.call("grow", json!({})).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), server.tools_change())
        .await
        .expect("notifications/tools/list_changed");
    server.stop().await;
}

#[tokio::test]
async fn a_server_that_speaks_only_2026_07_28_is_reached_by_discover_after_initialize_is_refused() {
    let server = McpServer::start(modern_with(McpProtocol::Auto, &[("MODERN_ONLY_2026", "1")]))
        .await
        .expect("server/discover after the refused initialize");
    assert_eq!(names(&server), ["echo", "grow"]);
    // Two starts: the refused `initialize`, then `server/discover` on a new connection.
    assert_eq!(server.starts(), 2);
    let echoed = server.call("echo", json!({ "text": "new" })).await.unwrap();
    assert_eq!(echoed["content"][0]["text"], "echo new");
    // Only a 2026-07-28 session hears of list changes, on its listen stream.
    server.call("grow", json!({})).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), server.tools_change())
        .await
        .expect("the list change is announced on the listen stream");
    server.stop().await;
}

#[tokio::test]
async fn a_listing_past_its_ttl_counts_as_changed_and_is_listed_again() {
    let server = McpServer::start(modern_with(
        McpProtocol::V2026_07_28,
        &[("MODERN_TTL_MS", "300")],
    ))
    .await
    .expect("server/discover");
    assert!(!server.tools_changed(), "fresh right after the listing");
    // No notification comes: the wait ends when the listing's ttlMs has passed.
    tokio::time::timeout(Duration::from_secs(5), server.tools_change())
        .await
        .expect("stale after its ttlMs");
    assert!(server.tools_changed());
    let change = server.refresh_tools().await.unwrap();
    assert!(change.is_empty(), "the same tools");
    assert!(!server.tools_changed(), "the new listing is fresh again");
    server.stop().await;

    // The 2025-11-25 revision has no cache hints: the listing stays as it is.
    let server = McpServer::start(modern_with(
        McpProtocol::V2025_11_25,
        &[("MODERN_TTL_MS", "300")],
    ))
    .await
    .expect("initialize");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!server.tools_changed(), "no ttl in a 2025-11-25 listing");
    server.stop().await;
}

#[tokio::test]
async fn a_listen_stream_the_server_ends_is_opened_again_and_changes_are_heard_on_it() {
    let server = McpServer::start(modern_with(
        McpProtocol::V2026_07_28,
        &[("MODERN_DROPPABLE", "1")],
    ))
    .await
    .expect("server/discover");
    // Its listings say `ttlMs: 0`; the server announces changes, so only they count.
    assert!(!server.tools_changed(), "fresh until a change is announced");
    let dropped = server.call("drop-listen", json!({})).await.unwrap();
    assert_eq!(dropped["content"][0]["text"], "dropped");
    // Back after its first wait (1 s), the stream counts as a change: one made while it was
    // down was announced to nobody.
    tokio::time::timeout(Duration::from_secs(10), server.tools_change())
        .await
        .expect("the stream is opened again");
    let change = server.refresh_tools().await.unwrap();
    assert!(change.added.is_empty() && change.removed.is_empty());
    assert!(!server.tools_changed());
    // And the new stream carries the next change.
    server.call("grow", json!({})).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), server.tools_change())
        .await
        .expect("the change is announced on the new stream");
    let change = server.refresh_tools().await.unwrap();
    let added: Vec<_> = change.added.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(added, ["late"]);
    server.stop().await;
}
