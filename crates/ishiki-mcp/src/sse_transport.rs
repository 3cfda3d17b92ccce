//! The older HTTP+SSE transport (MCP `2024-11-05`), which rmcp 3.11 no longer ships: a GET
//! opens a `text/event-stream` whose first event, `endpoint`, names the URI to POST each
//! JSON-RPC message to; the server's messages arrive as `message` events on the stream.
//!
//! The stream is read as hostile, like a child's stdout (`transport.rs`): one line and one
//! event at most `MAX_MESSAGE_BYTES` (`sse.rs`; past it the connection closes, saying so),
//! the `endpoint` event within the server's timeout, and the endpoint on the SAME ORIGIN
//! (scheme, host, port) as the configured URL, so a hostile server cannot have the headers
//! and bearer token posted elsewhere; a second `endpoint` naming another URL closes the
//! connection. A POST answered other than 2xx fails its request with the status and at most
//! `MAX_ERROR_BYTES` of the body, secrets redacted; the stream ending fails every pending
//! request. Events of other types are ignored; a `message` that is not JSON-RPC closes the
//! connection with the reason (in [`Broken`], as over stdio).

use std::fmt;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::{DynamicTransportError, Transport};
use tokio::sync::mpsc;

use crate::config::McpServerConfig;
use crate::http;
use crate::sse::{Event, Parser, TooLong};
use crate::transport::{Broken, MAX_MESSAGE_BYTES, decode};

/// How many of the server's messages wait for the client before the stream is read on: one
/// or two, like the stdio transport, so a stalled client holds at most a couple of messages
/// of up to `MAX_MESSAGE_BYTES` each, not dozens.
const QUEUE: usize = 2;
/// The most of an error body an error shows.
const SHOWN_BODY_CHARS: usize = 500;

