//! A [`Model`] over HTTP: render the request, post it, retry what is worth retrying, parse.
//!
//! Requests ask for a stream (`stream: true`) unless [`HttpConfig::stream`] is off; an answer
//! with `content-type: text/event-stream` is read event by event (see [`crate::sse`]), any
//! other answer as one JSON body. Each reasoning block of an answer is stamped with the digest
//! of the request prefix it was made after ([`crate::replay`]), so every later render replays
//! it only while that prefix is unchanged; the stamp travels in the history, not in this model.
//!
//! Security: a request never follows a redirect to another origin (scheme, host and port), so
//! neither the conversation nor the API key leaves the configured endpoint. Timeouts are per
//! phase: connecting, and the longest wait for the next bytes; a stream that keeps sending may
//! last as long as the model writes.

use std::time::Duration;

use ishiki_model::{Compacted, Model, ModelError, ModelResponse, Request};
use serde_json::{Value, json};

use crate::anthropic::{
    ANTHROPIC, AnthropicOptions, THINKING_BINDING_BETA, Thinking, anthropic_betas,
    anthropic_response_prefix, parse_anthropic_response, render_anthropic_with_report,
};
use crate::common::ReplayReport;
use crate::error::{ProviderError, ProviderErrorKind};
use crate::openai::{OpenAiOptions, parse_openai_response, render_openai};
use crate::parsed::ParsedResponse;
use crate::replay::stamp;
use crate::responses::{
    OPENAI_RESPONSES, ResponsesOptions, parse_responses_response, render_responses_with_report,
    responses_response_prefix,
};
use crate::sse::{StreamAssembler, StreamEvent};

/// Which wire protocol an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OpenAI Chat Completions: `POST {base_url}/chat/completions`, `Authorization: Bearer`.
    OpenAi,
    /// Anthropic Messages: `POST {base_url}/v1/messages`, `x-api-key`.
    Anthropic,
    /// OpenAI Responses: `POST {base_url}/responses`, `Authorization: Bearer`.
    OpenAiResponses,
}

impl Protocol {
    /// The `provider` value of `models.yaml` that selects it.
    pub fn name(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => ANTHROPIC,
            Self::OpenAiResponses => OPENAI_RESPONSES,
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = ProviderError;

    /// `openai`, `anthropic` or `openai-responses` (a `provider` value of `models.yaml`).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "openai" => Ok(Self::OpenAi),
            "anthropic" => Ok(Self::Anthropic),
            "openai-responses" => Ok(Self::OpenAiResponses),
            other => Err(ProviderError::new(
                ProviderErrorKind::Config,
                format!(
                    "unknown provider `{other}` (expected openai, anthropic or openai-responses)"
                ),
            )),
        }
    }
}

/// Where and how to reach a model.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpConfig {
    /// The protocol.
    pub protocol: Protocol,
    /// Base URL, e.g. `https://api.openai.com/v1` or `https://api.anthropic.com`.
    pub base_url: String,
    /// The model name sent in each request.
    pub model: String,
    /// The environment variable holding the API key; `None` sends no key (local servers).
    pub api_key_env: Option<String>,
    /// `max_tokens` (required by Anthropic, optional for OpenAI).
    pub max_tokens: u32,
    /// The longest wait for the next bytes of an answer (headers, body or stream), per
    /// attempt; a stream that keeps sending is never cut by it.
    pub timeout: Duration,
    /// The longest wait for a connection.
    pub connect_timeout: Duration,
    /// Retries after the first attempt on 429, 5xx and transport failures.
    pub max_retries: u32,
    /// The first backoff; it doubles with each retry (a `retry-after` header wins, capped at
    /// a minute).
    pub backoff: Duration,
    /// The largest response body read; a longer one fails the step (issue 13).
    pub max_body_bytes: u64,
    /// Ask for a server-sent-events stream.
    pub stream: bool,
    /// `prompt_cache_key` for the Responses API: one stable key per session.
    pub prompt_cache_key: Option<String>,
    /// Anthropic: the `thinking` parameter (budget tokens on older models, adaptive with an
    /// effort on newer ones).
    pub thinking: Option<Thinking>,
    /// Anthropic: the model binds thinking to its prefix
    /// ([`AnthropicOptions::preserved_thinking`]).
    pub preserved_thinking: bool,
    /// Anthropic: ask the API to drop, not refuse, thinking whose prefix changed (models with
    /// preserved thinking; see [`AnthropicOptions::drop_invalid_thinking`]).
    pub drop_invalid_thinking: bool,
    /// Anthropic: later system messages as native mid-conversation system messages.
    pub system_messages: bool,
    /// Responses: the `reasoning` parameter verbatim (`{"effort": "high", "summary": "auto"}`).
    pub reasoning: Option<Value>,
    /// Responses: explicit prompt-cache breakpoints (GPT-5.6 and later).
    pub cache_breakpoints: bool,
    /// Anthropic: the model compacts natively ([`HttpModel::compact_request`]: a request with
    /// `compaction: {type: "summarize"}`, beta [`COMPACTION_BETA`](crate::anthropic::COMPACTION_BETA)); otherwise
    /// [`Model::compact`] answers `None` and the runtime asks for a text summary.
    pub native_compaction: bool,
}

