//! A hostile HTTP+SSE server written here (raw HTTP/1.1 on a tokio `TcpListener`): the stream
//! is bounded in bytes and time, its `endpoint` must stay on the configured origin, split
//! frames still work, a refused POST and a closed stream fail their call clearly.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ishiki_mcp::{McpErrorKind, McpServer, McpServerConfig, McpTransport};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with its SSE stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Names an endpoint on another origin.
    Foreign,
    /// Sends a comment and never an `endpoint` event.
    Silent,
    /// Sends a `data:` line that never ends (until the client hangs up).
    EndlessLine,
    /// A working server (it answers `initialize` with `2024-11-05`) that writes every event
    /// one byte at a time, with a BOM, comments, `id:`/`retry:` fields and CRLF, CR and LF
    /// line ends; its tools: `ping`, `refuse` (POST answered 500 echoing the token), `huge`
    /// (an event over the limit), `close` (the stream closes without an answer), `moved` (a
    /// second, other `endpoint` event), `garbage` (a `message` event that is not JSON).
    Working,
}

/// The token the tests send (`CARGO_MANIFEST_DIR`: set for every test process, so nothing
/// has to set a variable while other threads run).
const TOKEN_ENV: &str = "CARGO_MANIFEST_DIR";

/// The server: its port, every request head it received (lowercased), its SSE stream.
struct Hostile {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hostile {
    fn config(&self, timeout: Duration) -> McpServerConfig {
        let mut config =
            McpServerConfig::http("hostile", format!("http://127.0.0.1:{}/sse", self.port))
                .transport(McpTransport::Sse)
                .header("x-team", "blue")
                .timeout(timeout);
        config.token_env = Some(TOKEN_ENV.to_owned());
        config
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("not poisoned").clone()
    }
}

type Stream = Arc<tokio::sync::Mutex<Option<TcpStream>>>;

async fn hostile(mode: Mode) -> Hostile {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let port = listener.local_addr().expect("an address").port();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let stream: Stream = Arc::default();
    let seen = heads.clone();
    let task = tokio::spawn(async move {
        let mut handlers = tokio::task::JoinSet::new();
        while let Ok((socket, _)) = listener.accept().await {
            handlers.spawn(serve(socket, mode, seen.clone(), stream.clone()));
        }
    });
    Hostile { port, heads, task }
}

/// One HTTP request on `socket`.
async fn serve(mut socket: TcpStream, mode: Mode, heads: Arc<Mutex<Vec<String>>>, sse: Stream) {
    let _ = socket.set_nodelay(true);
    let mut buffer = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let Ok(n) = socket.read(&mut chunk).await else {
            return;
        };
        if n == 0 || buffer.len() > 64 * 1024 {
            return;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_lowercase();
    heads.lock().expect("not poisoned").push(head.clone());
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    if head.starts_with("get /sse") {
        open_stream(socket, mode, sse).await;
    } else if head.starts_with("post /message?session=1 ") {
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let token = std::env::var(TOKEN_ENV).unwrap_or_default();
        post(socket, message, &token, &sse).await;
    } else {
        let _ = socket
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            .await;
    }
}

async fn open_stream(mut socket: TcpStream, mode: Mode, sse: Stream) {
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\
                 connection: close\r\n\r\n";
    if socket.write_all(head).await.is_err() {
        return;
    }
    match mode {
        Mode::Foreign => {
            let _ = socket
                .write_all(b"event: endpoint\ndata: http://evil.example/message?session=1\n\n")
                .await;
        }
        Mode::Silent => {
            let _ = socket.write_all(b": nothing to say\n\n").await;
        }
        Mode::EndlessLine => {
            let _ = socket.write_all(b"data: ").await;
            let block = vec![b'x'; 64 * 1024];
            // 32 MiB at most, twice the limit; the client hangs up first.
            for _ in 0..512 {
                if socket.write_all(&block).await.is_err() {
                    return;
                }
            }
        }
        Mode::Working => {
            // Held while the endpoint is written, so a POST that follows it at once finds
            // the stream to answer on.
            let mut held = sse.lock().await;
            let endpoint = "\u{feff}: welcome\r\nretry: 10\r\nevent: endpoint\r\ndata: /message?session=1\r\n\r\n";
            if bytewise(&mut socket, endpoint.as_bytes()).await.is_ok() {
                *held = Some(socket);
            }
            return;
        }
    }
    *sse.lock().await = Some(socket);
    // The stream stays open (held in `sse`) until the test ends or a tool closes it.
}

/// Writes `bytes` one at a time, each flushed on its own.
async fn bytewise(socket: &mut TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    for byte in bytes {
        socket.write_all(std::slice::from_ref(byte)).await?;
        socket.flush().await?;
    }
    Ok(())
}

/// A JSON-RPC message posted to the endpoint: answered 202 and replied to on the stream.
async fn post(mut socket: TcpStream, message: Value, token: &str, sse: &Stream) {
    let id = message.get("id").cloned();
    let method = message["method"].as_str().unwrap_or_default();
    let tool = message["params"]["name"].as_str().unwrap_or_default();
    if tool == "refuse" {
        let body = format!("no thanks, {token}");
        let answer = format!(
            "HTTP/1.1 500 Internal Server Error\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        let _ = socket.write_all(answer.as_bytes()).await;
        return;
    }
    let _ = socket
        .write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .await;
    drop(socket);
    let Some(id) = id else {
        return; // A notification.
    };
    let mut guard = sse.lock().await;
    let Some(stream) = guard.as_mut() else {
        return;
    };
    let result = match (method, tool) {
        // The revision of the HTTP+SSE era, whatever the client asked for.
        ("initialize", _) => json!({
            "protocolVersion": "2024-11-05",
            "capabilities": { "tools": {} },
            "serverInfo": { "name": "hostile", "version": "1" }
        }),
        ("tools/list", _) => {
            let tools: Vec<Value> = ["ping", "refuse", "huge", "close", "moved", "garbage"]
                .iter()
                .map(|name| json!({ "name": name, "inputSchema": { "type": "object" } }))
                .collect();
            json!({ "tools": tools })
        }
        ("tools/call", "ping") => json!({ "content": [{ "type": "text", "text": "pong" }] }),
        ("tools/call", "huge") => {
            // Seventeen lines of 1 MiB: no line is over the limit, the event is.
            let line = format!("data: {}\n", "y".repeat(1024 * 1024));
            for _ in 0..17 {
                if stream.write_all(line.as_bytes()).await.is_err() {
                    return;
                }
            }
            return;
        }
        ("tools/call", "moved") => {
            let _ = stream
                .write_all(b"event: endpoint\ndata: /elsewhere\n\n")
                .await;
            return;
        }
        ("tools/call", "garbage") => {
            let _ = stream.write_all(b"data: <html>oops</html>\n\n").await;
            return;
        }
        ("tools/call", "close") => {
            let _ = stream.shutdown().await;
            *guard = None;
            return;
        }
        _ => json!({}),
    };
    let reply = json!({ "jsonrpc": "2.0", "id": id, "result": result }).to_string();
    // A comment, an unknown event, then the reply with CRLF, CR and LF line ends and its
    // JSON cut over two `data:` lines (after its first comma, between two members).
    let (first, second) = reply.split_at(reply.find(',').map_or(0, |at| at + 1));
    let event = format!(
        ": keep-alive\r\nevent: unknown\ndata: ignored\n\nid: 7\r\nevent: message\rdata: {first}\r\ndata:{second}\n\n"
    );
    let _ = bytewise(stream, event.as_bytes()).await;
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused_and_nothing_is_posted_there() {
    let server = hostile(Mode::Foreign).await;
    let error = McpServer::start(server.config(Duration::from_secs(5)))
        .await
        .expect_err("a foreign endpoint");
    assert_eq!(error.kind(), McpErrorKind::Start, "{error}");
    let message = error.message();
    assert!(message.contains("mcp server `hostile`"), "{message}");
    assert!(message.contains("http://evil.example/message"), "{message}");
    assert!(message.contains("another origin"), "{message}");
    assert!(!message.contains("session=1"), "no query shown: {message}");
    assert!(
        server.heads().iter().all(|h| h.starts_with("get /sse")),
        "nothing was posted: {:?}",
        server.heads()
    );
}

#[tokio::test]
async fn no_endpoint_event_within_the_timeout_fails_the_connect_clearly() {
    let server = hostile(Mode::Silent).await;
    let started = Instant::now();
    let error = McpServer::start(server.config(Duration::from_millis(800)))
        .await
        .expect_err("no endpoint");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "bounded in time"
    );
    assert_eq!(error.kind(), McpErrorKind::Start, "{error}");
    assert!(
        error
            .message()
            .contains("its SSE stream gave no `endpoint` event within 800 ms"),
        "{error}"
    );
}

#[tokio::test]
async fn an_endless_sse_line_fails_the_connect_naming_the_limit() {
    let server = hostile(Mode::EndlessLine).await;
    let started = Instant::now();
    let error = McpServer::start(server.config(Duration::from_secs(30)))
        .await
        .expect_err("over the limit");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "fails at the limit, not the timeout"
    );
    let message = error.message();
    assert!(message.contains("mcp server `hostile`"), "{message}");
    assert!(
        message.contains("sent an SSE line over 16 MiB (the limit for one message)"),
        "{message}"
    );
    assert!(message.len() < 500, "{} bytes", message.len());
}

#[tokio::test]
async fn events_split_byte_by_byte_work_and_headers_and_token_go_on_the_get_and_every_post() {
    let server = hostile(Mode::Working).await;
    let mcp = McpServer::start(server.config(Duration::from_secs(10)))
        .await
        .expect("connects");
    let names: Vec<String> = mcp
        .listed_tools()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(
        names,
        ["ping", "refuse", "huge", "close", "moved", "garbage"]
    );
    let pong = mcp.call("ping", json!({})).await.expect("answers");
    assert_eq!(pong["content"][0]["text"], "pong");
    let token = std::env::var(TOKEN_ENV)
        .expect("cargo sets it")
        .to_lowercase();
    let heads = server.heads();
    // The GET, then initialize, notifications/initialized, tools/list and the call.
    assert!(heads.len() >= 5, "{heads:?}");
    for head in &heads {
        assert!(head.contains("x-team: blue"), "{head}");
        assert!(
            head.contains(&format!("authorization: bearer {token}")),
            "{head}"
        );
    }
}

#[tokio::test]
async fn a_post_answered_500_fails_its_call_with_the_status_and_without_the_token() {
    let server = hostile(Mode::Working).await;
    let mcp = McpServer::start(server.config(Duration::from_secs(10)))
        .await
        .expect("connects");
    let error = mcp.call("refuse", json!({})).await.expect_err("refused");
    let message = error.message();
    assert!(
        message.contains("answered the POST of a message with HTTP 500 Internal Server Error"),
        "{message}"
    );
    assert!(message.contains("(body: no thanks, …)"), "{message}");
    let token = std::env::var(TOKEN_ENV).expect("cargo sets it");
    assert!(!message.contains(&token), "{message}");
    // It is connected again on the next call.
    let pong = mcp.call("ping", json!({})).await.expect("answers");
    assert_eq!(pong["content"][0]["text"], "pong");
}

#[tokio::test]
async fn an_event_over_the_limit_fails_its_call_naming_the_limit() {
    let server = hostile(Mode::Working).await;
    let mcp = McpServer::start(server.config(Duration::from_secs(20)))
        .await
        .expect("connects");
    let started = Instant::now();
    let error = mcp.call("huge", json!({})).await.expect_err("too large");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "at the limit, not the timeout"
    );
    assert_eq!(error.kind(), McpErrorKind::BadReply, "{error}");
    assert!(
        error.message().contains(
            "mcp server `hostile` sent an SSE event over 16 MiB (the limit for one message)"
        ),
        "{error}"
    );
}

#[tokio::test]
async fn the_stream_closing_mid_call_fails_the_call_at_once_and_the_next_call_reconnects() {
    let server = hostile(Mode::Working).await;
    let mcp = McpServer::start(server.config(Duration::from_secs(20)))
        .await
        .expect("connects");
    let started = Instant::now();
    let error = mcp.call("close", json!({})).await.expect_err("no answer");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "fails when the stream ends, not at the timeout"
    );
    assert_eq!(error.kind(), McpErrorKind::Closed, "{error}");
    assert!(
        error
            .message()
            .contains("mcp server `hostile` stopped answering (its connection failed or closed) during `close`"),
        "{error}"
    );
    let pong = mcp.call("ping", json!({})).await.expect("reconnected");
    assert_eq!(pong["content"][0]["text"], "pong");
    assert_eq!(mcp.starts(), 2);
}

