//! Every projected request of every example scenario validates against JSON Schemas generated
//! from the providers' official TypeScript SDKs (`@anthropic-ai/sdk`, `openai` on npm).
//!
//! The schemas are not committed: `tests/provider-schemas.sh` fetches the pinned SDKs from the
//! npm registry into the git-ignored `<repo>/.tools/provider-schemas/` the first time and
//! generates them with `ts-json-schema-generator` (about 15 s); later runs reuse them.

use std::path::{Path, PathBuf};
use std::process::Command;

use ishiki_provider::{AnthropicOptions, OpenAiOptions, render_anthropic, render_openai};
use serde_json::{Value, json};

use super::common::cases;

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/provider-schemas")
}

fn schema(name: &str) -> Value {
    let dir = schemas_dir();
    let file = dir.join(name);
    if !file.exists() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/provider-schemas.sh");
        let status = Command::new("bash").arg(&script).arg(&dir).status();
        assert!(
            matches!(status, Ok(s) if s.success()),
            "cannot generate the provider schemas with {} (needs node, npm and the npm registry): {status:?}",
            script.display()
        );
    }
    serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap()
}

fn validate_all(schema: &Value, render: &dyn Fn(&ishiki_core::Request) -> Value) {
    let validator = jsonschema::validator_for(schema).unwrap();
    let mut checked = 0;
    for case in cases() {
        let body = render(&case.request);
        let errors: Vec<String> = validator
            .iter_errors(&body)
            .take(5)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{} step {}: {}",
            case.scenario,
            case.step,
            errors.join("\n")
        );
        checked += 1;
    }
    assert!(checked >= 60);
}

#[test]
fn every_example_request_matches_the_sdk_schemas() {
    // One test for both, so the schemas are generated once even when tests run in parallel.
    let anthropic = schema("anthropic.schema.json");
    let openai = schema("openai.schema.json");
    validate_all(&anthropic, &|r| {
        render_anthropic(r, &AnthropicOptions::new("claude-test", 1024))
    });
    validate_all(&openai, &|r| {
        render_openai(r, &OpenAiOptions::new("gpt-test"))
    });

    // The schemas do reject wrong shapes: a `tool` role, an image without its source.
    let anthropic = jsonschema::validator_for(&anthropic).unwrap();
    let openai = jsonschema::validator_for(&openai).unwrap();
    let bad_role =
        json!({ "model": "m", "max_tokens": 1, "messages": [{ "role": "tool", "content": "x" }] });
    assert!(!anthropic.is_valid(&bad_role));
    let bad_image = json!({ "model": "m", "max_tokens": 1,
        "messages": [{ "role": "user", "content": [{ "type": "image", "data": "AAAA" }] }] });
    assert!(!anthropic.is_valid(&bad_image));
    let bad_call = json!({ "model": "m", "messages": [{ "role": "assistant",
        "tool_calls": [{ "id": "c", "type": "function", "function": { "name": "read", "arguments": {} } }] }] });
    assert!(!openai.is_valid(&bad_call));
    let bad_tool = json!({ "model": "m", "messages": [{ "role": "tool", "content": "x" }] });
    assert!(!openai.is_valid(&bad_tool));
}
