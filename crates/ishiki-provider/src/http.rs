//! A [`Model`] over HTTP: render the request, post it, retry what is worth retrying, parse.
//!
//! Requests ask for a stream (`stream: true`) unless [`HttpConfig::stream`] is off; an answer
//! with `content-type: text/event-stream` is read event by event (see [`crate::sse`]), any
//! other answer as one JSON body. The model remembers the messages of its last successful
//! request ([`ReplayState`]), so the next render knows the first message the projection changed
//! and drops the reasoning before it.

use std::sync::Mutex;
use std::time::Duration;

use ishiki_model::{Model, ModelError, ModelResponse, Request};
use serde_json::{Value, json};

use crate::anthropic::{ANTHROPIC, AnthropicOptions, parse_anthropic_response, render_anthropic};
use crate::common::{ReplayPlan, ReplayState, reasoning_replay};
use crate::error::{ProviderError, ProviderErrorKind};
use crate::openai::{OpenAiOptions, parse_openai_response, render_openai};
use crate::parsed::ParsedResponse;
use crate::responses::{
    OPENAI_RESPONSES, ResponsesOptions, parse_responses_response, render_responses,
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
    /// Timeout of one HTTP attempt.
    pub timeout: Duration,
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
    /// Anthropic extended thinking: `thinking.budget_tokens` (below `max_tokens`).
    pub thinking_budget: Option<u32>,
}

impl HttpConfig {
    /// A configuration with defaults: no key, 4096 output tokens, 120 s timeout, 3 retries
    /// from a 1 s backoff, streaming on, response bodies up to 64 MiB.
    pub fn new(protocol: Protocol, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            protocol,
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            max_tokens: 4096,
            timeout: Duration::from_secs(120),
            max_retries: 3,
            backoff: Duration::from_secs(1),
            max_body_bytes: 64 << 20,
            stream: true,
            prompt_cache_key: None,
            thinking_budget: None,
        }
    }
}

/// A live model behind an HTTP endpoint.
#[derive(Debug)]
pub struct HttpModel {
    config: HttpConfig,
    api_key: Option<String>,
    client: reqwest::Client,
    /// What the last request that got an answer replayed.
    replay: Mutex<ReplayState>,
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
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
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
            replay: Mutex::new(ReplayState::new()),
        })
    }

    /// The request body this model sends for `request` under `plan`, without the streaming
    /// fields.
    pub fn render_with(&self, plan: &ReplayPlan, request: &Request) -> Value {
        let reasoning_from = plan.reasoning_from;
        let model = &self.config.model;
        match self.config.protocol {
            Protocol::OpenAi => render_openai(
                request,
                &OpenAiOptions {
                    max_tokens: Some(self.config.max_tokens),
                    ..OpenAiOptions::new(model)
                },
            ),
            Protocol::Anthropic => render_anthropic(
                request,
                &AnthropicOptions {
                    reasoning_from,
                    thinking_budget: self.config.thinking_budget,
                    ..AnthropicOptions::new(model, self.config.max_tokens)
                },
            ),
            Protocol::OpenAiResponses => render_responses(
                request,
                &ResponsesOptions {
                    max_output_tokens: Some(self.config.max_tokens),
                    prompt_cache_key: self.config.prompt_cache_key.clone(),
                    reasoning_from,
                    ..ResponsesOptions::new(model)
                },
            ),
        }
    }

    /// The request body this model sends for `request` next, without the streaming fields.
    pub fn render(&self, request: &Request) -> Value {
        self.render_with(&self.plan(request), request)
    }

    fn plan(&self, request: &Request) -> ReplayPlan {
        self.replay
            .lock()
            .map(|state| state.plan(request))
            .unwrap_or_default()
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
        let plan = self.plan(request);
        let mut body = self.render_with(&plan, request);
        let provider = match self.config.protocol {
            Protocol::OpenAi => "openai",
            other => other.name(),
        };
        let replay = reasoning_replay(request, provider, &self.config.model, &plan);
        if self.config.stream
            && let Value::Object(fields) = &mut body
        {
            fields.insert("stream".into(), json!(true));
            if self.config.protocol == Protocol::OpenAi {
                fields.insert("stream_options".into(), json!({ "include_usage": true }));
            }
        }
        let url = self.endpoint();
        let mut attempt = 0;
        loop {
            let failure = match self.attempt(&url, &body, &mut on_event).await {
                Ok(mut parsed) => {
                    // Reasoning is tagged with the model as configured: the name the next
                    // render compares (the API may answer with a dated alias).
                    for r in &mut parsed.response.reasoning {
                        r.model.clone_from(&self.config.model);
                    }
                    parsed.replay = replay;
                    if let Ok(mut state) = self.replay.lock() {
                        state.advance(request, &plan);
                    }
                    return Ok(parsed);
                }
                Err(failure) => failure,
            };
            if !failure.retry || attempt >= self.config.max_retries {
                let mut error = failure.error;
                error.retryable = failure.retry;
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
        let json: Option<Value> = serde_json::from_str(&text).ok();
        if !status.is_success() {
            let detail = json
                .as_ref()
                .and_then(|j| j.pointer("/error/message").or_else(|| j.get("message")))
                .and_then(Value::as_str)
                .map_or_else(|| snippet(&text), str::to_owned);
            return Err(Failure {
                error: ProviderError::new(
                    ProviderErrorKind::Status,
                    format!("{url} answered {status}: {detail}"),
                ),
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
        let fail = |error: ProviderError| Failure {
            retry: error.kind() == ProviderErrorKind::Transport,
            error,
            retry_after: None,
            streamed: true,
        };
        let mut assembler = StreamAssembler::new(self.config.protocol);
        while !assembler.is_complete() {
            let chunk = response.chunk().await.map_err(|e| {
                fail(ProviderError::new(
                    ProviderErrorKind::Transport,
                    format!("the stream of {url} broke: {}", describe(&e)),
                ))
            })?;
            let Some(chunk) = chunk else { break };
            assembler.push(&chunk, on_event).map_err(fail)?;
        }
        let body = assembler.finish().map_err(|mut e| {
            e.message = format!("{} ({url})", e.message);
            fail(e)
        })?;
        self.parse(&body).map_err(fail)
    }
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

#[async_trait::async_trait]
impl Model for HttpModel {
    async fn respond(&self, request: &Request) -> Result<ModelResponse, ModelError> {
        self.send(request)
            .await
            .map(|parsed| parsed.response)
            .map_err(ModelError::from)
    }
}
