//! Remote servers over Streamable HTTP: the reference server in its `streamableHttp` mode, and
//! a small hostile one (`tests/data/fake_http_server.js`), both real HTTP servers on 127.0.0.1
//! started by the test.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ishiki_core::Profile;
use ishiki_mcp::{McpErrorKind, McpServer, McpServerConfig, connect_all};
use serde_json::json;

use super::{everything_entry, node, runtime, step, with_snapshots};

/// A server process killed when the test ends, however it ends.
pub(super) struct Served {
    pub(super) child: Child,
    pub(super) port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// The fake HTTP server on `port` (0: any), requiring `token` when given; waits until it listens.
fn fake_http(port: u16, token: Option<&str>) -> Served {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fake_http_server.js");
    let mut command = Command::new(node());
    command.arg(script).arg(port.to_string());
    if let Some(token) = token {
        command.arg(token);
    }
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("node runs the fake http server");
    let stdout = child.stdout.take().expect("piped");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the fake http server says where it listens");
    let port = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    Served { child, port }
}

/// A port nothing listens on now (the OS gave it and it was released).
pub(super) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    listener.local_addr().expect("has an address").port()
}

/// The reference server in `streamableHttp` mode on a free port, once it accepts connections.
fn everything_http() -> Served {
    everything_in("streamableHttp")
}

