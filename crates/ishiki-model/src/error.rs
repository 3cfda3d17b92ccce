//! [`ModelError`]: why a model request failed, and whether trying again may help.

/// Whether a failed model request may succeed when tried again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// Trying the same request again later may succeed: the endpoint could not be reached or
    /// timed out, it was rate limited (HTTP 429) or failed on its side (HTTP 5xx).
    Retryable,
    /// The same request will fail again: the provider refused it (HTTP 4xx, an error object, a
    /// rejected image), answered with a body of the wrong shape, or the model is not configured
    /// right (a missing API key).
    Permanent,
    /// The request is longer than the model's context window (Anthropic 400 "prompt is too
    /// long", OpenAI `context_length_exceeded`, HTTP 413): the same request fails again, a
    /// shorter one (older results folded, turns compacted) may not.
    ContextTooLong,
}

/// A failed model request: a [`ModelErrorKind`] and a lower-case message without a trailing
/// period, shown as is (`Display` prints the message alone).
///
/// ```
/// use ishiki_model::{ModelError, ModelErrorKind};
///
/// let error = ModelError::retryable("https://api.example/v1 answered 503 Service Unavailable");
/// assert_eq!(error.kind(), ModelErrorKind::Retryable);
/// assert_eq!(error.to_string(), "https://api.example/v1 answered 503 Service Unavailable");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelError {
    kind: ModelErrorKind,
    message: String,
}

impl ModelError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ModelErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// A failure that trying again later may cure.
    pub fn retryable(message: impl Into<String>) -> Self {
        Self::new(ModelErrorKind::Retryable, message)
    }

    /// A failure the same request will meet again.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(ModelErrorKind::Permanent, message)
    }

    /// Whether trying again may help.
    pub fn kind(&self) -> ModelErrorKind {
        self.kind
    }

    /// True for [`ModelErrorKind::Retryable`].
    pub fn is_retryable(&self) -> bool {
        self.kind == ModelErrorKind::Retryable
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether a provider's refusal says the request is longer than the context window:
    /// Anthropic ("prompt is too long: N tokens > M maximum", "input length and `max_tokens`
    /// exceed context limit"), OpenAI (`context_length_exceeded`, "maximum context length",
    /// "exceeds the context window"), or any HTTP 413. Adapters use it to choose
    /// [`ModelErrorKind::ContextTooLong`]; a runtime may use it on an error it only has as text.
    ///
    /// ```
    /// use ishiki_model::ModelError;
    ///
    /// assert!(ModelError::says_too_long(Some(400), "prompt is too long: 210000 tokens > 200000 maximum"));
    /// assert!(ModelError::says_too_long(Some(413), "request entity too large"));
    /// assert!(!ModelError::says_too_long(Some(400), "image exceeds 5 MB maximum"));
    /// ```
    pub fn says_too_long(status: Option<u16>, text: &str) -> bool {
        let text = text.to_ascii_lowercase();
        status == Some(413)
            || [
                "prompt is too long",
                "context_length_exceeded",
                "maximum context length",
                "exceeds the context window",
                "exceed context limit",
            ]
            .iter()
            .any(|needle| text.contains(needle))
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ModelError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_shown_alone_and_the_kind_is_kept() {
        let error = ModelError::permanent("the model `m` has no api key: set OPENAI_API_KEY");
        assert_eq!(
            error.to_string(),
            "the model `m` has no api key: set OPENAI_API_KEY"
        );
        assert_eq!(error.kind(), ModelErrorKind::Permanent);
        assert!(!error.is_retryable());
        assert!(ModelError::retryable("timed out").is_retryable());
    }
}
