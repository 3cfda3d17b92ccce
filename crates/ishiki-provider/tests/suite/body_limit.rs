//! The response size limit (issue 13): a body over `max_body_bytes` fails the request with a
//! clear error, whether its length is declared up front or it just keeps streaming.

use std::time::Duration;

use ishiki_core::Request;
use ishiki_provider::{HttpConfig, HttpModel, Protocol, ProviderErrorKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Answers one request with `total` bytes of body in 64 KiB chunks; `declared` sends a
/// `content-length`, otherwise the body runs until the connection closes. Write errors after
/// the client hangs up are expected and ignored.
async fn oversized(total: usize, declared: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut data = Vec::new();
        let mut buf = [0u8; 8192];
        while !data.windows(4).any(|w| w == b"\r\n\r\n") {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => data.extend_from_slice(&buf[..n]),
            }
        }
        let length = if declared {
            format!("content-length: {total}\r\n")
        } else {
            String::new()
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{length}connection: close\r\n\r\n"
        );
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let chunk = vec![b' '; 64 << 10];
        let mut sent = 0;
        while sent < total {
            let n = chunk.len().min(total - sent);
            if socket.write_all(&chunk[..n]).await.is_err() {
                return;
            }
            sent += n;
        }
        let _ = socket.shutdown().await;
    });
    url
}

#[tokio::test]
async fn a_response_body_over_the_size_limit_fails_the_request() {
    for declared in [true, false] {
        let url = oversized(4 << 20, declared).await;
        let model = HttpModel::new(HttpConfig {
            max_retries: 0,
            backoff: Duration::ZERO,
            timeout: Duration::from_secs(30),
            max_body_bytes: 256 << 10,
            ..HttpConfig::new(Protocol::OpenAi, &url, "test-model")
        })
        .expect("client");
        let error = model
            .send(&Request {
                tools: vec![],
                messages: vec![],
            })
            .await
            .expect_err("the body is over the limit");
        assert_eq!(error.kind(), ProviderErrorKind::Transport, "{error}");
        assert_eq!(
            error.message(),
            format!(
                "the response of {url}/chat/completions is larger than 262144 bytes (the response size limit)"
            ),
            "declared length: {declared}"
        );
    }
}
