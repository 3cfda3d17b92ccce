//! The provider-neutral boundary between an agent runtime and a model.
//!
//! A [`Request`] is what the model receives for one step: the native tool list
//! ([`ToolSpec`]s) and the projected [`Message`]s, each a list of [`Part`]s (text, images and
//! audio as [`MediaPart`]s, tool calls and results, catalog deltas, opaque [`Reasoning`] and a provider's [`Compacted`] summary). A
//! [`ModelResponse`] is what it answered: one assistant turn as an ordered list of parts (text
//! blocks, native [`ToolCall`]s and opaque [`Reasoning`] where the provider put them) and token
//! [`Usage`]. A [`Model`] turns one into the other, failing with a typed [`ModelError`]
//! that says whether trying again may help.
//!
//! The serde form of these types is a contract: it is what Ishiki's scenario transcripts print
//! and what a provider adapter renders for a particular API (`ishiki-provider` does so for the
//! OpenAI Chat Completions and Responses APIs and the Anthropic Messages API). This crate has
//! nothing but the types and the trait: serde, serde_json and async-trait.
//!
//! ```
//! use ishiki_model::{Message, Model, ModelError, ModelResponse, Part, Request, Role};
//!
//! /// A model that repeats the last user text.
//! #[derive(Debug)]
//! struct Echo;
//!
//! #[async_trait::async_trait]
//! impl Model for Echo {
//!     async fn respond(&self, request: &Request) -> Result<ModelResponse, ModelError> {
//!         let text = request
//!             .messages
//!             .iter()
//!             .rev()
//!             .filter(|m| m.role == Role::User)
//!             .flat_map(|m| &m.content)
//!             .find_map(|p| match p {
//!                 Part::Text { text } => Some(text.clone()),
//!                 _ => None,
//!             })
//!             .ok_or_else(|| ModelError::permanent("the request has no user text"))?;
//!         Ok(ModelResponse::from_text(text))
//!     }
//! }
//!
//! let request = Request {
//!     tools: Vec::new(),
//!     messages: vec![Message {
//!         id: "m1".into(),
//!         role: Role::User,
//!         created_at: "2026-01-01T00:00:00Z".into(),
//!         content: vec![Part::Text { text: "hello".into() }],
//!     }
//!     .into()],
//! };
//! let tokio = tokio::runtime::Builder::new_current_thread().build()?;
//! let response = tokio.block_on(Echo.respond(&request))?;
//! assert_eq!(response.text().as_deref(), Some("hello"));
//!
//! let empty = Request { tools: Vec::new(), messages: Vec::new() };
//! let error = tokio.block_on(Echo.respond(&empty)).unwrap_err();
//! assert!(!error.is_retryable());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod message;

pub use error::{ModelError, ModelErrorKind};
pub use message::{
    Compacted, DeltaEntry, MediaPart, Message, ModelResponse, Part, Reasoning, Request, Role,
    ToolCall, ToolSpec, Usage, framed_result,
};

/// A model: request in, response out.
///
/// Implemented by `ishiki-provider`'s HTTP model and by anything scripted; the runtime
/// (`ishiki-core`) calls it once per step. The future is `Send`, so a step can run inside
/// `tokio::spawn`.
#[async_trait::async_trait]
pub trait Model: Send + Sync + std::fmt::Debug {
    /// Answers one request.
    async fn respond(&self, request: &Request) -> Result<ModelResponse, ModelError>;

    /// Summarizes the conversation of `request` with the provider's own compaction (Anthropic's
    /// `compaction: {type: "summarize"}`, OpenAI's `/responses/compact`), when this model has
    /// one: the answer is sent back first, verbatim, in place of the turns it summarizes.
    /// `Ok(None)`, the default, says the model has no native compaction; a caller then asks
    /// [`respond`](Self::respond) for a summary as text. A compaction that wrote nothing is an
    /// error, not an empty answer.
    async fn compact(&self, request: &Request) -> Result<Option<Compacted>, ModelError> {
        let _ = request;
        Ok(None)
    }
}
