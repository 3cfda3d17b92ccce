//! The crate's error: what went wrong with which server, in words a model can act on.

use std::fmt;

/// What went wrong, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum McpErrorKind {
    /// The server could not be started: the command is missing, it exited at once, or the
    /// `initialize` handshake failed.
    Start,
    /// The server did not answer within its timeout; it was stopped and restarts on next use.
    Timeout,
    /// The server exited or closed its output while a request was open; it restarts on next use.
    Closed,
    /// The server answered with a JSON-RPC error (unknown tool, invalid arguments, …).
    Protocol,
    /// A tool the server lists cannot be offered (its input schema does not compile, its
    /// name is empty, or its schema is too large); the server's other tools still are.
    InvalidTool,
    /// The server's answer cannot be used: a message over 16 MiB, a reply that cannot be
    /// decoded (nested too deep), a tool list past its limits (pages, tools, bytes) or one
    /// whose cursor comes back, or a reply that is no tool result. Retrying gets the same.
    BadReply,
}

impl McpErrorKind {
    /// A stable code for logs and scenario transcripts.
    pub fn code(self) -> &'static str {
        match self {
            McpErrorKind::Start => "mcp_start",
            McpErrorKind::Timeout => "mcp_timeout",
            McpErrorKind::Closed => "mcp_closed",
            McpErrorKind::Protocol => "mcp_protocol",
            McpErrorKind::InvalidTool => "mcp_invalid_tool",
            McpErrorKind::BadReply => "mcp_bad_reply",
        }
    }
}

/// An MCP failure. The message names the server and is lower-case without a trailing period.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpError {
    kind: McpErrorKind,
    server: String,
    message: String,
}

impl McpError {
    pub(crate) fn new(kind: McpErrorKind, server: &str, message: impl Into<String>) -> Self {
        Self {
            kind,
            server: server.to_owned(),
            message: message.into(),
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> McpErrorKind {
        self.kind
    }

    /// The name of the server (as in `mcp.servers.<name>`).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The message, naming the server.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for McpError {}

impl From<McpError> for ishiki_tool::ToolError {
    /// A server that could not start, timed out or closed is unavailable (it restarts on next
    /// use); the rest failed.
    fn from(e: McpError) -> Self {
        use ishiki_tool::ToolErrorKind;
        let kind = match e.kind {
            McpErrorKind::Start | McpErrorKind::Timeout | McpErrorKind::Closed => {
                ToolErrorKind::Unavailable
            }
            McpErrorKind::Protocol | McpErrorKind::InvalidTool | McpErrorKind::BadReply => {
                ToolErrorKind::Failed
            }
        };
        ishiki_tool::ToolError::with_kind(kind, e.message)
    }
}
