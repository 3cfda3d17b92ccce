//! A parsed provider response: the runtime's model response plus stop reason and usage.

use ishiki_core::ModelResponse;
use serde::{Deserialize, Serialize};

/// Token usage as the provider reported it (zero where it reported nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, including those read from the prompt cache.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cached_input_tokens: u64,
}

/// One provider response, parsed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ParsedResponse {
    /// What the runtime commits.
    pub response: ModelResponse,
    /// The provider's stop reason as it spelled it (`stop`, `tool_calls`, `end_turn`, …).
    pub stop_reason: String,
    /// Token usage.
    pub usage: Usage,
}
