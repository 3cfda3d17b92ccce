//! MCP tools as `ishiki_core::Tool`s: `<server>_<tool>`, origin `mcp:<server>`.

use std::sync::Arc;

use async_trait::async_trait;
use ishiki_core::{Tool, ToolContext, ToolDef, ToolError};
use serde_json::Value;

use crate::error::{McpError, McpErrorKind};
use crate::result::map_call_result;
use crate::server::McpServer;

/// One tool of an MCP server, callable directly and from codemode programs.
///
/// `execute` returns the MCP content array unchanged (so `result[1]` is an image block
/// `{type: "image", mimeType, data}`), or `structuredContent` when the tool declares an output
/// schema. The display is core's default: text blocks as text, image/audio and blob resources
/// as media, embedded text resources as text, resource links as their URI.
#[derive(Debug)]
pub struct McpTool {
    server: Arc<McpServer>,
    remote: String,
    def: ToolDef,
}

impl McpTool {
    /// The tool `remote` of `server`, described by `tool` as the server listed it.
    ///
    /// Fails with [`McpErrorKind::InvalidTool`] when its input schema does not compile, so one
    /// broken tool cannot stop a runtime from building.
    pub fn new(server: Arc<McpServer>, tool: &rmcp::model::Tool) -> Result<McpTool, McpError> {
        let config = server.config();
        let name = format!("{}_{}", config.name, tool.name);
        let input_schema = Value::Object(tool.input_schema.as_ref().clone());
        if let Err(e) = jsonschema::validator_for(&input_schema) {
            return Err(McpError::new(
                McpErrorKind::InvalidTool,
                &config.name,
                format!(
                    "mcp server `{}`: tool `{}` is left out: its input schema is invalid: {e}",
                    config.name, tool.name
                ),
            ));
        }
        let description = tool
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .or(tool.title.as_deref())
            .unwrap_or_default()
            .to_owned();
        let def = ToolDef {
            name,
            description,
            input_schema,
            output_schema: tool
                .output_schema
                .as_ref()
                .map(|schema| Value::Object(schema.as_ref().clone())),
            resident: config.resident,
            origin: Some(format!("mcp:{}", config.name)),
        };
        Ok(McpTool {
            remote: tool.name.to_string(),
            server,
            def,
        })
    }

    /// The tool's name on its server (without the `<server>_` prefix).
    pub fn remote_name(&self) -> &str {
        &self.remote
    }

    /// The server the tool belongs to.
    pub fn server(&self) -> &Arc<McpServer> {
        &self.server
    }
}

#[async_trait]
impl Tool for McpTool {
    fn definition(&self) -> ToolDef {
        self.def.clone()
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let result = self.server.call(&self.remote, input).await?;
        map_call_result(&result, self.def.output_schema.is_some()).map_err(ToolError::new)
    }
}

/// Every tool `server` listed at start, as [`McpTool`]s, and an error for each tool left out.
pub fn server_tools(server: &Arc<McpServer>) -> (Vec<Arc<dyn Tool>>, Vec<McpError>) {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut errors = Vec::new();
    for tool in server.listed_tools() {
        match McpTool::new(server.clone(), &tool) {
            Ok(tool) => tools.push(Arc::new(tool)),
            Err(e) => errors.push(e),
        }
    }
    (tools, errors)
}