impl HttpConfig {
    /// A configuration with defaults: no key, 4096 output tokens, 120 s without bytes or 30 s
    /// without a connection end an attempt, 3 retries from a 1 s backoff, streaming on,
    /// response bodies up to 64 MiB, no thinking parameter.
    pub fn new(protocol: Protocol, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            protocol,
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            max_tokens: 4096,
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(30),
            max_retries: 3,
            backoff: Duration::from_secs(1),
            max_body_bytes: 64 << 20,
            stream: true,
            prompt_cache_key: None,
            thinking: None,
            preserved_thinking: true,
            drop_invalid_thinking: false,
            system_messages: false,
            reasoning: None,
            cache_breakpoints: false,
            native_compaction: false,
        }
    }
}

/// A live model behind an HTTP endpoint.
#[derive(Debug)]
pub struct HttpModel {
    config: HttpConfig,
    api_key: Option<String>,
    client: reqwest::Client,
}

impl HttpModel {
    /// Builds the client and reads the API key from its environment variable.
    pub fn new(config: HttpConfig) -> Result<Self, ProviderError> {
        let api_key = match &config.api_key_env {
            Some(name) => Some(std::env::var(name).map_err(|_| {
                ProviderError::new(
                    ProviderErrorKind::Config,
                    format!("the api key variable `{name}` is not set"),
                )
            })?),
            None => None,
        };
        // reqwest takes the process's default crypto provider: ring, unless the embedder set one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .read_timeout(config.timeout)
            .redirect(same_origin_redirects())
            .build()
            .map_err(|e| {
                ProviderError::new(
                    ProviderErrorKind::Config,
                    format!("cannot build the http client: {e}"),
                )
            })?;
        Ok(Self {
            config,
            api_key,
            client,
        })
    }

    /// The configuration this model was built with.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// The request body this model sends for `request`, without the streaming fields, and what
    /// it does with the request's reasoning.
    pub fn render_with_report(&self, request: &Request) -> (Value, ReplayReport) {
        let model = &self.config.model;
        match self.config.protocol {
            Protocol::OpenAi => (
                render_openai(
                    request,
                    &OpenAiOptions {
                        max_tokens: Some(self.config.max_tokens),
                        ..OpenAiOptions::new(model)
                    },
                ),
                // Chat Completions takes no reasoning back.
                ReplayReport {
                    dropped_foreign: request
                        .messages
                        .iter()
                        .flat_map(|m| &m.content)
                        .filter(|p| matches!(p, ishiki_model::Part::Reasoning(_)))
                        .count(),
                    ..ReplayReport::default()
                },
            ),
            Protocol::Anthropic => render_anthropic_with_report(
                request,
                &AnthropicOptions {
                    thinking: self.config.thinking.clone(),
                    preserved_thinking: self.config.preserved_thinking,
                    drop_invalid_thinking: self.config.drop_invalid_thinking,
                    system_messages: self.config.system_messages,
                    ..AnthropicOptions::new(model, self.config.max_tokens)
                },
            ),
            Protocol::OpenAiResponses => render_responses_with_report(
                request,
                &ResponsesOptions {
                    max_output_tokens: Some(self.config.max_tokens),
                    prompt_cache_key: self.config.prompt_cache_key.clone(),
                    reasoning: self.config.reasoning.clone(),
                    cache_breakpoints: self.config.cache_breakpoints,
                    ..ResponsesOptions::new(model)
                },
            ),
        }
    }

