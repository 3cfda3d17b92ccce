//! MCP tools as `ishiki_core::Tool`s: `<server>_<tool>`, origin `mcp:<server>`; and following a
//! server whose tool list changes (`notifications/tools/list_changed`).

use std::sync::Arc;

use async_trait::async_trait;
use ishiki_core::{Runtime, Tool, ToolContext, ToolDef, ToolError};
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

/// What changed in a server's tool list, as Ishiki tools.
#[derive(Debug, Default)]
pub struct ToolsDelta {
    /// New tools, and tools whose definition changed (they replace the old ones).
    pub added: Vec<Arc<dyn Tool>>,
    /// Ishiki names (`<server>_<tool>`) of tools the server no longer lists.
    pub removed: Vec<String>,
    /// One error per listed tool left out (an invalid input schema).
    pub errors: Vec<McpError>,
}

/// Lists `server`'s tools again ([`McpServer::refresh_tools`]) and returns the change as
/// Ishiki tools. A tool whose new definition is invalid is reported and counts as removed.
pub async fn sync_tools(server: &Arc<McpServer>) -> Result<ToolsDelta, McpError> {
    let change = server.refresh_tools().await?;
    let prefix = &server.config().name;
    let mut delta = ToolsDelta {
        removed: change
            .removed
            .iter()
            .map(|name| format!("{prefix}_{name}"))
            .collect(),
        ..ToolsDelta::default()
    };
    for tool in &change.added {
        match McpTool::new(server.clone(), tool) {
            Ok(tool) => delta.added.push(Arc::new(tool)),
            Err(e) => {
                delta.removed.push(format!("{prefix}_{}", tool.name));
                delta.errors.push(e);
            }
        }
    }
    Ok(delta)
}

/// Brings `runtime`'s tools up to date with every server of `servers` whose list changed
/// since it was last read; call it before preparing each request. Added tools join like any
/// tool added after start and are announced in the next step's catalog delta; removed ones
/// stay in the native list, are announced as no longer available, and calling them fails
/// with a clear error ([`Runtime::add_tool`], [`Runtime::remove_tool`]). Returns one error per
/// server that could not be listed and per tool left out; the others are still applied.
pub async fn apply_tool_changes(
    servers: &[Arc<McpServer>],
    runtime: &mut Runtime,
) -> Vec<McpError> {
    let mut errors = Vec::new();
    for server in servers.iter().filter(|s| s.tools_changed()) {
        let delta = match sync_tools(server).await {
            Ok(delta) => delta,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        errors.extend(delta.errors);
        for name in &delta.removed {
            runtime.remove_tool(name);
        }
        for tool in delta.added {
            if let Err(e) = runtime.add_tool(tool) {
                errors.push(McpError::new(
                    McpErrorKind::InvalidTool,
                    server.name(),
                    format!("mcp server `{}`: {e}", server.name()),
                ));
            }
        }
    }
    errors
}
