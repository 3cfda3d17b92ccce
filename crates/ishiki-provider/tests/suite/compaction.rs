//! The provider's own compaction (issue 23) against the enforcing Anthropic fake (`fake.rs`):
//! the real runtime and the real HTTP model, a session that outgrows its window many times
//! over. The runtime asks the model to compact natively, the fake answers with a signed block,
//! and every later request must send that block back first, unchanged, or the fake refuses it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ishiki_core::context::Window;
use ishiki_core::{
    Durability, EditPolicy, ModelsDoc, Profile, Runtime, Tool, ToolContext, ToolDef, ToolError,
    assemble,
};
use ishiki_provider::{HttpConfig, HttpModel, Protocol};
use serde_json::{Value, json};

use super::fake::{Api, COMPACT_BETA, check_anthropic, compaction_answer, start};

/// `survey {n}`: a long report (about 1,500 tokens) that must never be folded.
#[derive(Debug)]
struct Survey;

#[async_trait]
impl Tool for Survey {
    fn definition(&self) -> ToolDef {
        ToolDef {
            resident: true,
            ..ToolDef::new(
                "survey",
                "A long survey of one district.",
                json!({ "type": "object", "properties": { "n": { "type": "integer" } } }),
            )
        }
    }

    async fn execute(&self, input: Value, _: &ToolContext) -> Result<Value, ToolError> {
        let n = input["n"].as_u64().unwrap_or(0);
        Ok(Value::String(
            (1..=60)
                .map(|line| format!("district {n} row {line:>3} {}\n", "#".repeat(80)))
                .collect(),
        ))
    }
}

async fn open(state: &std::path::Path, workspace: &std::path::Path) -> Runtime {
    let profile = Profile::from_yaml(
        "context: { foldAt: 0.6, compactAt: 0.8, keep: 1, neverFold: [survey] }\n",
    )
    .unwrap();
    let models =
        ModelsDoc::from_yaml("models:\n  main: { input: [text], toolCalling: native }\n").unwrap();
    Runtime::builder(assemble(profile, models, "main").unwrap(), state)
        .workspace_root(workspace)
        .durability(Durability::Normal)
        .edit_policy(EditPolicy::AtUserTurns)
        .window(Window {
            tokens: 16_000,
            output: 1_000,
        })
        .tool(Arc::new(Survey))
        .build()
        .await
        .unwrap()
}

/// Steps the session `steps` times, a user turn after each answer without calls; returns how
/// many steps ended with a native compaction in force.
async fn survey(runtime: &mut Runtime, model: &HttpModel, steps: usize) -> usize {
    let mut native = 0;
    for step in 1..=steps {
        let reports = runtime
            .step_with(model)
            .await
            .unwrap_or_else(|e| panic!("step {step}: {e}"));
        if reports.is_empty() {
            runtime
                .add_user_message(&format!("m{step}"), "Go on with the next districts.", &[])
                .await
                .unwrap();
        }
        let compaction = runtime.context().compaction.as_ref();
        if compaction.is_some_and(|c| c.native.is_some()) {
            native += 1;
        }
    }
    native
}

fn first_block(body: &Value) -> &Value {
    &body["messages"][0]["content"][0]
}

