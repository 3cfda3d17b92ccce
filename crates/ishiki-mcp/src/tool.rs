//! MCP tools as `ishiki_tool::Tool`s: `<server>_<tool>`, origin `mcp:<server>`; and following a
//! server whose tool list changes (`notifications/tools/list_changed`).

use std::sync::Arc;

use async_trait::async_trait;
use ishiki_tool::{Tool, ToolContext, ToolDef, ToolError, ToolSet};
use serde_json::Value;

use crate::error::{McpError, McpErrorKind};
use crate::result::{ResultShape, map_call_result, model_result};
use crate::server::McpServer;

/// One tool of an MCP server, callable directly and from codemode programs.
///
/// A direct call gives the model the result's content blocks (text as text, images, audio and
/// blob resources as attachments, `text/*` blobs as text; blocks meant for the user alone are
/// left out), even when the tool declares an output schema: media are never dropped because
/// structured content is there too. A program calls the tool's [`Tool::program_view`], whose
/// raw result is `structuredContent` when the tool declares an output schema, else the same
/// content array (so `result[1]` is an image block `{type: "image", mimeType, data}`).
#[derive(Debug, Clone)]
pub struct McpTool {
    server: Arc<McpServer>,
    remote: String,
    def: ToolDef,
    view: View,
}

/// Which caller a tool serves: the model (content blocks) or programs (structured content).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    Model,
    Program,
}

/// The most JSON nodes an input schema may have, so a listing cannot buy unbounded compile
/// work in the runtime with one tool (the listing itself is at most 16 MiB).
const MAX_SCHEMA_NODES: usize = 100_000;