#[tokio::test]
async fn a_second_other_endpoint_or_a_message_that_is_not_json_rpc_fails_the_call_saying_so() {
    let server = hostile(Mode::Working).await;
    let mcp = McpServer::start(server.config(Duration::from_secs(20)))
        .await
        .expect("connects");
    let moved = mcp.call("moved", json!({})).await.expect_err("refused");
    assert_eq!(moved.kind(), McpErrorKind::BadReply, "{moved}");
    let port = server.port;
    assert!(
        moved.message().contains(&format!(
            "mcp server `hostile` sent a second `endpoint` event, naming \
             http://127.0.0.1:{port}/elsewhere instead of http://127.0.0.1:{port}/message"
        )),
        "{moved}"
    );
    let garbage = mcp.call("garbage", json!({})).await.expect_err("refused");
    assert_eq!(garbage.kind(), McpErrorKind::BadReply, "{garbage}");
    assert!(
        garbage
            .message()
            .contains("mcp server `hostile` sent a `message` event that is not a JSON-RPC message (expected value"),
        "{garbage}"
    );
    // Each time the connection was closed and made again.
    assert_eq!(mcp.starts(), 2);
}

#[tokio::test]
async fn a_url_that_is_neither_streamable_http_nor_sse_fails_naming_both_attempts() {
    let server = hostile(Mode::Working).await;
    let url = format!("http://127.0.0.1:{}/nothing-here", server.port);
    let config = McpServerConfig::http("hostile", url).timeout(Duration::from_secs(5));
    let error = McpServer::start(config).await.expect_err("404 to both");
    assert_eq!(error.kind(), McpErrorKind::Start, "{error}");
    let message = error.message();
    assert!(
        message.contains("it answered the GET of its SSE stream with HTTP 404 Not Found"),
        "{message}"
    );
    assert!(
        message.contains("(tried over HTTP+SSE after the `initialize` POST was answered HTTP 404)"),
        "{message}"
    );
}

#[tokio::test]
async fn a_server_found_by_the_fallback_is_reconnected_over_sse_without_probing_again() {
    let server = hostile(Mode::Working).await;
    // Only the URL: the POST to /sse is answered 404, so the client opens the stream there.
    let config = McpServerConfig::http("hostile", format!("http://127.0.0.1:{}/sse", server.port))
        .timeout(Duration::from_secs(10));
    let mcp = McpServer::start(config).await.expect("falls back to SSE");
    let _ = mcp.call("close", json!({})).await.expect_err("no answer");
    let pong = mcp.call("ping", json!({})).await.expect("reconnected");
    assert_eq!(pong["content"][0]["text"], "pong");
    let heads = server.heads();
    let count = |start: &str| heads.iter().filter(|h| h.starts_with(start)).count();
    assert_eq!(count("post /sse "), 1, "probed once: {heads:?}");
    assert_eq!(count("get /sse "), 2, "two streams: {heads:?}");
}
