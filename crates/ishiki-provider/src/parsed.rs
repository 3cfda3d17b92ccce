//! A parsed provider response: the runtime's model response plus stop reason and usage.

use ishiki_model::ModelResponse;
pub use ishiki_model::Usage;
use serde::{Deserialize, Serialize};

use crate::common::ReplayReport;

/// One provider response, parsed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ParsedResponse {
    /// What the runtime commits (with reasoning and usage).
    pub response: ModelResponse,
    /// The provider's stop reason as it spelled it (`stop`, `tool_calls`, `end_turn`, …).
    pub stop_reason: String,
    /// Token usage (zero where the provider reported nothing).
    pub usage: Usage,
    /// What the request that got this response did with its reasoning parts.
    pub replay: ReplayReport,
}