    /// The request body this model sends for `request`, without the streaming fields.
    pub fn render(&self, request: &Request) -> Value {
        self.render_with_report(request).0
    }

    fn endpoint(&self) -> String {
        let base = self.config.base_url.trim_end_matches('/');
        match self.config.protocol {
            Protocol::OpenAi => format!("{base}/chat/completions"),
            Protocol::Anthropic => format!("{base}/v1/messages"),
            Protocol::OpenAiResponses => format!("{base}/responses"),
        }
    }

    /// Sends one request, retrying on 429, 5xx and transport failures, and parses the answer.
    pub async fn send(&self, request: &Request) -> Result<ParsedResponse, ProviderError> {
        self.send_with(request, |_| {}).await
    }

    /// [`send`](Self::send), handing text and tool-call starts to `on_event` as a stream
    /// delivers them. When a stream breaks and the request starts again, `on_event` gets
    /// [`StreamEvent::Retry`]: what it got before is void.
    pub async fn send_with<F: FnMut(StreamEvent)>(
        &self,
        request: &Request,
        mut on_event: F,
    ) -> Result<ParsedResponse, ProviderError> {
        let (body, replay) = self.render_with_report(request);
        let url = self.endpoint();
        let mut parsed = self
            .send_body(&url, body, self.config.stream, &mut on_event)
            .await?;
        parsed.replay = replay;
        Ok(parsed)
    }

    /// The provider's own compaction of `request`'s conversation, when this model has it
    /// ([`HttpConfig::native_compaction`], Anthropic): the request as [`render`](Self::render)
    /// makes it, with `compaction: {type: "summarize"}` and without the fields the API refuses
    /// there (`context_management`, `stop_sequences`, an output format); the answer's
    /// `compaction` block, verbatim. `Ok(None)` when this model has no native compaction.
    pub async fn compact_request(
        &self,
        request: &Request,
    ) -> Result<Option<Compacted>, ProviderError> {
        if !self.config.native_compaction {
            return Ok(None);
        }
        let block = match self.config.protocol {
            Protocol::OpenAi => return Ok(None),
            Protocol::Anthropic => self.compact_anthropic(request).await?,
            Protocol::OpenAiResponses => self.compact_responses(request).await?,
        };
        Ok(Some(block))
    }

    /// `/responses/compact`: the window compacted to its user messages and one encrypted
    /// `compaction` item, sent back first, verbatim. It takes the conversation and the
    /// instructions only (no tools, no sampling fields).
    async fn compact_responses(&self, request: &Request) -> Result<Compacted, ProviderError> {
        let rendered = self.render(request);
        let mut body = serde_json::Map::new();
        for key in ["model", "input", "instructions", "prompt_cache_key"] {
            if let Some(value) = rendered.get(key).filter(|v| !v.is_null()) {
                body.insert(key.to_owned(), value.clone());
            }
        }
        let url = format!(
            "{}/responses/compact",
            self.config.base_url.trim_end_matches('/')
        );
        let parsed = self
            .send_body(&url, Value::Object(body), false, &mut |_| {})
            .await?;
        compaction_of(parsed)
    }

