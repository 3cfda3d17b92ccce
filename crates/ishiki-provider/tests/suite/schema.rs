//! Every projected request of every example scenario validates against JSON Schemas generated
//! from the providers' official TypeScript SDKs (`@anthropic-ai/sdk`, `openai` on npm), for
//! Messages, Chat Completions and Responses — also with reasoning parts in every assistant
//! message, replayed as `thinking`/`redacted_thinking` blocks or `reasoning` items.
//!
//! The schemas are not committed: `tests/provider-schemas.sh` fetches the pinned SDKs from the
//! npm registry into the git-ignored `<repo>/.tools/provider-schemas/` the first time and
//! generates them with `ts-json-schema-generator` (about 15 s); later runs reuse them.

use std::path::{Path, PathBuf};
use std::process::Command;

use ishiki_core::{Part, Reasoning, Request, Role};
use ishiki_provider::{
    ANTHROPIC, AnthropicOptions, OPENAI_RESPONSES, OpenAiOptions, ResponsesOptions, Thinking,
    render_anthropic, render_openai, render_responses,
};
use serde_json::{Value, json};

use super::common::cases;

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/provider-schemas")
}

/// The directory holding the pinned SDKs (their `node_modules`) and the schemas made from
/// them, installed on first use.
pub(crate) fn sdk_dir() -> PathBuf {
    // Tests of this binary run in parallel: one installs, the others wait for it.
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = INSTALL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = schemas_dir();
    // The last schema the script makes (older installs lack it and are made again).
    let file = dir.join("anthropic-beta.schema.json");
    if !file.exists() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/provider-schemas.sh");
        let status = Command::new("bash").arg(&script).arg(&dir).status();
        assert!(
            matches!(status, Ok(s) if s.success()),
            "cannot generate the provider schemas with {} (needs node, npm and the npm registry): {status:?}",
            script.display()
        );
    }
    dir
}

fn schema(name: &str) -> Value {
    let file = sdk_dir().join(name);
    serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap()
}

/// `request` with reasoning of `provider`/`model` at the start of every assistant message.
fn with_reasoning(request: &Request, provider: &str, model: &str) -> Request {
    let mut request = request.clone();
    for (n, m) in request.messages.iter_mut().enumerate() {
        if m.role != Role::Assistant {
            continue;
        }
        let data = if provider == ANTHROPIC {
            vec![
                json!({ "type": "thinking", "thinking": format!("step {n}"), "signature": "EqQBCkYIARgC" }),
                json!({ "type": "redacted_thinking", "data": "EmwKAhgBEgy3va3p" }),
            ]
        } else {
            vec![json!({ "type": "reasoning", "id": format!("rs_{n}"),
                "summary": [{ "type": "summary_text", "text": "Reading the file." }],
                "encrypted_content": "gAAAAABo" })]
        };
        for (k, data) in data.into_iter().enumerate() {
            std::sync::Arc::make_mut(m).content.insert(
                k,
                Part::Reasoning(Reasoning {
                    provider: provider.to_owned(),
                    model: model.to_owned(),
                    data,
                    prefix: None,
                }),
            );
        }
    }
    request
}

