//! The crate's error type: what ended a program, in words the model can act on.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What kind of failure ended a program (or made its result unusable).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodemodeErrorKind {
    /// The program does not parse.
    Syntax,
    /// The program threw (or rejected) and nothing caught it.
    Thrown,
    /// The program ran past its wall-clock or CPU time.
    Timeout,
    /// The program ran out of memory.
    Memory,
    /// One tool call's input or output was larger than the per-call transfer limit.
    TransferTooLarge,
    /// The final return value was larger than the result limit.
    ResultTooLarge,
    /// An engine limit stopped the program: instruction budget, loop, recursion, stack, nesting.
    Limit,
    /// The top-level `attachments` array of the return value is malformed.
    InvalidAttachments,
    /// The sandbox itself failed (worker could not start, crashed, broke the protocol).
    Worker,
}

impl CodemodeErrorKind {
    /// A short lower-case name, as used in snapshots and logs.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Syntax => "syntax",
            Self::Thrown => "thrown",
            Self::Timeout => "timeout",
            Self::Memory => "memory",
            Self::TransferTooLarge => "transfer_too_large",
            Self::ResultTooLarge => "result_too_large",
            Self::Limit => "limit",
            Self::InvalidAttachments => "invalid_attachments",
            Self::Worker => "worker",
        }
    }
}

/// A program failed. `message()` is short and precise: it is shown to the model as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodemodeError {
    kind: CodemodeErrorKind,
    message: String,
    console: Vec<String>,
}

impl CodemodeError {
    pub(crate) fn new(kind: CodemodeErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            console: Vec::new(),
        }
    }

    pub(crate) fn with_console(mut self, console: Vec<String>) -> Self {
        self.console = console;
        self
    }

    /// What kind of failure this is.
    #[must_use]
    pub fn kind(&self) -> CodemodeErrorKind {
        self.kind
    }

    /// The message for the model: lower-case, no trailing period.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `console` output the program produced before it failed (bounded like
    /// [`Outcome::console`](crate::Outcome::console)); often the best clue to what went wrong.
    #[must_use]
    pub fn console(&self) -> &[String] {
        &self.console
    }
}

impl fmt::Display for CodemodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CodemodeError {}

/// Formats a byte count for messages: `512 B`, `16 KiB`, `4.5 MiB`, `1 GiB`.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || (value.fract() < 0.05) {
        format!("{} {}", value.round(), UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_bytes_reads_naturally() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(16 * 1024), "16 KiB");
        assert_eq!(human_bytes(4 * 1024 * 1024 + 512 * 1024), "4.5 MiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
    }
}
