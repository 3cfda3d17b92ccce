//! Snapshots of rendered requests, media data redacted: what each API receives for one
//! scenario (Anthropic: recent-pruning's last request; OpenAI Chat Completions and Responses:
//! tool-discovery's last request; Responses also recent-pruning's, for `input_image`).

use ishiki_provider::{
    AnthropicOptions, OpenAiOptions, ResponsesOptions, render_anthropic, render_openai,
    render_responses,
};
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
                    ("url" | "image_url", Value::String(s)) if s.starts_with("data:") => {
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

#[test]
fn responses_tool_discovery_last_request() {
    let request = scenario("tool-discovery").pop().unwrap();
    let options = ResponsesOptions {
        prompt_cache_key: Some("ishiki-test".into()),
        ..ResponsesOptions::new("gpt-test")
    };
    let mut body = render_responses(&request, &options);
    redact(&mut body);
    insta::assert_json_snapshot!(body);
}

#[test]
fn responses_recent_pruning_last_request() {
    let request = scenario("recent-pruning").pop().unwrap();
    let mut body = render_responses(&request, &ResponsesOptions::new("gpt-test"));
    redact(&mut body);
    insta::assert_json_snapshot!(body);
}
