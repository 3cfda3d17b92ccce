//! `ishiki-provider`: Ishiki's provider-neutral request in the wire shapes of real model APIs.
//!
//! The runtime projects a [`Request`](ishiki_model::Request) for every step. This crate renders
//! it for the OpenAI Chat Completions protocol ([`render_openai`]: OpenAI, vLLM, llama.cpp's
//! server, Ollama, most gateways), for Anthropic's Messages API ([`render_anthropic`], with
//! prompt-cache breakpoints where the prefix stays unchanged until the next pruning) and for
//! OpenAI's Responses API ([`render_responses`]), and parses their responses back into the
//! runtime's [`ModelResponse`](ishiki_model::ModelResponse) with stop reason, reasoning and token
//! usage ([`parse_openai_response`], [`parse_anthropic_response`],
//! [`parse_responses_response`]).
//!
//! An assistant turn is kept as received — an ordered list of text blocks, tool calls and
//! reasoning (Anthropic `thinking` blocks with their signature, Responses `reasoning` items with
//! their encrypted content, opaque and provider-tagged) — and replayed in that order, byte for
//! byte, to the same provider and model. Reasoning is bound to its prefix: each block is stamped
//! with a digest of the request it answered, and a renderer replays it only while the prefix it
//! renders before the block is unchanged; a block of another provider or model, or whose prefix
//! changed, is dropped, never edited ([`ReplayReport`] says what happened).
//!
//! [`HttpModel`] is the runtime's [`Model`](ishiki_model::Model) over HTTP (reqwest with rustls):
//! base URL, API key from an environment variable, a timeout per attempt, and retries with
//! exponential backoff (or the server's `retry-after`) on 429, 5xx and transport failures. It
//! streams (server-sent events) when the server does: [`HttpModel::send_with`] hands text and
//! tool-call starts to a callback as they arrive, and a stream cut before its end is retried
//! like a transport failure, so a step commits whole responses only.
//!
//! Rendering is pure: a function from the request to a JSON body. Images travel as `data:`
//! URLs (OpenAI) or base64 source blocks (Anthropic); catalog deltas stay where the runtime put
//! them, after the stable prefix, so an earlier tool list is never rewritten.
//!
//! # Example
//!
//! ```
//! use ishiki_model::{Message, Part, Request, Role, ToolSpec};
//! use ishiki_provider::{AnthropicOptions, OpenAiOptions, parse_anthropic_response, render_anthropic, render_openai};
//! use serde_json::json;
//!
//! let request = Request {
//!     tools: vec![ToolSpec {
//!         name: "read".into(),
//!         description: "Read a resource".into(),
//!         input_schema: json!({ "type": "object", "properties": { "url": { "type": "string" } } }),
//!     }],
//!     messages: vec![
//!         Message { id: "sys".into(), role: Role::System, created_at: "2026-01-01T00:00:00Z".into(),
//!                   content: vec![Part::Text { text: "Be brief.".into() }] }.into(),
//!         Message { id: "m1".into(), role: Role::User, created_at: "2026-01-01T00:00:01Z".into(),
//!                   content: vec![Part::Text { text: "Read notes.txt".into() }] }.into(),
//!     ],
//! };
//!
//! let openai = render_openai(&request, &OpenAiOptions::new("gpt-test"));
//! assert_eq!(openai["messages"][0], json!({ "role": "system", "content": "Be brief." }));
//! assert_eq!(openai["tools"][0]["function"]["name"], "read");
//!
//! let anthropic = render_anthropic(&request, &AnthropicOptions::new("claude-test", 1024));
//! assert_eq!(anthropic["system"][0]["text"], "Be brief.");
//! // Breakpoints: the last tool, and the last block that stays until the next pruning.
//! assert_eq!(anthropic["tools"][0]["cache_control"], json!({ "type": "ephemeral" }));
//! assert_eq!(anthropic["messages"][0]["content"][0]["cache_control"]["type"], "ephemeral");
//!
//! let parsed = parse_anthropic_response(&json!({
//!     "type": "message", "role": "assistant", "stop_reason": "tool_use",
//!     "content": [{ "type": "tool_use", "id": "c1", "name": "read", "input": { "url": "workspace:///notes.txt" } }],
//!     "usage": { "input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 90 },
//! }))?;
//! assert_eq!(parsed.response.calls()[0].name, "read");
//! assert_eq!((parsed.usage.input_tokens, parsed.usage.cache_read_tokens), (100, 90));
//! # Ok::<(), ishiki_provider::ProviderError>(())
//! ```
//!
//! # Calling a model over HTTP
//!
//! Needs a network and an API key, so it is compiled here but not run:
//!
//! ```no_run
//! use ishiki_model::{Message, Model, ModelErrorKind, Part, Request, Role};
//! use ishiki_provider::{HttpConfig, HttpModel, Protocol};
//!
//! #[tokio::main(flavor = "current_thread")]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // Anthropic. For OpenAI: `Protocol::OpenAi`, "https://api.openai.com/v1", a model name
//!     // and `OPENAI_API_KEY`. A local server (vLLM, Ollama) needs no key: leave `api_key_env` None.
//!     let config = HttpConfig {
//!         api_key_env: Some("ANTHROPIC_API_KEY".into()),
//!         max_tokens: 1024,
//!         ..HttpConfig::new(Protocol::Anthropic, "https://api.anthropic.com", "claude-sonnet-4-5")
//!     };
//!     // Reads the key now: an unset variable is a `ProviderErrorKind::Config` error,
//!     // "the api key variable `ANTHROPIC_API_KEY` is not set".
//!     let model = HttpModel::new(config)?;
//!
//!     let request = Request {
//!         tools: vec![],
//!         messages: vec![Message {
//!             id: "m1".into(),
//!             role: Role::User,
//!             created_at: "2026-01-01T00:00:00Z".into(),
//!             content: vec![Part::Text { text: "Say hello.".into() }],
//!         }
//!         .into()],
//!     };
//!
//!     // `Model::respond` is what the runtime calls: retries on 429, 5xx and transport failures
//!     // happen inside it; what outlasts them is a `ModelError`.
//!     match model.respond(&request).await {
//!         Ok(response) => println!("{}", response.text().unwrap_or_default()),
//!         Err(e) => match e.kind() {
//!             // "<url> answered 503 Service Unavailable: <detail>" and the like
//!             ModelErrorKind::Retryable => eprintln!("try again later: {e}"),
//!             ModelErrorKind::ContextTooLong => eprintln!("shorten the request: {e}"),
//!             // 4xx, an error object, a malformed body: the same request fails again.
//!             _ => eprintln!("failed: {e}"),
//!         },
//!     }
//!
//!     // `send` gives more: the provider's stop reason and token usage, or a `ProviderError`
//!     // with a `ProviderErrorKind` (Status, Api, Transport, Malformed, ...).
//!     let parsed = model.send(&request).await?;
//!     println!("{} ({} tokens out)", parsed.stop_reason, parsed.usage.output_tokens);
//!     Ok(())
//! }
//! ```

pub mod anthropic;
mod common;
mod error;
mod family;
mod http;
mod openai;
mod parsed;
mod partial_json;
pub mod replay;
mod responses;
pub mod sse;

pub use anthropic::{
    ANTHROPIC, AnthropicOptions, Thinking, parse_anthropic_response, render_anthropic,
    render_anthropic_with_report,
};
pub use common::ReplayReport;
pub use error::{ProviderError, ProviderErrorKind};
pub use family::ModelFamily;
pub use http::{HttpConfig, HttpModel, MAX_COMPACTION_BYTES, Protocol};
pub use openai::{OpenAiOptions, parse_openai_response, render_openai};
pub use parsed::{ParsedResponse, Usage};
pub use replay::stamp_reasoning;
pub use responses::{
    OPENAI_RESPONSES, ResponsesOptions, parse_responses_response, render_responses,
    render_responses_with_report,
};
pub use sse::StreamEvent;
