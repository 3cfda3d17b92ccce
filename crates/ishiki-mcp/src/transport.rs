//! The stdio transport to one server's child process, with every byte read from it bounded.
//!
//! rmcp's own child-process transport drops a message over its 16 MiB line cap and any reply
//! it cannot decode (nested deeper than serde_json's 128 levels, say) without a word, so the
//! request waits for its timeout and the error says the server "did not answer". Here one
//! message is read into at most [`MAX_MESSAGE_BYTES`] (never more is buffered); a longer one
//! closes the connection and leaves its reason in [`Broken`], and a reply that cannot be
//! decoded fails the one request it answers with an error that says so (see
//! [`undecodable_reason`]).

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{ErrorCode, ErrorData, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The largest message read from a server: rmcp's own cap, so a reply that was acceptable
/// before is acceptable now.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How long a closing child may take to exit after its stdin closed before it is killed.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// The `data` of an error this transport made up for a reply it could not decode, so the
/// server module can tell it from an error the server sent.
const UNDECODABLE_MARK: &str = "ishiki:undecodable";

/// Why a connection closed itself (a message over the cap), for the errors of the requests
/// it failed.
pub(crate) type Broken = Arc<Mutex<Option<String>>>;

/// The reason behind an error made up by [`StdioTransport`] for a reply it could not decode,
/// or `None` when the server sent the error itself.
pub(crate) fn undecodable_reason(error: &ErrorData) -> Option<&str> {
    let marked = error
        .data
        .as_ref()
        .and_then(|d| d.get("mark"))
        .and_then(Value::as_str)
        == Some(UNDECODABLE_MARK);
    marked.then_some(error.message.as_ref())
}

/// A child process speaking MCP over stdin and stdout.
pub(crate) struct StdioTransport {
    child: Child,
    reader: LineReader<BufReader<ChildStdout>>,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    broken: Broken,
}

impl StdioTransport {
    /// The transport over `child`'s pipes (it must have piped stdin and stdout, and should be
    /// `kill_on_drop`); `broken` receives the reason when the transport closes itself.
    pub(crate) fn new(mut child: Child, broken: Broken) -> std::io::Result<StdioTransport> {
        let missing = |what| std::io::Error::other(format!("the child's {what} is not piped"));
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        Ok(StdioTransport {
            child,
            reader: LineReader::new(BufReader::new(stdout), MAX_MESSAGE_BYTES),
            stdin: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
            broken,
        })
    }
}

impl Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let stdin = self.stdin.clone();
        async move {
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut stdin = stdin.lock().await;
            let Some(stdin) = stdin.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the transport is closed",
                ));
            };
            write_line(stdin, &line).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.reader.next_line().await {
                Line::Complete => {}
                Line::End => return None,
                Line::TooLong => {
                    *self.broken.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
                        "sent a message over {} MiB (the limit for one message)",
                        MAX_MESSAGE_BYTES / (1024 * 1024)
                    ));
                    return None;
                }
            }
            let decoded = decode(self.reader.line());
            self.reader.clear();
            if let Some(message) = decoded {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Closing stdin asks a stdio server to exit (the MCP shutdown sequence); one that
        // does not within the grace period is killed.
        drop(self.stdin.lock().await.take());
        if tokio::time::timeout(CLOSE_GRACE, self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
        }
        Ok(())
    }
}

async fn write_line(writer: &mut (impl AsyncWrite + Unpin), line: &[u8]) -> std::io::Result<()> {
    writer.write_all(line).await?;
    writer.flush().await
}

/// One line as a message: the message, an error for the request an undecodable reply
/// answers, or `None` for a line to skip (blank, or not JSON-RPC at all, like rmcp does).
pub(crate) fn decode(line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(line) {
        Ok(message) => return Some(message),
        Err(e) => e,
    };
    /// The fields that say what a message is; the rest is skipped without being decoded
    /// (serde_json skips iteratively, so no depth limit applies).
    #[derive(Deserialize)]
    struct Envelope {
        id: Option<RequestId>,
        method: Option<IgnoredAny>,
    }
    let envelope = serde_json::from_slice::<Envelope>(line).ok()?;
    // Only a reply fails a request; a request or notification the client cannot read is
    // skipped, as rmcp does.
    let (Some(id), None) = (envelope.id, envelope.method) else {
        return None;
    };
    let reason = if error.to_string().contains("recursion limit") {
        "it is nested deeper than 128 levels".to_owned()
    } else {
        error.to_string()
    };
    Some(RxJsonRpcMessage::<RoleClient>::error(
        ErrorData {
            code: ErrorCode::PARSE_ERROR,
            message: Cow::Owned(reason),
            data: Some(json!({ "mark": UNDECODABLE_MARK })),
        },
        Some(id),
    ))
}

