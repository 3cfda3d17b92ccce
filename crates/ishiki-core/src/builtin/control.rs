//! `finish` and `wait` (CM-4): direct-only tools that record the model's intent.

use async_trait::async_trait;
use ishiki_outlet::ToolDisplay;
use ishiki_tool::{Tool, ToolContext, ToolError};
use ishiki_toolsearch::ToolDef;
use serde_json::{Value, json};

use super::{builtin_def, string_field};

/// `finish({ summary? })` and `wait({ reason? })`: the model ends the task or waits for the
/// next message. Direct only (CM-4); they record the model's intent and change nothing else.
#[derive(Debug)]
pub(crate) struct ControlTool {
    name: &'static str,
    description: &'static str,
    /// The one optional text field of the input (`summary` or `reason`).
    field: &'static str,
    /// The flag the raw result sets (`finished` or `waiting`).
    flag: &'static str,
    /// What the model reads back.
    reply: &'static str,
}

impl ControlTool {
    pub(crate) fn finish() -> Self {
        Self {
            name: "finish",
            description: "End the current task. Call it when the user's request is done.",
            field: "summary",
            flag: "finished",
            reply: "Finished.",
        }
    }

    pub(crate) fn wait() -> Self {
        Self {
            name: "wait",
            description: "Wait for the user's next message before going on.",
            field: "reason",
            flag: "waiting",
            reply: "Waiting for the next message.",
        }
    }
}

#[async_trait]
impl Tool for ControlTool {
    fn definition(&self) -> ToolDef {
        builtin_def(
            self.name,
            self.description,
            json!({
                "type": "object",
                "properties": { self.field: { "type": "string" } },
                "additionalProperties": false
            }),
        )
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        Ok(json!({ self.flag: true, self.field: string_field(&input, self.field) }))
    }

    fn to_model_output(&self, _raw: &Value) -> ToolDisplay {
        ToolDisplay::text(self.reply)
    }

    /// Ending the turn is the model's own act, never a program's (CM-4).
    fn callable_from_programs(&self) -> bool {
        false
    }
}
