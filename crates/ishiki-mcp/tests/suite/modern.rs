//! Both revisions of MCP in use (issue 25): the stateless `2026-07-28` one (`server/discover`,
//! list changes on a `subscriptions/listen` stream the client opens) and `2025-11-25`
//! (`initialize`), against a server of the official TypeScript SDK v2 that speaks both.

use std::time::Duration;

use ishiki_mcp::{McpProtocol, McpServer, McpServerConfig};
use serde_json::json;

use super::{node, sdk_v2};

fn modern(protocol: McpProtocol) -> McpServerConfig {
    let tools = sdk_v2();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/modern_server.mjs");
    // Node resolves the SDK from the script's copy beside `.tools/node_modules`.
    let copy = tools.join("modern_server.mjs");
    std::fs::copy(&script, &copy).expect("the server script is copied next to its SDK");
    McpServerConfig::new("modern", node())
        .args([copy.display().to_string()])
        .protocol(protocol)
        .timeout(Duration::from_secs(20))
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
