//! `search` (TS-1, TS-2): discloses deferred tools, which join the catalog from the next step.

use std::sync::Arc;

use async_trait::async_trait;
use ishiki_outlet::ToolDisplay;
use ishiki_tool::{Tool, ToolContext, ToolError};
use ishiki_toolsearch::ToolDef;
use serde_json::{Value, json};

use super::{Shared, builtin_def, string_field};

/// `search({ query })`: discloses deferred tools; hits join the catalog from the next step (TS-2).
#[derive(Debug)]
pub(crate) struct SearchTool {
    shared: Arc<Shared>,
}

impl SearchTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

#[async_trait]
impl Tool for SearchTool {
    fn definition(&self) -> ToolDef {
        builtin_def(
            "search",
            "Find more tools by what they do. Matching tools become callable from the next step on. `select:NAME` loads a tool by its exact name.",
            json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "What the tool should do, or select:NAME" },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 20, "description": "At most this many hits (default 5)" }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let query = string_field(&input, "query");
        let limit = input
            .get("limit")
            .and_then(Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(5);
        let hits = self.shared.catalog_mut().search(query, limit);
        self.shared
            .record_search(query, hits.iter().map(|h| h.name.clone()).collect());
        Ok(json!({
            "query": query,
            "hits": hits.iter().map(|h| json!({ "name": h.name, "description": h.description, "matched": h.matched })).collect::<Vec<_>>()
        }))
    }

    fn to_model_output(&self, raw: &Value) -> ToolDisplay {
        let query = string_field(raw, "query");
        let hits = raw
            .get("hits")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if hits.is_empty() {
            return ToolDisplay::text(format!(
                "No tools match `{query}`. Try other words for what the tool should do."
            ));
        }
        let mut text = format!(
            "{} tool(s) found; callable from the next step on:\n",
            hits.len()
        );
        for hit in &hits {
            text.push_str(&format!(
                "- {}: {}\n",
                string_field(hit, "name"),
                string_field(hit, "description")
            ));
        }
        ToolDisplay::text(text.trim_end().to_owned())
    }
}