/// The reference server in `mode` (`streamableHttp`, `sse`) on a free port, once it accepts
/// connections.
pub(super) fn everything_in(mode: &str) -> Served {
    let port = free_port();
    let child = Command::new(node())
        .arg(everything_entry())
        .arg(mode)
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node runs server-everything");
    let served = Served { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "server-everything did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    served
}

#[tokio::test]
async fn a_remote_server_declared_by_url_joins_the_pool_and_its_tools_work_direct() {
    let served = everything_http();
    let profile = Profile::from_yaml(&format!(
        "mcp:\n  servers:\n    everything:\n      url: {}\n      resident: true\n      timeoutMs: 20000\n",
        served.url()
    ))
    .expect("a profile with a remote server");
    let configs = McpServerConfig::from_profile(&profile);
    assert_eq!(configs[0].url.as_deref(), Some(served.url().as_str()));
    let (tools, errors) = connect_all(&configs).await;
    assert!(errors.is_empty(), "{errors:?}");
    let names: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
    assert!(names.iter().any(|n| n == "everything_echo"), "{names:?}");
    let state = tempfile::tempdir().expect("tempdir");
    let mut runtime = runtime(&profile, tools, state.path()).await;
    let reports = step(
        &mut runtime,
        &[("everything_echo", json!({ "message": "over http" }))],
    )
    .await;
    let shown = format!("{:?}", reports[0]);
    assert!(shown.contains("Echo: over http"), "{shown}");
    let tiny = step(&mut runtime, &[("everything_get-tiny-image", json!({}))]).await;
    let shown = format!("{:?}", tiny[0]);
    assert!(shown.contains("image/png"), "the image is kept: {shown}");
}

#[tokio::test]
async fn a_dead_remote_server_fails_its_calls_clearly_and_is_reconnected_with_backoff() {
    let served = fake_http(0, None);
    let port = served.port;
    let config = McpServerConfig::http("remote", served.url()).timeout(Duration::from_secs(5));
    let server = McpServer::start(config).await.expect("connects");
    let pong = server.call("ping", json!({})).await.expect("answers");
    assert_eq!(pong["content"][0]["text"], "pong");

    drop(served);
    let started = Instant::now();
    let error = server.call("ping", json!({})).await.expect_err("gone");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "fails at once, not at the timeout"
    );
    assert!(
        matches!(error.kind(), McpErrorKind::Closed | McpErrorKind::Start),
        "{error}"
    );
    assert!(error.message().contains("mcp server `remote`"), "{error}");
    // The next call finds the server still unreachable; the one after waits for the backoff.
    let again = server
        .call("ping", json!({}))
        .await
        .expect_err("still gone");
    assert_eq!(again.kind(), McpErrorKind::Start, "{again}");
    let soon = server
        .call("ping", json!({}))
        .await
        .expect_err("backing off");
    assert!(soon.message().contains("the next attempt is in"), "{soon}");
    let url = format!("http://127.0.0.1:{port}/mcp");
    // The wait left depends on timing; the snapshot shows the words.
    let shown = [&error, &again, &soon].map(|e| {
        let text = e.message().replace(&url, "<url>");
        match text.split_once("the next attempt is in ") {
            Some((head, _)) => format!("{head}the next attempt is in <ms>"),
            None => text,
        }
    });
    with_snapshots(|| insta::assert_snapshot!("http_dead_server_errors", shown.join("\n")));

    let _back = fake_http(port, None);
    let deadline = Instant::now() + Duration::from_secs(10);
    let pong = loop {
        match server.call("ping", json!({})).await {
            Ok(pong) => break pong,
            Err(e) => {
                assert!(Instant::now() < deadline, "not reconnected: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(pong["content"][0]["text"], "pong");
    assert!(server.starts() >= 2, "reconnected");
}

#[tokio::test]
async fn a_hostile_sse_stream_is_bounded_in_bytes_and_time_and_split_frames_still_work() {
    let served = fake_http(0, None);
    let config = McpServerConfig::http("hostile", served.url()).timeout(Duration::from_secs(3));
    let server = McpServer::start(config).await.expect("connects");

    let split = server
        .call("split", json!({}))
        .await
        .expect("split frames are joined");
    assert_eq!(split["content"][0]["text"], "pong");

    let started = Instant::now();
    let huge = server
        .call("huge", json!({}))
        .await
        .expect_err("over the limit");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded in time"
    );
    assert!(huge.message().contains("mcp server `hostile`"), "{huge}");
    assert!(
        huge.message().len() < 1000,
        "{} bytes",
        huge.message().len()
    );
    with_snapshots(|| insta::assert_snapshot!("http_huge_event_error", huge.message()));

    let started = Instant::now();
    let endless = server
        .call("endless", json!({}))
        .await
        .expect_err("never answers");
    assert_eq!(endless.kind(), McpErrorKind::Timeout, "{endless}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded in time"
    );

    let pong = server
        .call("ping", json!({}))
        .await
        .expect("the server still works");
    assert_eq!(pong["content"][0]["text"], "pong");
}

#[tokio::test]
async fn headers_and_the_bearer_token_come_from_the_environment_and_never_show_in_errors() {
    // Variables cargo sets for every test process stand in for secrets (tests cannot set
    // variables safely while other threads run).
    let token = env!("CARGO_MANIFEST_DIR");
    let served = fake_http(0, Some(token));
    let profile = Profile::from_yaml(&format!(
        "mcp:\n  servers:\n    remote:\n      url: {}\n      headers: {{ x-trace: \"id ${{CARGO_PKG_NAME}}\" }}\n      auth: {{ tokenEnv: CARGO_MANIFEST_DIR }}\n",
        served.url()
    ))
    .expect("a profile with headers and auth");
    let configs = McpServerConfig::from_profile(&profile);
    let server = McpServer::start(configs[0].clone())
        .await
        .expect("authorized");
    let trace = server.call("headers", json!({})).await.expect("answers");
    assert_eq!(trace["content"][0]["text"], "id ishiki-mcp");
    let leak = server.call("leak", json!({})).await.expect_err("refused");
    assert!(!leak.message().contains(token), "{leak}");

    // Without the token the server refuses, and the error names no secret.
    let unauthorized = McpServerConfig::http("remote", served.url());
    let error = McpServer::start(unauthorized).await.expect_err("401");
    assert_eq!(error.kind(), McpErrorKind::Start, "{error}");
    assert!(!error.message().contains(token), "{error}");
    let shown = error.message().replace(&served.url(), "<url>");
    with_snapshots(|| insta::assert_snapshot!("http_unauthorized_error", shown));

    let unset = McpServerConfig::http("remote", served.url())
        .header("x-trace", "${ISHIKI_SURELY_UNSET_VARIABLE}");
    let error = McpServer::start(unset).await.expect_err("unset variable");
    assert!(
        error
            .message()
            .contains("the environment variable `ISHIKI_SURELY_UNSET_VARIABLE` named in its header `x-trace` is not set"),
        "{error}"
    );
}

/// An `https://` server gets a TLS client (ring, the workspace's one crypto provider, is in
/// place): nothing listening there is a start error that says so, not a panic for want of a
/// provider.
#[tokio::test]
async fn an_https_server_that_is_not_there_fails_to_start_clearly() {
    let port = free_port();
    let config = McpServerConfig::http("secure", format!("https://127.0.0.1:{port}/mcp"))
        .timeout(Duration::from_secs(5));
    let error = McpServer::start(config)
        .await
        .expect_err("nothing listens there");
    assert_eq!(error.kind(), McpErrorKind::Start, "{error}");
    assert!(error.message().contains("mcp server `secure`"), "{error}");
}
