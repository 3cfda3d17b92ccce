//! Messages between the host and the engine, and their JSON-lines form on a worker's pipes.
//!
//! Host → worker (stdin): one `run`, then a `reply` per tool call. Worker → host (stdout):
//! `ready` once the engine is built, then `call` and `console` lines, and finally `done` or
//! `failed`. JSON text produced by `JSON.stringify` never holds a raw newline, so a line is
//! always one message; the worker embeds such text verbatim instead of re-encoding it.

use crate::error::ErrorKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Deepest JSON nesting that crosses the boundary. `serde_json` refuses more than 128 levels
/// and a message adds one, so values are held to this with room to spare.
pub(crate) const MAX_JSON_DEPTH: usize = 100;

/// Environment variable that starts a binary in worker mode; its value is the engine config.
pub(crate) const WORKER_ENV: &str = "ISHIKI_CODEMODE_WORKER";

/// A message to the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum ToEngine {
    /// Run this program with these tool names available, `Date.now()` at `clock_ms`.
    Run {
        code: String,
        tools: Vec<String>,
        clock_ms: u64,
    },
    /// The outcome of tool call `id`: exactly one of `ok` and `err`.
    Reply {
        id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ok: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        err: Option<String>,
    },
}

/// A message to the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum ToHost {
    /// The engine is built and waits for its program.
    Ready,
    /// The program calls a tool.
    Call { id: u64, tool: String, input: Value },
    /// One line of `console` output.
    Console { line: String },
    /// The program returned this value.
    Done { value: Value },
    /// The program failed.
    Failed { kind: ErrorKind, message: String },
}

/// A `call` line around input JSON that is already valid text.
pub(crate) fn call_line(id: u64, tool: &str, input_json: &str) -> String {
    let tool = Value::String(tool.to_owned());
    format!("{{\"t\":\"call\",\"id\":{id},\"tool\":{tool},\"input\":{input_json}}}\n")
}

/// A `done` line around value JSON that is already valid text.
pub(crate) fn done_line(value_json: &str) -> String {
    format!("{{\"t\":\"done\",\"value\":{value_json}}}\n")
}

/// Any other message as one line.
pub(crate) fn line<T: Serialize>(message: &T) -> String {
    // Serializing these plain enums cannot fail: every map key is a string.
    let mut text = serde_json::to_string(message).unwrap_or_default();
    text.push('\n');
    text
}

/// The deepest array/object nesting in JSON text, without parsing it.
pub(crate) fn json_depth(text: &str) -> usize {
    let mut depth = 0usize;
    let mut max = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text.as_bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_round_trip() {
        let call = call_line(7, "read", r#"{"url":"a\nb"}"#);
        assert_eq!(call.matches('\n').count(), 1);
        let parsed: ToHost = serde_json::from_str(call.trim_end()).unwrap();
        assert_eq!(
            parsed,
            ToHost::Call {
                id: 7,
                tool: "read".to_owned(),
                input: json!({ "url": "a\nb" })
            }
        );
        let done: ToHost = serde_json::from_str(done_line("[1,2]").trim_end()).unwrap();
        assert_eq!(
            done,
            ToHost::Done {
                value: json!([1, 2])
            }
        );
        let reply = ToEngine::Reply {
            id: 1,
            ok: None,
            err: Some("boom".to_owned()),
        };
        let text = line(&reply);
        assert_eq!(text, "{\"t\":\"reply\",\"id\":1,\"err\":\"boom\"}\n");
        assert_eq!(
            serde_json::from_str::<ToEngine>(text.trim_end()).unwrap(),
            reply
        );
    }

    #[test]
    fn depth_ignores_brackets_in_strings() {
        assert_eq!(json_depth("1"), 0);
        assert_eq!(json_depth(r#"{"a":[1,{"b":"[[[{"}]}"#), 3);
        assert_eq!(json_depth(r#"["\"[", [[]]]"#), 3);
    }
}