    async fn compact_anthropic(&self, request: &Request) -> Result<Compacted, ProviderError> {
        let mut body = self.render(request);
        if let Value::Object(fields) = &mut body {
            // What only shapes a reply is refused there, as the official SDK's tool runner
            // knows (`withoutCompactionIncompatibleParams`).
            fields.remove("context_management");
            fields.remove("stop_sequences");
            fields.remove("output_format");
            if fields
                .get("tool_choice")
                .and_then(|c| c.get("type"))
                .is_some_and(|t| t == "any" || t == "tool")
            {
                fields.remove("tool_choice");
            }
            if let Some(Value::Object(output)) = fields.get_mut("output_config") {
                output.remove("format");
            }
            fields.insert("compaction".into(), json!({ "type": "summarize" }));
        }
        let url = self.endpoint();
        let parsed = self
            .send_body(&url, body, self.config.stream, &mut |_| {})
            .await?;
        let block = compaction_of(parsed)?;
        if block.summary.is_none() {
            // `content: null`: the provider could not summarize (a no-op if sent back).
            return Err(ProviderError::malformed(
                "the provider's compaction wrote no summary (its block's `content` is null)",
            ));
        }
        Ok(block)
    }

    async fn send_body<F: FnMut(StreamEvent)>(
        &self,
        url: &str,
        mut body: Value,
        stream: bool,
        mut on_event: F,
    ) -> Result<ParsedResponse, ProviderError> {
        // The stamp of the reasoning the answer will carry (crate::replay).
        let prefix = match self.config.protocol {
            Protocol::OpenAi => None,
            Protocol::Anthropic => Some(anthropic_response_prefix(&body)),
            Protocol::OpenAiResponses => Some(responses_response_prefix(&body)),
        };
        if stream && let Value::Object(fields) = &mut body {
            fields.insert("stream".into(), json!(true));
            if self.config.protocol == Protocol::OpenAi {
                fields.insert("stream_options".into(), json!({ "include_usage": true }));
            }
        }
        let mut attempt = 0;
        loop {
            let failure = match self.attempt(url, &body, &mut on_event).await {
                Ok(mut parsed) => {
                    // Reasoning is tagged with the model as configured: the name the next
                    // render compares (the API may answer with a dated alias).
                    for r in parsed.response.reasoning_mut() {
                        r.model.clone_from(&self.config.model);
                    }
                    for part in &mut parsed.response.parts {
                        if let ishiki_model::Part::Compaction(c) = part {
                            c.model.clone_from(&self.config.model);
                        }
                    }
                    if let Some(prefix) = &prefix {
                        stamp(&mut parsed.response, prefix);
                    }
                    return Ok(parsed);
                }
                Err(failure) => failure,
            };
            if !failure.retry || attempt >= self.config.max_retries {
                let mut error = failure.error;
                // An interrupted answer was not resent here, but the caller may send it again.
                error.retryable = failure.retry || error.kind() == ProviderErrorKind::Interrupted;
                if attempt > 0 {
                    error.message = format!("{} (after {} attempts)", error.message, attempt + 1);
                }
                return Err(error);
            }
            let wait = failure
                .retry_after
                .unwrap_or_else(|| self.config.backoff.saturating_mul(1 << attempt.min(16)));
            if failure.streamed {
                on_event(StreamEvent::Retry {
                    reason: failure.error.message.clone(),
                });
            }
            tokio::time::sleep(wait.min(Duration::from_secs(60))).await;
            attempt += 1;
        }
    }

