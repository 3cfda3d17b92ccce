//! `ishiki mcp-conformance-client URL` (hidden): the client the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, run by `cargo xtask mcp-conformance`) starts with its
//! test server's URL. It connects the way `ishiki chat` connects a profile's `url:` server
//! (`ishiki_mcp::McpServer` over Streamable HTTP), lists the tools and calls each one with
//! arguments made from its input schema, as a model would, accepting any elicitation form with
//! its defaults; the suite judges what the server saw.

use std::io::Write;
use std::time::Duration;

use std::sync::Arc;

use ishiki_mcp::{AcceptDefaults, McpServer, McpServerConfig};
use serde_json::{Map, Value, json};

/// How long the suite's server may take for one request.
const TIMEOUT: Duration = Duration::from_secs(20);

/// Runs the client against `url`; the exit code is 0 when every step succeeded.
pub fn run(url: &str, err: &mut impl Write) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(err, "ishiki mcp-conformance-client: no async runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async {
        let config = McpServerConfig::http("conformance", url).timeout(TIMEOUT);
        // A person who accepts every form as offered: each field takes its default.
        let server = match McpServer::start_with(config, Arc::new(AcceptDefaults)).await {
            Ok(server) => server,
            Err(e) => {
                let _ = writeln!(err, "ishiki mcp-conformance-client: {e}");
                return 1;
            }
        };
        let mut failed = 0u8;
        for tool in server.listed_tools() {
            let arguments = sample_arguments(&Value::Object((*tool.input_schema).clone()));
            match server.call(&tool.name, arguments).await {
                Ok(result) => {
                    let _ = writeln!(err, "called {}: {result}", tool.name);
                }
                Err(e) => {
                    let _ = writeln!(err, "ishiki mcp-conformance-client: {e}");
                    failed = 1;
                }
            }
        }
        server.stop().await;
        failed
    })
}

/// Arguments for a tool: every property its schema requires, with a plain value of its type
/// (its `default` when it has one).
fn sample_arguments(schema: &Value) -> Value {
    let mut arguments = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let property = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
        arguments.insert(name.to_owned(), sample_value(property));
    }
    Value::Object(arguments)
}

fn sample_value(schema: &Value) -> Value {
    if let Some(default) = schema.get("default") {
        return default.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("number" | "integer") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("object") => sample_arguments(schema),
        _ => json!("x"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_arguments_fill_what_the_schema_requires() {
        let schema = json!({
            "type": "object",
            "properties": { "a": { "type": "number" }, "b": { "type": "integer" }, "c": { "type": "string" } },
            "required": ["a", "b"]
        });
        assert_eq!(sample_arguments(&schema), json!({ "a": 1, "b": 1 }));
    }
}
