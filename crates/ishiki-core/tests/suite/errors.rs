//! Errors an embedder can branch on (issue 14): every runtime error has a kind and says whether
//! a retry may work; every failed call reports the kind of its tool error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ishiki_core::{
    CallReport, Durability, Model, ModelError, ModelErrorKind, ModelResponse, Request, Runtime,
    RuntimeErrorKind, Tool, ToolCall, ToolContext, ToolDef, ToolError, ToolErrorKind,
};
use serde_json::{Value, json};

use super::runtime::{assembly, clock_at};

/// Answers with the scripted results, in order.
#[derive(Debug)]
struct Scripted(Mutex<Vec<Result<ModelResponse, ModelError>>>);

#[async_trait]
impl Model for Scripted {
    async fn respond(&self, _: &Request) -> Result<ModelResponse, ModelError> {
        let mut script = self.0.lock().expect("script lock");
        if script.is_empty() {
            return Err(ModelError::permanent("the script has ended"));
        }
        script.remove(0)
    }
}

/// `flaky`: fails as its backend being down.
#[derive(Debug)]
struct Flaky;

#[async_trait]
impl Tool for Flaky {
    fn definition(&self) -> ToolDef {
        ToolDef {
            resident: true,
            ..ToolDef::new(
                "flaky",
                "Fails.",
                json!({ "type": "object", "properties": { "n": { "type": "integer" } } }),
            )
        }
    }

    async fn execute(&self, _input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        Err(ToolError::with_kind(
            ToolErrorKind::Unavailable,
            "the backend answered 503",
        ))
    }
}

async fn runtime(dir: &std::path::Path) -> Runtime {
    Runtime::builder(assembly("{}\n", "seeing"), dir)
        .clock(clock_at(Duration::ZERO))
        .durability(Durability::Normal)
        .tool(Arc::new(Flaky))
        .build()
        .await
        .expect("the runtime builds")
}

fn calls(calls: &[(&str, &str, Value)]) -> ModelResponse {
    ModelResponse::from_calls(calls.iter().map(|(id, name, input)| ToolCall {
        id: (*id).to_owned(),
        name: (*name).to_owned(),
        input: input.clone(),
    }))
}

fn report<'a>(reports: &'a [CallReport], id: &str) -> &'a CallReport {
    reports
        .iter()
        .find(|r| r.call_id == id)
        .expect("a report for the call")
}

#[tokio::test]
async fn a_failed_model_request_says_whether_a_retry_may_work_and_the_step_can_be_retried() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = runtime(dir.path()).await;
    rt.add_user_message("u1", "hello", &[])
        .await
        .expect("a message");
    let model = Scripted(Mutex::new(vec![
        Err(ModelError::retryable("rate limited (HTTP 429)")),
        Err(ModelError::permanent(
            "the provider refused the request (HTTP 400)",
        )),
        Ok(ModelResponse::from_text("hi".to_owned())),
    ]));

    let busy = rt.step_with(&model).await.expect_err("a 429");
    assert_eq!(busy.kind(), RuntimeErrorKind::Model);
    assert_eq!(busy.model_kind(), Some(ModelErrorKind::Retryable));
    assert!(busy.is_retryable());
    assert_eq!(
        busy.message(),
        "the model request failed: rate limited (HTTP 429)"
    );

    let refused = rt.step_with(&model).await.expect_err("a 400");
    assert_eq!(refused.kind(), RuntimeErrorKind::Model);
    assert_eq!(refused.model_kind(), Some(ModelErrorKind::Permanent));
    assert!(!refused.is_retryable());
    assert_eq!(refused.store_kind(), None);

    // Both failures were abandoned: the third try answers.
    let reports = rt.step_with(&model).await.expect("the retry succeeds");
    assert!(reports.is_empty());
}

#[tokio::test]
async fn calls_the_embedder_gets_wrong_are_usage_errors_that_change_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = runtime(dir.path()).await;
    rt.add_user_message("u1", "hello", &[])
        .await
        .expect("a message");
    let again = rt
        .add_user_message("u1", "hello again", &[])
        .await
        .expect_err("the id is taken");
    assert_eq!(again.kind(), RuntimeErrorKind::Usage);
    assert!(!again.is_retryable());
    let unknown = rt.withdraw("nope").await.expect_err("no such message");
    assert_eq!(unknown.kind(), RuntimeErrorKind::Usage);

    let prepared = rt.prepare().await.expect("a request");
    rt.commit(prepared, calls(&[("c1", "flaky", json!({}))]))
        .await
        .expect("a commit");
    let early = rt.prepare().await.expect_err("the calls have not run");
    assert_eq!(early.kind(), RuntimeErrorKind::Usage);
    rt.execute().await.expect("the calls run");
    rt.prepare().await.expect("now it prepares");
}

#[tokio::test]
async fn every_failed_call_reports_its_kind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = runtime(dir.path()).await;
    rt.add_user_message("u1", "go", &[])
        .await
        .expect("a message");
    let prepared = rt.prepare().await.expect("a request");
    rt.commit(
        prepared,
        calls(&[
            ("down", "flaky", json!({})),
            ("unknown", "nope", json!({})),
            ("invalid", "flaky", json!({ "n": "three" })),
            (
                "missing",
                "read",
                json!({ "url": "workspace:///home/workspace/none.txt" }),
            ),
            (
                "escape",
                "read",
                json!({ "url": "workspace:///../../etc/passwd" }),
            ),
        ]),
    )
    .await
    .expect("a commit");
    let reports = rt.execute().await.expect("the calls run");
    let kinds: Vec<(&str, Option<ToolErrorKind>, bool)> = reports
        .iter()
        .map(|r| (r.call_id.as_str(), r.error_kind, r.is_error))
        .collect();
    assert_eq!(
        kinds,
        [
            ("down", Some(ToolErrorKind::Unavailable), true),
            ("unknown", Some(ToolErrorKind::Input), true),
            ("invalid", Some(ToolErrorKind::Input), true),
            ("missing", Some(ToolErrorKind::Input), true),
            ("escape", Some(ToolErrorKind::Input), true),
        ]
    );
    // The model reads the message only.
    assert_eq!(report(&reports, "down").text, "the backend answered 503");
    assert!(ToolError::with_kind(ToolErrorKind::Unavailable, "x").is_retryable());
    assert!(!ToolError::new("x").is_retryable());
    assert_eq!(ToolError::new("x").kind(), ToolErrorKind::Failed);
}

/// TS-7: a runtime built from a profile whose `toolsearch.semantic.model` holds no model fails
/// to build with a configuration error naming the directory; it never searches lexically
/// instead. (With the feature off, the same profile is refused for the missing feature.)
#[tokio::test]
async fn ts7_a_semantic_model_that_cannot_load_fails_the_build_naming_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let missing = dir.path().join("no-model");
    let profile = format!(
        "toolsearch:\n  enable: true\n  semantic: {{ model: {:?} }}\n",
        missing.to_string_lossy()
    );
    let error = Runtime::builder(assembly(&profile, "seeing"), dir.path().join("state"))
        .clock(clock_at(Duration::ZERO))
        .durability(Durability::Normal)
        .build()
        .await
        .expect_err("no model, no runtime");
    assert_eq!(error.kind(), RuntimeErrorKind::Config);
    let message = error.to_string();
    if cfg!(feature = "semantic") {
        assert!(
            message.contains("toolsearch.semantic.model")
                && message.contains(&*missing.to_string_lossy())
                && message.contains("config.json"),
            "{message}"
        );
    } else {
        assert!(message.contains("`semantic` feature"), "{message}");
    }
}