    async fn attempt<F: FnMut(StreamEvent)>(
        &self,
        url: &str,
        body: &Value,
        on_event: &mut F,
    ) -> Result<ParsedResponse, Failure> {
        let mut post = self.client.post(url).json(body);
        post = match (self.config.protocol, &self.api_key) {
            (Protocol::Anthropic, Some(key)) => post.header("x-api-key", key),
            (_, Some(key)) => post.bearer_auth(key),
            (_, None) => post,
        };
        if self.config.protocol == Protocol::Anthropic {
            post = post.header("anthropic-version", "2023-06-01");
            let mut betas = anthropic_betas(body);
            if self.config.drop_invalid_thinking {
                betas.push(THINKING_BINDING_BETA);
            }
            if !betas.is_empty() {
                post = post.header("anthropic-beta", betas.join(","));
            }
        }
        let mut response = post.send().await.map_err(|e| Failure {
            error: ProviderError::new(
                ProviderErrorKind::Transport,
                format!("cannot reach {url}: {}", describe(&e)),
            ),
            retry: true,
            retry_after: None,
            streamed: false,
        })?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let event_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
        if status.is_success() && event_stream {
            return self.read_stream(url, &mut response, on_event).await;
        }
        let text = read_body(response, url, self.config.max_body_bytes).await?;
        let json: Option<Value> = crate::common::parse_json(&text).ok();
        if !status.is_success() {
            let detail = json
                .as_ref()
                .and_then(|j| j.pointer("/error/message").or_else(|| j.get("message")))
                .and_then(Value::as_str)
                .map_or_else(|| snippet(&text), str::to_owned);
            let kind = if ishiki_model::ModelError::says_too_long(Some(status.as_u16()), &text) {
                ProviderErrorKind::ContextTooLong
            } else {
                ProviderErrorKind::Status
            };
            return Err(Failure {
                error: ProviderError::new(kind, format!("{url} answered {status}: {detail}")),
                retry: status.as_u16() == 429 || status.is_server_error(),
                retry_after,
                streamed: false,
            });
        }
        let json = json.ok_or_else(|| Failure {
            error: ProviderError::malformed(format!(
                "{url} answered with a body that is not json: {}",
                snippet(&text)
            )),
            retry: false,
            retry_after: None,
            streamed: false,
        })?;
        self.parse(&json).map_err(|error| Failure {
            error,
            retry: false,
            retry_after: None,
            streamed: false,
        })
    }

    fn parse(&self, body: &Value) -> Result<ParsedResponse, ProviderError> {
        match self.config.protocol {
            Protocol::OpenAi => parse_openai_response(body),
            Protocol::Anthropic => parse_anthropic_response(body),
            Protocol::OpenAiResponses => parse_responses_response(body),
        }
    }

    /// Reads an event stream to its end; a stream that breaks or ends early is retried.
    async fn read_stream<F: FnMut(StreamEvent)>(
        &self,
        url: &str,
        response: &mut reqwest::Response,
        on_event: &mut F,
    ) -> Result<ParsedResponse, Failure> {
        // A stream is retried only while it showed nothing: a transport failure or an
        // overloaded provider before the first text or call.
        let mut shown = false;
        let mut watch = |event: StreamEvent| {
            shown |= matches!(event, StreamEvent::Text(_) | StreamEvent::ToolCall { .. });
            on_event(event);
        };
        let mut assembler = StreamAssembler::new(self.config.protocol);
        let read: Result<(), ProviderError> = async {
            while !assembler.is_complete() {
                let chunk = response.chunk().await.map_err(|e| {
                    ProviderError::new(
                        ProviderErrorKind::Transport,
                        format!("the stream of {url} broke: {}", describe(&e)),
                    )
                })?;
                let Some(chunk) = chunk else { break };
                assembler.push(&chunk, &mut watch)?;
            }
            Ok(())
        }
        .await;
        let outcome = read.and_then(|()| {
            assembler.finish().map_err(|mut e| {
                e.message = format!("{} ({url})", e.message);
                e
            })
        });
        let fail = |mut error: ProviderError| {
            let transient = error.kind() == ProviderErrorKind::Transport;
            if transient && shown {
                // Resending would show the user a second answer after the first one's start:
                // the caller sees the interruption and decides.
                error = ProviderError::new(
                    ProviderErrorKind::Interrupted,
                    format!("the answer was interrupted: {}", error.message),
                );
            }
            Failure {
                retry: transient && !shown,
                error,
                retry_after: None,
                streamed: true,
            }
        };
        let body = outcome.map_err(fail)?;
        self.parse(&body).map_err(fail)
    }
}

/// Follows a redirect only to the origin (scheme, host, port) of the request it answers, at
/// most five times: a provider API has no business sending the conversation, or the key,
/// anywhere else.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same = attempt.previous().first().is_some_and(|first| {
            first.scheme() == attempt.url().scheme()
                && first.host_str() == attempt.url().host_str()
                && first.port_or_known_default() == attempt.url().port_or_known_default()
        });
        if !same {
            attempt.stop()
        } else if attempt.previous().len() > 5 {
            attempt.error("more than 5 redirects")
        } else {
            attempt.follow()
        }
    })
}