#[tokio::test]
async fn a_session_past_its_window_compacts_natively_and_sends_each_block_back_first_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let state = dir.path().join("state");
    let mut runtime = open(&state, &workspace).await;
    runtime
        .add_user_message("m0", "Survey every district, then report.", &[])
        .await
        .unwrap();
    // Thinking in every answer; four surveys, then an answer that ends the turn.
    let (url, log) = start(
        Api::Anthropic,
        Box::new(|n, _| {
            let mut content = vec![json!({ "type": "thinking", "thinking": format!("step {n}"),
                "signature": "" })];
            content.push(if n % 5 == 0 {
                json!({ "type": "text", "text": format!("Surveys so far are done ({n}).") })
            } else {
                json!({ "type": "tool_use", "id": format!("toolu_{n}"), "name": "survey",
                    "input": { "n": n } })
            });
            content
        }),
    )
    .await;
    let model = HttpModel::new(HttpConfig {
        stream: false,
        max_retries: 0,
        backoff: Duration::ZERO,
        preserved_thinking: true,
        system_messages: true,
        native_compaction: true,
        ..HttpConfig::new(Protocol::Anthropic, &url, "claude-opus-5-5")
    })
    .unwrap();

    // The fake reports 10 input tokens a request: calibration takes the estimate to its floor
    // (a quarter), so the window fills four times slower than the text grows.
    let native_reports = survey(&mut runtime, &model, 120).await;

    {
        let log = log.lock().unwrap();
        assert_eq!(log.rejected, Vec::<String>::new());
        assert!(
            log.compactions.len() >= 3,
            "the session compacted natively {} times",
            log.compactions.len()
        );
        assert!(native_reports > 0);
        // No text summary was asked for: the provider compacted every time.
        assert!(
            !log.bodies
                .iter()
                .any(|b| b.to_string().contains("write a summary of it")),
            "a text summary request was sent"
        );
        // After each compaction, every request opens with the newest block, byte for byte, and
        // each compaction request carried the previous block first too (the chain).
        let mut newest: Option<Value> = None;
        let mut made = log.compactions.iter();
        let mut after = 0;
        for body in &log.bodies {
            if let Some(block) = &newest {
                assert_eq!(first_block(body), block);
                assert_eq!(body["messages"][0]["role"], "assistant");
                after += 1;
            }
            if body.get("compaction").is_some() {
                newest = made.next().cloned();
            }
        }
        assert!(after > 10, "{after} requests followed a compaction");
        // Thinking made after a compaction is replayed against it and passes the prefix check.
        assert!(log.thinking_valid > 20, "{}", log.thinking_valid);
    }

    // A restart projects the identical request: the block is in the committed state.
    let prepared = runtime.prepare().await.unwrap();
    let before = model.render(&prepared.request);
    runtime.abandon(prepared);
    drop(runtime);
    let mut reopened = open(&state, &workspace).await;
    let prepared = reopened.prepare().await.unwrap();
    assert_eq!(model.render(&prepared.request), before);
    assert_eq!(first_block(&before)["type"], "compaction");
}

#[tokio::test]
async fn a_responses_session_compacts_with_the_compact_endpoint_and_sends_the_window_back_first() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let mut runtime = open(&dir.path().join("state"), &workspace).await;
    runtime
        .add_user_message("m0", "Survey every district, then report.", &[])
        .await
        .unwrap();
    let (url, log) = start(
        Api::Responses,
        Box::new(|n, _| {
            let mut output = vec![json!({ "type": "reasoning", "id": format!("rs_{n}"),
                "summary": [], "encrypted_content": format!("enc-{n}") })];
            output.push(if n % 5 == 0 {
                json!({ "type": "message", "role": "assistant", "id": format!("msg_{n}"),
                    "content": [{ "type": "output_text", "text": format!("Done ({n}).") }] })
            } else {
                json!({ "type": "function_call", "id": format!("fc_{n}"),
                    "call_id": format!("call_{n}"), "name": "survey",
                    "arguments": json!({ "n": n }).to_string() })
            });
            output
        }),
    )
    .await;
    let model = HttpModel::new(HttpConfig {
        stream: false,
        max_retries: 0,
        backoff: Duration::ZERO,
        native_compaction: true,
        ..HttpConfig::new(Protocol::OpenAiResponses, &url, "gpt-5.6")
    })
    .unwrap();
    assert!(survey(&mut runtime, &model, 120).await > 0);
    let log = log.lock().unwrap();
    assert_eq!(log.rejected, Vec::<String>::new());
    assert!(
        log.compactions.len() >= 3,
        "{} compactions",
        log.compactions.len()
    );
    // Every request after a compaction (the next compaction request too) carries the newest
    // window verbatim: the kept user messages, then its one compaction item. A compaction
    // request is the one without tools (`ResponseCompactParams` has none).
    let mut newest: Option<&Vec<Value>> = None;
    let mut made = log.compactions.iter();
    let mut after = 0;
    for body in &log.bodies {
        let input = body["input"].as_array().unwrap();
        if let Some(window) = newest {
            let at = input
                .iter()
                .position(|i| i["type"] == "compaction")
                .expect("the compaction item is sent back");
            assert!(at + 1 >= window.len());
            assert_eq!(&input[at + 1 - window.len()..=at], window.as_slice());
            after += 1;
        }
        if body.get("tools").is_none() {
            newest = made.next().and_then(Value::as_array);
        }
    }
    assert!(after > 10, "{after} requests followed a compaction");
}