/// What [`LineReader::next_line`] found.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A whole line (with its `\n`, unless the stream ended without one) is in the buffer.
    Complete,
    /// The line went past the cap; what was read of it is gone.
    TooLong,
    /// The stream ended (or failed) with no line left.
    End,
}

/// Reads `\n`-terminated lines holding at most `max` bytes of one line. Cancel-safe: rmcp
/// polls `receive` inside a `select!`, so a read cut off midway leaves its bytes in the
/// buffer for the next call.
struct LineReader<R> {
    reader: R,
    line: Vec<u8>,
    max: usize,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    fn new(reader: R, max: usize) -> Self {
        LineReader {
            reader,
            line: Vec::new(),
            max,
        }
    }

    fn line(&self) -> &[u8] {
        &self.line
    }

    fn clear(&mut self) {
        self.line.clear();
    }

    async fn next_line(&mut self) -> Line {
        loop {
            let (used, done) = {
                let available = match self.reader.fill_buf().await {
                    Ok(available) => available,
                    Err(_) => return self.end(),
                };
                if available.is_empty() {
                    return self.end();
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let used = newline.map_or(available.len(), |i| i + 1);
                if self.line.len().saturating_add(used) > self.max {
                    self.line = Vec::new();
                    return Line::TooLong;
                }
                // Copy and consume with no await between them (cancel safety).
                self.line.extend_from_slice(&available[..used]);
                (used, newline.is_some())
            };
            self.reader.consume(used);
            if done {
                return Line::Complete;
            }
        }
    }

    /// At the end of the stream a last line without `\n` still counts.
    fn end(&mut self) -> Line {
        if self.line.is_empty() {
            Line::End
        } else {
            Line::Complete
        }
    }
}

#[cfg(test)]
mod tests {
    //! The line reader and the decoding of hostile replies, on in-memory streams.

    use super::*;

    fn reader(bytes: &'static [u8], max: usize) -> LineReader<&'static [u8]> {
        LineReader::new(bytes, max)
    }

    #[tokio::test]
    async fn a_line_longer_than_the_cap_is_refused_without_being_buffered() {
        let mut lines = reader(b"short\nthis line is too long\nok\n", 10);
        assert_eq!(lines.next_line().await, Line::Complete);
        assert_eq!(lines.line(), b"short\n");
        lines.clear();
        assert_eq!(lines.next_line().await, Line::TooLong);
        assert!(lines.line().len() <= 10);
    }

    #[tokio::test]
    async fn a_last_line_without_newline_still_counts() {
        let mut lines = reader(b"tail", 10);
        assert_eq!(lines.next_line().await, Line::Complete);
        assert_eq!(lines.line(), b"tail");
        lines.clear();
        assert_eq!(lines.next_line().await, Line::End);
    }

    /// `depth` nested arrays around a value.
    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn a_reply_nested_too_deep_fails_its_request_with_the_reason() {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[],"structuredContent":{}}}}}"#,
            nested(300)
        );
        let Some(RxJsonRpcMessage::<RoleClient>::Error(error)) = decode(line.as_bytes()) else {
            panic!("an error for request 7");
        };
        assert_eq!(error.id, Some(RequestId::Number(7)));
        assert_eq!(
            undecodable_reason(&error.error),
            Some("it is nested deeper than 128 levels")
        );
    }

    #[test]
    fn lines_that_are_no_reply_are_skipped() {
        assert!(decode(b"not json\n").is_none());
        assert!(decode(b"\r\n").is_none());
        let deep_notification = format!(
            r#"{{"jsonrpc":"2.0","method":"x","params":{}}}"#,
            nested(300)
        );
        assert!(decode(deep_notification.as_bytes()).is_none());
    }

    #[test]
    fn an_error_the_server_sent_is_not_taken_for_an_undecodable_reply() {
        let line = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32700,"message":"bad"}}"#;
        let Some(RxJsonRpcMessage::<RoleClient>::Error(error)) = decode(line) else {
            panic!("the server's error");
        };
        assert_eq!(undecodable_reason(&error.error), None);
    }
}