/// The body as text, read chunk by chunk and refused as soon as it passes `max` bytes (the
/// declared length is checked first), so a huge body never sits in memory.
async fn read_body(
    mut response: reqwest::Response,
    url: &str,
    max: u64,
) -> Result<String, Failure> {
    let too_large = || Failure {
        error: ProviderError::new(
            ProviderErrorKind::Transport,
            format!("the response of {url} is larger than {max} bytes (the response size limit)"),
        ),
        retry: false,
        retry_after: None,
        streamed: false,
    };
    if response.content_length().is_some_and(|n| n > max) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    loop {
        let chunk = response.chunk().await.map_err(|e| Failure {
            error: ProviderError::new(
                ProviderErrorKind::Transport,
                format!("cannot read the response of {url}: {}", describe(&e)),
            ),
            retry: true,
            retry_after: None,
            streamed: false,
        })?;
        let Some(chunk) = chunk else { break };
        if (body.len() as u64).saturating_add(chunk.len() as u64) > max {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

struct Failure {
    error: ProviderError,
    retry: bool,
    retry_after: Option<Duration>,
    /// Whether a stream had started delivering (then a retry voids what it showed).
    streamed: bool,
}

/// The first 200 characters of a body, for error messages.
fn snippet(text: &str) -> String {
    let cut: String = text.chars().take(200).collect();
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut
    }
}

/// A reqwest error with its causes (its own text alone often says only "error sending request").
fn describe(error: &reqwest::Error) -> String {
    let mut out = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

/// The largest compaction kept, serialized. It is sent with every later request and stored
/// with the conversation's state, and a signed block cannot be cut: a larger one is refused
/// (the runtime then asks for a text summary). Real ones are a few KiB.
pub const MAX_COMPACTION_BYTES: usize = 1 << 20;

/// The one compaction part of an answer to a compaction request.
fn compaction_of(parsed: ParsedResponse) -> Result<Compacted, ProviderError> {
    let stop = parsed.stop_reason.clone();
    let block = parsed
        .response
        .parts
        .into_iter()
        .find_map(|p| match p {
            ishiki_model::Part::Compaction(c) => Some(c),
            _ => None,
        })
        .ok_or_else(|| {
            ProviderError::malformed(format!(
                "the compaction request was answered without a compaction (stop reason `{stop}`)"
            ))
        })?;
    let size = block.data.to_string().len();
    if size > MAX_COMPACTION_BYTES {
        return Err(ProviderError::malformed(format!(
            "the provider's compaction is {size} bytes, over the {MAX_COMPACTION_BYTES} kept"
        )));
    }
    Ok(block)
}

#[async_trait::async_trait]
impl Model for HttpModel {
    async fn respond(&self, request: &Request) -> Result<ModelResponse, ModelError> {
        self.send(request)
            .await
            .map(|parsed| parsed.response)
            .map_err(ModelError::from)
    }

    async fn compact(&self, request: &Request) -> Result<Option<Compacted>, ModelError> {
        self.compact_request(request)
            .await
            .map_err(ModelError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(data: Value) -> ParsedResponse {
        ParsedResponse {
            response: ModelResponse {
                parts: vec![ishiki_model::Part::Compaction(Compacted {
                    provider: ANTHROPIC.into(),
                    model: "m".into(),
                    data,
                    summary: Some("s".into()),
                })],
                ..ModelResponse::default()
            },
            ..ParsedResponse::default()
        }
    }

    #[test]
    fn a_compaction_too_large_to_carry_is_refused_and_an_answer_without_one_too() {
        let small = json!({ "type": "compaction", "content": "s" });
        assert!(compaction_of(answered(small)).is_ok());
        let huge = json!({ "type": "compaction", "content": "s",
            "encrypted_content": "x".repeat(MAX_COMPACTION_BYTES) });
        let error = compaction_of(answered(huge)).unwrap_err();
        assert!(error.to_string().contains("over the"), "{error}");
        let none = compaction_of(ParsedResponse::default()).unwrap_err();
        assert!(none.to_string().contains("without a compaction"), "{none}");
    }
}