#[test]
fn the_fake_refuses_a_misplaced_edited_forged_or_second_compaction_block() {
    let user =
        |text: &str| json!({ "role": "user", "content": [{ "type": "text", "text": text }] });
    let asking = json!({ "model": "claude-opus-5-5", "max_tokens": 10,
        "compaction": { "type": "summarize" },
        "messages": [user("survey"), { "role": "assistant", "content": [{ "type": "text", "text": "done" }] }] });
    assert!(
        check_anthropic(&asking, "")
            .unwrap_err()
            .contains("Extra inputs")
    );
    assert!(check_anthropic(&asking, COMPACT_BETA).is_ok());
    let mut unfinished = asking.clone();
    unfinished["messages"][1]["content"] =
        json!([{ "type": "tool_use", "id": "t1", "name": "survey", "input": {} }]);
    assert!(
        check_anthropic(&unfinished, COMPACT_BETA)
            .unwrap_err()
            .contains("compaction_incomplete_turn")
    );
    let block = compaction_answer(&asking, 1);
    let later = |first: Vec<Value>, rest: Vec<Value>| {
        let mut messages = vec![json!({ "role": "assistant", "content": first })];
        messages.extend(rest);
        json!({ "model": "claude-opus-5-5", "max_tokens": 10, "messages": messages })
    };
    assert!(check_anthropic(&later(vec![block.clone()], vec![user("next")]), "").is_ok());
    let mut edited = block.clone();
    edited["content"] = json!("a kinder summary");
    assert!(
        check_anthropic(&later(vec![edited], vec![user("next")]), "")
            .unwrap_err()
            .contains("compaction_content_mismatch")
    );
    let mut forged = block.clone();
    forged["encrypted_content"] = json!("enc-other");
    assert!(
        check_anthropic(&later(vec![forged], vec![user("next")]), "")
            .unwrap_err()
            .contains("compaction_signature_invalid")
    );
    let misplaced = json!({ "model": "claude-opus-5-5", "max_tokens": 10,
        "messages": [user("next"), { "role": "assistant", "content": [block.clone()] }, user("more")] });
    assert!(
        check_anthropic(&misplaced, "")
            .unwrap_err()
            .contains("compaction_block_misplaced")
    );
    let twice = later(
        vec![block.clone()],
        vec![
            user("next"),
            json!({ "role": "assistant", "content": [block.clone()] }),
            user("more"),
        ],
    );
    assert!(
        check_anthropic(&twice, "")
            .unwrap_err()
            .contains("compaction_block_ambiguous")
    );
    // A failed compaction (null content) is a no-op anywhere.
    let failed = json!({ "type": "compaction", "content": null, "encrypted_content": null });
    assert!(
        check_anthropic(
            &later(vec![block.clone()], vec![user("next"), json!({ "role": "assistant", "content": [failed, { "type": "text", "text": "ok" }] }), user("more")]),
            ""
        )
        .is_ok()
    );
    // A tool the compacted range added is in the block's tool changes: also in `tools`, it
    // is a conflict.
    let adding = json!({ "model": "claude-opus-5-5", "max_tokens": 10,
        "compaction": { "type": "summarize" },
        "messages": [user("survey"),
            { "role": "system", "content": [{ "type": "tool_addition", "tool": { "type": "tool_definition",
                "definition": { "name": "survey", "description": "d", "input_schema": { "type": "object" } } } }] },
            { "role": "assistant", "content": [{ "type": "text", "text": "done" }] }] });
    let with_tool = compaction_answer(&adding, 2);
    assert_eq!(with_tool["tool_changes"].as_array().unwrap().len(), 1);
    let mut conflict = later(vec![with_tool], vec![user("next")]);
    conflict["tools"] =
        json!([{ "name": "survey", "description": "d", "input_schema": { "type": "object" } }]);
    assert!(
        check_anthropic(&conflict, "")
            .unwrap_err()
            .contains("tool_name_conflict")
    );
}
