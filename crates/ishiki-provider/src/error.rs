//! The crate's error type: what went wrong talking to a provider, with a kind to branch on.

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
}

/// A provider failure: a kind and a lower-case message without a trailing period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    kind: ProviderErrorKind,
    pub(crate) message: String,
}

impl ProviderError {
    pub(crate) fn new(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn malformed(message: impl Into<String>) -> Self {
        Self::new(ProviderErrorKind::Malformed, message)
    }

    /// The kind of failure.
    pub fn kind(&self) -> ProviderErrorKind {
        self.kind
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
