//! A [`Model`] over HTTP: render the request, post it, retry what is worth retrying, parse.

use std::time::Duration;

use ishiki_core::{Model, ModelResponse, Request};
use serde_json::Value;

use crate::anthropic::{AnthropicOptions, parse_anthropic_response, render_anthropic};
use crate::error::{ProviderError, ProviderErrorKind};
use crate::openai::{OpenAiOptions, parse_openai_response, render_openai};
use crate::parsed::ParsedResponse;

/// Which wire protocol an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OpenAI Chat Completions: `POST {base_url}/chat/completions`, `Authorization: Bearer`.
    OpenAi,
    /// Anthropic Messages: `POST {base_url}/v1/messages`, `x-api-key`.
    Anthropic,
}

impl std::str::FromStr for Protocol {
    type Err = ProviderError;

    /// `openai` or `anthropic` (a `provider` value of `models.yaml`).
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "openai" => Ok(Self::OpenAi),
            "anthropic" => Ok(Self::Anthropic),
            other => Err(ProviderError::new(
                ProviderErrorKind::Config,
                format!("unknown provider `{other}` (expected openai or anthropic)"),
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
}

impl HttpConfig {
    /// A configuration with defaults: no key, 4096 output tokens, 120 s timeout, 3 retries
    /// from a 1 s backoff, response bodies up to 64 MiB.
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
        })
    }

    /// The request body this model sends for `request`.
    pub fn render(&self, request: &Request) -> Value {
        match self.config.protocol {
            Protocol::OpenAi => render_openai(
                request,
                &OpenAiOptions {
                    max_tokens: Some(self.config.max_tokens),
                    ..OpenAiOptions::new(&self.config.model)
                },
            ),
            Protocol::Anthropic => render_anthropic(
                request,
                &AnthropicOptions::new(&self.config.model, self.config.max_tokens),
            ),
        }
    }

    fn endpoint(&self) -> String {
        let base = self.config.base_url.trim_end_matches('/');
        match self.config.protocol {
            Protocol::OpenAi => format!("{base}/chat/completions"),
            Protocol::Anthropic => format!("{base}/v1/messages"),
        }
    }

    /// Sends one request, retrying on 429, 5xx and transport failures, and parses the answer.
    pub async fn send(&self, request: &Request) -> Result<ParsedResponse, ProviderError> {
        let body = self.render(request);
        let url = self.endpoint();
        let mut attempt = 0;
        loop {
            let failure = match self.attempt(&url, &body).await {
                Ok(parsed) => return Ok(parsed),
                Err(failure) => failure,
            };
            if !failure.retry || attempt >= self.config.max_retries {
                let mut error = failure.error;
                if attempt > 0 {
                    error.message = format!("{} (after {} attempts)", error.message, attempt + 1);
                }
                return Err(error);
            }
            let wait = failure
                .retry_after
                .unwrap_or_else(|| self.config.backoff.saturating_mul(1 << attempt.min(16)));
            tokio::time::sleep(wait.min(Duration::from_secs(60))).await;
            attempt += 1;
        }
    }

    async fn attempt(&self, url: &str, body: &Value) -> Result<ParsedResponse, Failure> {
        let mut post = self.client.post(url).json(body);
        post = match (self.config.protocol, &self.api_key) {
            (Protocol::OpenAi, Some(key)) => post.bearer_auth(key),
            (Protocol::Anthropic, Some(key)) => post.header("x-api-key", key),
            (_, None) => post,
        };
        if self.config.protocol == Protocol::Anthropic {
            post = post.header("anthropic-version", "2023-06-01");
        }
        let response = post.send().await.map_err(|e| Failure {
            error: ProviderError::new(
                ProviderErrorKind::Transport,
                format!("cannot reach {url}: {}", describe(&e)),
            ),
            retry: true,
            retry_after: None,
        })?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
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
            });
        }
        let json = json.ok_or_else(|| Failure {
            error: ProviderError::malformed(format!(
                "{url} answered with a body that is not json: {}",
                snippet(&text)
            )),
            retry: false,
            retry_after: None,
        })?;
        let parsed = match self.config.protocol {
            Protocol::OpenAi => parse_openai_response(&json),
            Protocol::Anthropic => parse_anthropic_response(&json),
        };
        parsed.map_err(|error| Failure {
            error,
            retry: false,
            retry_after: None,
        })
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
    async fn respond(&self, request: &Request) -> Result<ModelResponse, String> {
        self.send(request)
            .await
            .map(|parsed| parsed.response)
            .map_err(|e| e.to_string())
    }
}