/// Why a message could not be sent.
#[derive(Debug)]
pub(crate) enum SseError {
    /// The server answered the POST with a status other than 2xx (the words say which).
    Refused(String),
    /// The POST failed, or the transport is closed.
    Failed(String),
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::Refused(why) | SseError::Failed(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for SseError {}

/// Why the server refused the POST of a request, when that is why it failed.
pub(crate) fn refused(error: &DynamicTransportError) -> Option<String> {
    match error.error.downcast_ref::<SseError>() {
        Some(SseError::Refused(why)) => Some(why.clone()),
        _ => None,
    }
}

/// The status that makes a client given only a URL try the older transport: the
/// `initialize` POST answered 400, 404 or 405 without a JSON-RPC error (rmcp returns the
/// JSON-RPC error of a body that holds one, and `unexpected server response: HTTP 404 …` for
/// one that does not). `text` is the handshake's error.
pub(crate) fn legacy_status(text: &str) -> Option<u16> {
    const MARK: &str = "unexpected server response: HTTP ";
    let at = text.find(MARK)? + MARK.len();
    let status = text.get(at..at + 3)?.parse().ok()?;
    matches!(status, 400 | 404 | 405).then_some(status)
}

/// Where and how messages are posted.
struct Poster {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    bearer: Option<String>,
    timeout: Duration,
    /// For redacting its secrets from the server's words.
    config: McpServerConfig,
}

impl Poster {
    fn request(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let request = request.headers(self.headers.clone());
        match &self.bearer {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    async fn post(&self, item: TxJsonRpcMessage<RoleClient>) -> Result<(), SseError> {
        let body = serde_json::to_vec(&item).map_err(|e| SseError::Failed(e.to_string()))?;
        let request = self
            .client
            .post(self.endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .timeout(self.timeout)
            .body(body);
        let response = self.request(request).send().await.map_err(|e| {
            SseError::Failed(format!(
                "the POST of a message failed ({})",
                e.without_url()
            ))
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = error_body(response, &self.config).await;
        Err(SseError::Refused(format!(
            "answered the POST of a message with HTTP {status}{body}"
        )))
    }
}

/// ` (body: …)` with at most `MAX_ERROR_BYTES` of `response`'s body read, `config`'s secrets
/// redacted from all of it (before it is cut, so no secret is left half-shown) and
/// [`SHOWN_BODY_CHARS`] shown, or nothing for an empty body.
async fn error_body(mut response: reqwest::Response, config: &McpServerConfig) -> String {
    let mut body = Vec::new();
    while body.len() < http::MAX_ERROR_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(http::MAX_ERROR_BYTES);
    let text = http::redact(&String::from_utf8_lossy(&body), config);
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    format!(" (body: {})", clip(text, SHOWN_BODY_CHARS))
}

fn clip(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

fn too_long(what: TooLong) -> String {
    let what = match what {
        TooLong::Line => "line",
        TooLong::Event => "event",
    };
    format!(
        "sent an SSE {what} over {} MiB (the limit for one message) on its stream",
        MAX_MESSAGE_BYTES / (1024 * 1024)
    )
}

/// The URI an `endpoint` event names, resolved against the stream's URL; `Err` unless it is
/// on the stream's origin.
fn endpoint(base: &Url, data: &str) -> Result<Url, String> {
    let data = data.trim();
    let url = base.join(data).map_err(|_| {
        format!(
            "its `endpoint` event names no URL ({:?})",
            clip(&http::shown_url(data), 200)
        )
    })?;
    if url.origin() != base.origin() {
        return Err(format!(
            "its `endpoint` event names {}, on another origin than {}: messages are posted \
             only to the configured server's origin (scheme, host and port)",
            clip(&http::shown_url(url.as_str()), 200),
            base.origin().ascii_serialization()
        ));
    }
    Ok(url)
}

/// A connection to an HTTP+SSE server: its stream read by a task of its own, messages posted
/// to its endpoint.
pub(crate) struct SseTransport {
    messages: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    poster: std::sync::Arc<Poster>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Opens the SSE stream at `url` as `config` says (its headers and bearer token on the GET
/// and every POST) and waits, at most the server's timeout, for its `endpoint` event;
/// `broken` receives the reason when the connection closes itself. `Err` says why, without
/// secrets.
pub(crate) async fn connect(
    client: reqwest::Client,
    config: &McpServerConfig,
    url: &str,
    broken: Broken,
) -> Result<SseTransport, String> {
    let base = Url::parse(url).map_err(|e| format!("its URL cannot be read ({e})"))?;
    let headers = http::headers(config)?.into_iter().collect::<HeaderMap>();
    let bearer = http::bearer(config)?;
    let mut poster = Poster {
        client,
        endpoint: base.clone(),
        headers,
        bearer,
        timeout: config.timeout,
        config: config.clone(),
    };
    let limit = config.timeout;
    let (response, parser, pending, endpoint) = tokio::time::timeout(limit, open(&poster, &base))
        .await
        .map_err(|_| {
            format!(
                "its SSE stream gave no `endpoint` event within {} ms",
                limit.as_millis()
            )
        })??;
    poster.endpoint = endpoint;
    let poster = std::sync::Arc::new(poster);
    let (sender, messages) = mpsc::channel(QUEUE);
    let stream = Stream {
        response,
        parser,
        base,
        endpoint: poster.endpoint.clone(),
        sender,
    };
    let reader = tokio::spawn(async move {
        if let Some(reason) = stream.read(pending).await {
            *broken.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
        }
    });
    Ok(SseTransport {
        messages,
        poster,
        reader,
    })
}

/// The GET and what it read up to the `endpoint` event: the response, the parser, the events
/// after the endpoint, and the endpoint.
async fn open(
    poster: &Poster,
    base: &Url,
) -> Result<(reqwest::Response, Parser, Vec<Event>, Url), String> {
    let request = poster
        .client
        .get(base.clone())
        .header(ACCEPT, "text/event-stream");
    let mut response = poster
        .request(request)
        .send()
        .await
        .map_err(|e| format!("its SSE stream cannot be opened ({})", e.without_url()))?;
    let status = response.status();
    if !status.is_success() {
        let body = error_body(response, &poster.config).await;
        return Err(format!(
            "it answered the GET of its SSE stream with HTTP {status}{body}"
        ));
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if !media.eq_ignore_ascii_case("text/event-stream") {
        return Err(format!(
            "it answered the GET of its SSE stream with `Content-Type: {}`, not \
             `text/event-stream`",
            clip(&content_type, 100)
        ));
    }
    let mut parser = Parser::new(MAX_MESSAGE_BYTES);
    let mut events = Vec::new();
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| format!("its SSE stream failed ({})", e.without_url()))?
            .ok_or("its SSE stream ended before its `endpoint` event")?;
        parser
            .feed(&chunk, &mut events)
            .map_err(|what| format!("it {}", too_long(what)))?;
        let mut read = std::mem::take(&mut events).into_iter();
        while let Some(event) = read.next() {
            match event.event.as_str() {
                "endpoint" => {
                    let url = endpoint(base, &event.data)?;
                    return Ok((response, parser, read.collect(), url));
                }
                "message" => {
                    return Err("it sent a `message` event before its `endpoint` event".into());
                }
                _ => {}
            }
        }
    }
}

/// The stream after its `endpoint` event.
struct Stream {
    response: reqwest::Response,
    parser: Parser,
    base: Url,
    endpoint: Url,
    sender: mpsc::Sender<RxJsonRpcMessage<RoleClient>>,
}

impl Stream {
    /// Reads the stream until it ends, the client is gone, or the server breaks the
    /// protocol (the reason is returned). Dropping the sender ends `receive`, which fails
    /// every pending request.
    async fn read(mut self, mut pending: Vec<Event>) -> Option<String> {
        loop {
            for event in pending.drain(..) {
                match self.event(event) {
                    Ok(Some(message)) => {
                        if self.sender.send(message).await.is_err() {
                            return None;
                        }
                    }
                    Ok(None) => {}
                    Err(reason) => return Some(reason),
                }
            }
            match self.response.chunk().await {
                Ok(Some(chunk)) => {
                    if let Err(what) = self.parser.feed(&chunk, &mut pending) {
                        return Some(too_long(what));
                    }
                }
                Ok(None) | Err(_) => return None,
            }
        }
    }

    /// One event: a message for the client, nothing (an event of another type, the same
    /// endpoint again), or the reason to close.
    fn event(&self, event: Event) -> Result<Option<RxJsonRpcMessage<RoleClient>>, String> {
        match event.event.as_str() {
            "message" => {
                if let Some(message) = decode(event.data.as_bytes()) {
                    return Ok(Some(message));
                }
                // A request or notification it cannot read is skipped, as over stdio;
                // anything else is no JSON-RPC message.
                match serde_json::from_str::<serde_json::Value>(&event.data) {
                    Ok(value) if value.get("method").is_some() => Ok(None),
                    Ok(_) => Err("sent a `message` event that is not a JSON-RPC message".into()),
                    Err(e) => Err(format!(
                        "sent a `message` event that is not a JSON-RPC message ({e})"
                    )),
                }
            }
            "endpoint" => match endpoint(&self.base, &event.data) {
                Ok(url) if url == self.endpoint => Ok(None),
                Ok(url) => Err(format!(
                    "sent a second `endpoint` event, naming {} instead of {}",
                    clip(&http::shown_url(url.as_str()), 200),
                    http::shown_url(self.endpoint.as_str())
                )),
                Err(why) => Err(format!("sent a second `endpoint` event: {why}")),
            },
            _ => Ok(None),
        }
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let poster = self.poster.clone();
        let closed = self.reader.is_finished() && self.messages.is_empty();
        async move {
            if closed {
                return Err(SseError::Failed("its SSE stream is closed".to_owned()));
            }
            poster.post(item).await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        self.messages.recv().await
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_must_be_on_the_streams_origin() {
        let base = Url::parse("http://127.0.0.1:3001/sse?key=s3cret").expect("a URL");
        assert_eq!(
            endpoint(&base, "/message?sessionId=1").map(String::from),
            Ok("http://127.0.0.1:3001/message?sessionId=1".to_owned())
        );
        assert_eq!(
            endpoint(&base, " message\n").map(String::from),
            Ok("http://127.0.0.1:3001/message".to_owned())
        );
        for foreign in [
            "http://evil.example/message",
            "//evil.example/message",
            "https://127.0.0.1:3001/message",
            "http://127.0.0.1:3002/message",
            "http://user:pw@127.0.0.2:3001/m",
            "data:text/plain,x",
        ] {
            let error = endpoint(&base, foreign).expect_err(foreign);
            assert!(error.contains("another origin"), "{foreign}: {error}");
            assert!(
                !error.contains("s3cret") && !error.contains("pw@"),
                "{error}"
            );
        }
    }

    #[test]
    fn only_a_plain_400_404_or_405_to_initialize_means_the_older_transport() {
        let text = |status| format!("unexpected server response: HTTP {status}: Cannot POST");
        assert_eq!(legacy_status(&text("404 Not Found")), Some(404));
        assert_eq!(legacy_status(&text("405 Method Not Allowed")), Some(405));
        assert_eq!(legacy_status(&text("400 Bad Request")), Some(400));
        assert_eq!(legacy_status(&text("403 Forbidden")), None);
        assert_eq!(legacy_status(&text("500 Internal Server Error")), None);
        assert_eq!(legacy_status("JSON-RPC error: Method not found"), None);
    }

    #[test]
    fn a_shown_body_is_clipped() {
        assert_eq!(clip("abcdef", 3), "abc…");
        assert_eq!(clip("abc", 3), "abc");
    }
}