impl McpTool {
    /// The tool `remote` of `server`, described by `tool` as the server listed it, named by the
    /// server's naming (`<server>_<tool>`, or a distinct name when that one is taken; see
    /// [`crate::connect_all`]).
    ///
    /// Fails with [`McpErrorKind::InvalidTool`] when its name is empty or its input schema is
    /// too large, so one broken tool cannot stop a runtime from building. The schema is
    /// compiled where every tool's is, by the runtime (`ishiki_core::check_tool` before
    /// registering leaves out one that does not compile).
    pub fn new(server: Arc<McpServer>, tool: &rmcp::model::Tool) -> Result<McpTool, McpError> {
        let config = server.config();
        let invalid = |why: String| {
            McpError::new(
                McpErrorKind::InvalidTool,
                &config.name,
                format!(
                    "mcp server `{}`: tool `{}` is left out: {why}",
                    config.name, tool.name
                ),
            )
        };
        if tool.name.trim().is_empty() {
            return Err(invalid("its name is empty".to_owned()));
        }
        let input_schema = Value::Object(tool.input_schema.as_ref().clone());
        let nodes = count_nodes(&input_schema, MAX_SCHEMA_NODES);
        if nodes > MAX_SCHEMA_NODES {
            return Err(invalid(format!(
                "its input schema has more than {MAX_SCHEMA_NODES} JSON values"
            )));
        }
        let named = server.names().name(&config.name, &tool.name);
        let mut description = tool
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .or(tool.title.as_deref())
            .unwrap_or_default()
            .to_owned();
        if let Some(why) = &named.renamed {
            // The model sees the name it must call and why it differs from the usual one.
            if !description.is_empty() {
                description.push_str("\n\n");
            }
            description.push_str(&format!(
                "(Named `{}` here because {why}; the server `{}` calls it `{}`.)",
                named.name, config.name, tool.name
            ));
        }
        let def = ToolDef {
            name: named.name,
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
            view: View::Model,
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

/// How many JSON values `value` holds, counted up to just past `limit` (iteratively, so a
/// deep value cannot exhaust the stack).
fn count_nodes(value: &Value, limit: usize) -> usize {
    let mut count = 0;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        count += 1;
        if count > limit {
            break;
        }
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    count
}

#[async_trait]
impl Tool for McpTool {
    fn definition(&self) -> ToolDef {
        self.def.clone()
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let result = self.server.call(&self.remote, input).await?;
        match self.view {
            View::Model => model_result(&result),
            View::Program => map_call_result(
                &result,
                if self.def.output_schema.is_some() {
                    ResultShape::Structured
                } else {
                    ResultShape::Content
                },
            ),
        }
    }

    fn program_view(&self) -> Option<Arc<dyn Tool>> {
        Some(Arc::new(McpTool {
            view: View::Program,
            ..self.clone()
        }))
    }
}

/// Every tool `server` listed at start, as [`McpTool`]s, and an error for each tool left out
/// (a too large input schema, an empty name, a name listed twice). The input schemas are not
/// compiled here: the runtime compiles them when the tools are registered, and refuses to
/// build with one that does not compile; [`server_tools_checked`] leaves such a tool out
/// instead.
pub fn server_tools(server: &Arc<McpServer>) -> (Vec<Arc<dyn Tool>>, Vec<McpError>) {
    server_tools_checked(server, |_| Ok::<(), String>(()))
}

/// [`server_tools`] with `check` run on each tool (`ishiki_core::check_tool`, which compiles
/// the input schema as the runtime will): a tool it refuses is left out with an error of kind
/// [`McpErrorKind::InvalidTool`] giving its reason, so one broken tool cannot stop a runtime
/// from building.
pub fn server_tools_checked<E: std::fmt::Display>(
    server: &Arc<McpServer>,
    check: impl Fn(&dyn Tool) -> Result<(), E>,
) -> (Vec<Arc<dyn Tool>>, Vec<McpError>) {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut errors = duplicate_errors(server);
    for listed in server.listed_tools() {
        match McpTool::new(server.clone(), &listed) {
            Ok(tool) => match check(&tool) {
                Ok(()) => tools.push(Arc::new(tool)),
                Err(why) => errors.push(McpError::new(
                    McpErrorKind::InvalidTool,
                    server.name(),
                    format!(
                        "mcp server `{}`: tool `{}` is left out: {why}",
                        server.name(),
                        listed.name
                    ),
                )),
            },
            Err(e) => errors.push(e),
        }
    }
    (tools, errors)
}

/// One error per name the server's last listing gave twice (the first tool of the name is
/// kept).
fn duplicate_errors(server: &McpServer) -> Vec<McpError> {
    server
        .duplicate_names()
        .into_iter()
        .map(|name| {
            McpError::new(
                McpErrorKind::InvalidTool,
                server.name(),
                format!(
                    "mcp server `{}`: tool `{name}` is listed more than once; only the first is offered",
                    server.name()
                ),
            )
        })
        .collect()
}

/// What changed in a server's tool list, as Ishiki tools.
#[derive(Debug, Default)]
pub struct ToolsDelta {
    /// New tools, and tools whose definition changed (they replace the old ones).
    pub added: Vec<Arc<dyn Tool>>,
    /// Ishiki names (`<server>_<tool>`, or the distinct name the tool was given) of tools the
    /// server no longer lists.
    pub removed: Vec<String>,
    /// One error per listed tool left out (an input schema too large, a name listed twice).
    pub errors: Vec<McpError>,
}

/// Lists `server`'s tools again ([`McpServer::refresh_tools`]) and returns the change as
/// Ishiki tools. A tool whose new definition is invalid (an empty name, a schema too large)
/// is reported and counts as removed; one whose schema does not compile is refused by the
/// runtime in [`apply_tool_changes`], which then removes it too.
pub async fn sync_tools(server: &Arc<McpServer>) -> Result<ToolsDelta, McpError> {
    let change = server.refresh_tools().await?;
    let prefix = &server.config().name;
    // A removed tool was given a name when it was added; one never offered has none to
    // take back.
    let mut delta = ToolsDelta {
        removed: change
            .removed
            .iter()
            .filter_map(|name| server.names().given(prefix, name))
            .collect(),
        errors: duplicate_errors(server),
        ..ToolsDelta::default()
    };
    for tool in &change.added {
        match McpTool::new(server.clone(), tool) {
            Ok(tool) => delta.added.push(Arc::new(tool)),
            Err(e) => {
                delta
                    .removed
                    .extend(server.names().given(prefix, &tool.name));
                delta.errors.push(e);
            }
        }
    }
    Ok(delta)
}

/// Brings the tools of `runtime` (any [`ToolSet`]: `ishiki_core::Runtime` is one) up to date with every server of `servers` whose list changed
/// since it was last read; call it before preparing each request. Added tools join like any
/// tool added after start and are announced in the next step's catalog delta; removed ones
/// stay in the native list, are announced as no longer available, and calling them fails
/// with a clear error (`Runtime::add_tool`, `Runtime::remove_tool`). Returns one error per
/// server that could not be listed and per tool left out; the others are still applied.
pub async fn apply_tool_changes<S: ToolSet + ?Sized>(
    servers: &[Arc<McpServer>],
    runtime: &mut S,
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
            let name = tool.definition().name;
            if let Err(e) = runtime.add_tool(tool) {
                // The set refused the new definition (a schema that does not compile): the
                // tool counts as removed, so its old definition is not called by mistake.
                runtime.remove_tool(&name);
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

#[cfg(test)]
mod tests {
    //! The schema bound applied before the runtime compiles a tool's input schema.

    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_node_count_stops_just_past_the_limit() {
        let wide = Value::Array(vec![json!(1); 50]);
        assert_eq!(count_nodes(&wide, 10), 11);
        assert_eq!(count_nodes(&json!({ "a": [1, 2] }), 10), 4);
    }
}
