//! The crate's error type: what went wrong talking to a provider, with a kind to branch on.

use ishiki_model::{ModelError, ModelErrorKind};

/// What kind of failure a [`ProviderError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProviderErrorKind {
    /// The response body is not the shape the API documents.
    Malformed,
    /// The provider answered with an error object.
    Api,
    /// The endpoint answered with an HTTP error status (after any retries).
    Status,
    /// The endpoint could not be reached, or timed out (after any retries).
    Transport,
    /// The model is not configured right (e.g. its API key variable is not set).
    Config,
    /// The request is longer than the model's context window (see
    /// [`ModelErrorKind::ContextTooLong`]).
    ContextTooLong,
    /// A stream broke, or the provider ended it with an error event, after part of the answer
    /// had been shown: it is not resent on its own (the user would see two answers); the
    /// caller may try the step again.
    Interrupted,
}

/// A provider failure: a kind and a lower-case message without a trailing period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    kind: ProviderErrorKind,
    pub(crate) message: String,
    /// Whether the request may succeed when sent again (a transport failure, HTTP 429 or 5xx),
    /// as the retry loop judged it.
    pub(crate) retryable: bool,
}

impl ProviderError {
    pub(crate) fn new(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retryable: matches!(
                kind,
                ProviderErrorKind::Transport | ProviderErrorKind::Interrupted
            ),
        }
    }

    pub(crate) fn malformed(message: impl Into<String>) -> Self {
        Self::new(ProviderErrorKind::Malformed, message)
    }

    /// The kind of failure.
    pub fn kind(&self) -> ProviderErrorKind {
        self.kind
    }

    /// Whether sending the request again later may succeed: a transport failure, a rate limit
    /// (HTTP 429) or a server error (HTTP 5xx) that outlasted the retries.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ProviderError {}

/// The runtime's view: a transport failure, a rate limit (HTTP 429) or a server error (HTTP
/// 5xx) that outlasted the retries is [`Retryable`](ModelErrorKind::Retryable) later; anything
/// else — a refusal, a malformed body, a configuration error — is
/// [`Permanent`](ModelErrorKind::Permanent). The message is kept as is.
impl From<ProviderError> for ModelError {
    fn from(error: ProviderError) -> Self {
        let kind = if error.kind == ProviderErrorKind::ContextTooLong {
            ModelErrorKind::ContextTooLong
        } else if error.retryable {
            ModelErrorKind::Retryable
        } else {
            ModelErrorKind::Permanent
        };
        ModelError::new(kind, error.message)
    }
}
