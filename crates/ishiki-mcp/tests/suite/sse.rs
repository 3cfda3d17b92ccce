//! Remote servers over the older HTTP+SSE transport (MCP `2024-11-05`): the reference server
//! in its `sse` mode, a real HTTP server on 127.0.0.1 started by the test, chosen in the
//! profile (`transport: sse`) or found by the spec's fallback from the URL alone. Their tools
//! join the pool like any other MCP tools (TS-5).

use std::time::Duration;

use ishiki_core::Profile;
use ishiki_mcp::{McpServer, McpServerConfig, McpTransport, connect_all};
use serde_json::json;

use super::http::{Served, everything_in};
use super::{runtime, step};

/// The reference server in `sse` mode on a free port (`GET /sse`, `POST /message`), once it
/// accepts connections; its SSE URL.
fn everything_sse() -> (Served, String) {
    let served = everything_in("sse");
    let url = format!("http://127.0.0.1:{}/sse", served.port);
    (served, url)
}

#[tokio::test]
async fn ts5_an_sse_server_named_in_the_profile_joins_the_pool_and_its_text_and_image_tools_work() {
    let (_served, url) = everything_sse();
    let profile = Profile::from_yaml(&format!(
        "mcp:\n  servers:\n    everything:\n      url: {url}\n      transport: sse\n      resident: true\n      timeoutMs: 20000\n"
    ))
    .expect("a profile with an HTTP+SSE server");
    let configs = McpServerConfig::from_profile(&profile);
    assert_eq!(configs[0].transport, McpTransport::Sse);
    let (tools, errors) = connect_all(&configs).await;
    assert!(errors.is_empty(), "{errors:?}");
    let names: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
    for expected in ["everything_echo", "everything_get-tiny-image"] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    let state = tempfile::tempdir().expect("tempdir");
    let mut runtime = runtime(&profile, tools, state.path()).await;
    let reports = step(
        &mut runtime,
        &[("everything_echo", json!({ "message": "over sse" }))],
    )
    .await;
    let shown = format!("{:?}", reports[0]);
    assert!(shown.contains("Echo: over sse"), "{shown}");
    let tiny = step(&mut runtime, &[("everything_get-tiny-image", json!({}))]).await;
    let shown = format!("{:?}", tiny[0]);
    assert!(shown.contains("image/png"), "the image is kept: {shown}");
}

#[tokio::test]
async fn a_url_whose_initialize_post_is_answered_404_is_reached_over_sse_at_the_same_url() {
    let (_served, url) = everything_sse();
    // Only the URL: the Streamable HTTP POST to /sse is answered 404 (Express's
    // `Cannot POST /sse`, no JSON-RPC error), so the GET finds the SSE stream.
    let config = McpServerConfig::http("legacy", &url).timeout(Duration::from_secs(20));
    assert_eq!(config.transport, McpTransport::Auto);
    let server = McpServer::start(config).await.expect("falls back to SSE");
    assert!(
        server
            .listed_tools()
            .iter()
            .any(|t| t.name == "get-tiny-image"),
        "listed over SSE"
    );
    let echo = server
        .call("echo", json!({ "message": "found by fallback" }))
        .await
        .expect("answers over SSE");
    assert_eq!(echo["content"][0]["text"], "Echo: found by fallback");
    let tiny = server
        .call("get-tiny-image", json!({}))
        .await
        .expect("answers");
    let image = tiny["content"]
        .as_array()
        .and_then(|c| c.iter().find(|b| b["type"] == "image"))
        .expect("an image block");
    assert_eq!(image["mimeType"], "image/png");

    // Pinned to Streamable HTTP, the same URL is not tried over SSE.
    let pinned = McpServerConfig::http("modern", &url)
        .transport(McpTransport::StreamableHttp)
        .timeout(Duration::from_secs(20));
    let error = McpServer::start(pinned).await.expect_err("no fallback");
    assert!(error.message().contains("404"), "{error}");
    assert!(!error.message().contains("HTTP+SSE"), "{error}");
}

#[tokio::test]
async fn an_sse_server_configured_for_oauth_is_refused_at_connect_saying_why() {
    let (_served, url) = everything_sse();
    let config = McpServerConfig::http("legacy", &url)
        .transport(McpTransport::Sse)
        .oauth(ishiki_mcp::OAuthConfig::AuthorizationCode {
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            scopes: Vec::new(),
        });
    let error = McpServer::start(config)
        .await
        .expect_err("no OAuth over SSE");
    assert_eq!(error.kind(), ishiki_mcp::McpErrorKind::Start, "{error}");
    assert!(
        error
            .message()
            .contains("Ishiki does not offer over the older HTTP+SSE transport"),
        "{error}"
    );
}
