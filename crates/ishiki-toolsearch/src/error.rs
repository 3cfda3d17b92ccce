//! The crate's error type: a kind to match on and a message a model or user can read.

use std::fmt;

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolsearchErrorKind {
    /// The text is not valid JSON, or not in the shape of tool definitions.
    InvalidJson,
    /// A tool definition breaks a rule (empty name, input schema that is not an object).
    InvalidDefinition,
    /// Two definitions in one list share a name.
    DuplicateName,
    /// The embedding model of the semantic reranker could not be loaded or run.
    Model,
}

/// An error from parsing or checking tool definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolsearchError {
    kind: ToolsearchErrorKind,
    message: String,
}

impl ToolsearchError {
    /// An error of `kind` with a message that names what was wrong (lower-case, no period).
    pub fn new(kind: ToolsearchErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> ToolsearchErrorKind {
        self.kind
    }

    /// The message, without the kind.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolsearchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolsearchError {}