fn validate_all(schema: &Value, render: &mut dyn FnMut(&Request) -> Value) {
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
    // One test for all, so the schemas are generated once even when tests run in parallel.
    let anthropic = schema("anthropic.schema.json");
    let openai = schema("openai.schema.json");
    let responses = schema("openai-responses.schema.json");
    validate_all(&anthropic, &mut |r| {
        render_anthropic(r, &AnthropicOptions::new("claude-test", 1024))
    });
    validate_all(&openai, &mut |r| {
        render_openai(r, &OpenAiOptions::new("gpt-test"))
    });
    let responses_options = ResponsesOptions {
        max_output_tokens: Some(1024),
        prompt_cache_key: Some("ishiki-test".into()),
        ..ResponsesOptions::new("gpt-test")
    };
    validate_all(&responses, &mut |r| render_responses(r, &responses_options));

    // With reasoning replayed in every assistant message (the renderers must keep it).
    let mut replayed = 0;
    validate_all(&anthropic, &mut |r| {
        let body = render_anthropic(
            &with_reasoning(r, ANTHROPIC, "claude-test"),
            &AnthropicOptions {
                thinking: Some(Thinking::Budget(1024)),
                // Shapes, not binding: every block is replayed, as on a model that does not
                // bind thinking to its prefix (reasoning.rs tests the binding).
                preserved_thinking: false,
                ..AnthropicOptions::new("claude-test", 2048)
            },
        );
        replayed += body.to_string().matches("\"redacted_thinking\"").count();
        body
    });
    validate_all(&responses, &mut |r| {
        let body = render_responses(
            &with_reasoning(r, OPENAI_RESPONSES, "gpt-test"),
            &responses_options,
        );
        replayed += body.to_string().matches("\"encrypted_content\"").count();
        body
    });
    validate_all(&openai, &mut |r| {
        render_openai(
            &with_reasoning(r, ANTHROPIC, "gpt-test"),
            &OpenAiOptions::new("gpt-test"),
        )
    });
    assert!(replayed >= 100, "{replayed} reasoning blocks replayed");

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
    let responses = jsonschema::validator_for(&responses).unwrap();
    let bad_output =
        json!({ "model": "m", "input": [{ "type": "function_call_output", "output": "x" }] });
    assert!(!responses.is_valid(&bad_output), "call_id is required");
    let bad_image = json!({ "model": "m", "input": [{ "type": "message", "role": "user",
        "content": [{ "type": "input_image", "image_url": "data:image/png;base64,AAAA" }] }] });
    assert!(!responses.is_valid(&bad_image), "detail is required");
}

#[test]
fn a_compaction_request_and_the_request_that_sends_its_block_back_match_the_beta_sdk_schema() {
    use ishiki_core::{Compacted, Message};
    let beta = jsonschema::validator_for(&schema("anthropic-beta.schema.json")).unwrap();
    let check = |body: &Value, what: &str| {
        let errors: Vec<String> = beta
            .iter_errors(body)
            .take(5)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{what}: {}", errors.join("\n"));
    };
    let case = cases().into_iter().last().expect("a recorded request");
    let options = AnthropicOptions::new("claude-test", 1024);
    // The compaction request: the rendered conversation with `compaction` (as the HTTP model
    // sends it).
    let mut asking = render_anthropic(&case.request, &options);
    asking["compaction"] = json!({ "type": "summarize" });
    check(&asking, "the compaction request");
    // The next request opens with the block, verbatim.
    let block = json!({ "type": "compaction", "content": "A summary.", "encrypted_content": "enc",
        "signature": "sig", "tool_changes": [] });
    let mut request = case.request.clone();
    request.messages.insert(
        0,
        std::sync::Arc::new(Message {
            id: "s9-context-summary".into(),
            role: Role::Assistant,
            created_at: "2026-01-01T00:00:00Z".into(),
            content: vec![Part::Compaction(Compacted {
                provider: ANTHROPIC.into(),
                model: "claude-test".into(),
                data: block.clone(),
                summary: Some("A summary.".into()),
            })],
        }),
    );
    let body = render_anthropic(&request, &options);
    assert_eq!(body["messages"][0]["content"][0], block);
    check(&body, "the request after it");
    // The schema does refuse a wrong shape: a compaction mode that does not exist.
    asking["compaction"] = json!({ "type": "truncate" });
    assert!(!beta.is_valid(&asking));

    // OpenAI's compacted window (from `/responses/compact`) opens a Responses input verbatim.
    let responses = jsonschema::validator_for(&schema("openai-responses.schema.json")).unwrap();
    let window = json!([
        { "type": "message", "role": "user", "content": [{ "type": "input_text", "text": "survey" }] },
        { "type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA" }
    ]);
    let mut request = case.request.clone();
    request.messages.insert(
        0,
        std::sync::Arc::new(Message {
            id: "s9-context-summary".into(),
            role: Role::Assistant,
            created_at: "2026-01-01T00:00:00Z".into(),
            content: vec![Part::Compaction(Compacted {
                provider: OPENAI_RESPONSES.into(),
                model: "gpt-test".into(),
                data: window.clone(),
                summary: None,
            })],
        }),
    );
    let body = render_responses(&request, &ResponsesOptions::new("gpt-test"));
    let input = body["input"].as_array().unwrap();
    let at = input
        .iter()
        .position(|i| i["type"] == "compaction")
        .unwrap();
    assert_eq!(json!(input[at - 1..=at]), window);
    assert!(
        responses.is_valid(&body),
        "{:?}",
        responses
            .iter_errors(&body)
            .take(3)
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
}
