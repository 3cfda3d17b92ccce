//! Snapshots of rendered requests, media data redacted: what each API receives for one
//! scenario (Anthropic: recent-pruning's last request; OpenAI: tool-discovery's last request).

use ishiki_provider::{AnthropicOptions, OpenAiOptions, render_anthropic, render_openai};
use serde_json::Value;

use super::common::scenario;

/// Replaces base64 payloads by their length, so snapshots stay readable.
fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match (key.as_str(), &*v) {
                    ("data", Value::String(s)) => {
                        *v = Value::String(format!("<{} base64 chars>", s.len()))
                    }
                    ("url", Value::String(s)) if s.starts_with("data:") => {
                        let head = s.split(',').next().unwrap_or_default();
                        *v = Value::String(format!("{head},<{} chars>", s.len()));
                    }
                    _ => redact(v),
                }
            }
        }
        Value::Array(list) => list.iter_mut().for_each(redact),
        _ => {}
    }
}

#[test]
fn anthropic_recent_pruning_last_request() {
    let request = scenario("recent-pruning").pop().unwrap();
    let mut body = render_anthropic(&request, &AnthropicOptions::new("claude-test", 4096));
    redact(&mut body);
    insta::assert_json_snapshot!(body);
}

#[test]
fn openai_tool_discovery_last_request() {
    let request = scenario("tool-discovery").pop().unwrap();
    let mut body = render_openai(&request, &OpenAiOptions::new("gpt-test"));
    redact(&mut body);
    insta::assert_json_snapshot!(body);
}
