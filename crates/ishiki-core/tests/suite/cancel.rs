//! A step's future dropped at any await (issue 26): an embedder that cancels a step (a closed
//! connection, a timeout around `step_with`) leaves the runtime and its store consistent. The
//! same runtime goes on (calls cut while they ran are answered as interrupted, as a reopened
//! runtime answers them), every call in its next request has a result, and a runtime reopened
//! from the store projects the very same request.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use ishiki_core::{
    Durability, Model, ModelError, ModelResponse, Part, Request, Runtime, RuntimeErrorKind, Tool,
    ToolCall, ToolContext, ToolDef, ToolError,
};
use serde_json::{Value, json};

use super::runtime::{assembly, clock_at};

/// Polls `future` at most `polls` times; `None` when it was still pending then (it is dropped
/// there, at whatever await it had reached).
pub(crate) struct Cut<F> {
    pub(crate) future: Pin<Box<F>>,
    pub(crate) polls: usize,
}

impl<F: Future> Future for Cut<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.polls == 0 {
            return Poll::Ready(None);
        }
        self.polls -= 1;
        match self.future.as_mut().poll(cx) {
            Poll::Ready(out) => Poll::Ready(Some(out)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Awaits, yielding `n` times first: each yield is an await a cancellation can land on.
pub(crate) async fn yields(n: usize) {
    for _ in 0..n {
        tokio::task::yield_now().await;
    }
}

/// Answers by the request's length: a call of `slow`, a `search`, a call of the deferred
/// `hidden` once found, then text; the cycle repeats. Each answer takes three awaits.
#[derive(Debug, Default)]
pub(crate) struct Model4 {
    answered: AtomicUsize,
}

#[async_trait]
impl Model for Model4 {
    async fn respond(&self, request: &Request) -> Result<ModelResponse, ModelError> {
        yields(3).await;
        let k = self.answered.fetch_add(1, Ordering::Relaxed);
        let id = format!("c{}", request.messages.len());
        let call = |name: &str, input: Value| {
            ModelResponse::from_calls([ToolCall {
                id: id.clone(),
                name: name.to_owned(),
                input,
            }])
        };
        Ok(match k % 4 {
            0 => call("slow", json!({ "n": k })),
            1 => call("search", json!({ "query": "hidden helper" })),
            2 => call("hidden", json!({})),
            _ => ModelResponse::from_text("done"),
        })
    }
}

/// A resident tool that takes four awaits.
#[derive(Debug)]
pub(crate) struct Slow;

#[async_trait]
impl Tool for Slow {
    fn definition(&self) -> ToolDef {
        ToolDef::new(
            "slow",
            "Answers after a while.",
            json!({ "type": "object", "properties": { "n": { "type": "integer" } } }),
        )
        .with_resident(true)
    }

    async fn execute(&self, input: Value, _: &ToolContext) -> Result<Value, ToolError> {
        yields(4).await;
        Ok(json!(format!("slow {}", input["n"])))
    }
}

/// A deferred tool, found with `search`.
#[derive(Debug)]
pub(crate) struct Hidden;

#[async_trait]
impl Tool for Hidden {
    fn definition(&self) -> ToolDef {
        ToolDef::new(
            "hidden",
            "A hidden helper tool.",
            json!({ "type": "object" }),
        )
    }

    async fn execute(&self, _: Value, _: &ToolContext) -> Result<Value, ToolError> {
        yields(2).await;
        Ok(json!("hidden"))
    }
}

async fn open(dir: &std::path::Path) -> Runtime {
    Runtime::builder(assembly("toolsearch: { enable: true }\n", "seeing"), dir)
        .clock(clock_at(Duration::ZERO))
        .durability(Durability::Normal)
        .tool(Arc::new(Slow))
        .tool(Arc::new(Hidden))
        .build()
        .await
        .expect("the runtime builds")
}

/// Every call in the request has exactly one result.
pub(crate) fn calls_answered(request: &Request) -> Result<(), String> {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for part in request.messages.iter().flat_map(|m| &m.content) {
        match part {
            Part::ToolCall { id, .. } => calls.push(id.clone()),
            Part::ToolResult { call_id, .. } => results.push(call_id.clone()),
            _ => {}
        }
    }
    calls.sort();
    results.sort();
    if calls == results {
        Ok(())
    } else {
        Err(format!("calls {calls:?}, results {results:?}"))
    }
}

/// `warm` whole steps, each after a user message, then one more step cut after `polls` polls;
/// `None` when the cut landed before it finished (a step that finished must have succeeded).
pub(crate) async fn warm_then_cut(
    rt: &mut Runtime,
    model: &Model4,
    warm: usize,
    polls: usize,
) -> Option<Result<Vec<ishiki_core::CallReport>, ishiki_core::RuntimeError>> {
    for k in 0..warm {
        rt.add_user_message(&format!("warm{k}"), "go", &[])
            .await
            .expect("user message");
        rt.step_with(model).await.expect("a whole step");
    }
    rt.add_user_message("m", "go on", &[])
        .await
        .expect("user message");
    let finished = Cut {
        future: Box::pin(rt.step_with(model)),
        polls,
    }
    .await;
    if let Some(outcome) = &finished {
        outcome
            .as_ref()
            .expect("a step that ran to its end succeeds");
    }
    finished
}

/// A step cut while its calls ran: the next `step_with` settles them (as interrupted) and goes
/// on, without the embedder calling `execute` first.
#[tokio::test]
async fn the_step_after_a_cut_one_just_works() {
    for polls in 0..40 {
        let dir = tempfile::tempdir().expect("tempdir");
        let model = Model4::default();
        let mut rt = open(dir.path()).await;
        rt.add_user_message("m", "go", &[])
            .await
            .expect("user message");
        let cut = Cut {
            future: Box::pin(rt.step_with(&model)),
            polls,
        }
        .await;
        // Only a cut that left the response's calls waiting is the case here.
        match rt.prepare().await {
            Err(e) if cut.is_none() && e.kind() == RuntimeErrorKind::Usage => {}
            Ok(prepared) => {
                rt.abandon(prepared);
                continue;
            }
            Err(e) => panic!("cut at poll {polls}: {e}"),
        }
        let reports = rt.step_with(&model).await.expect("the next step");
        assert_eq!(reports.len(), 1, "{reports:?}");
        assert_eq!(reports[0].name, "search", "the next response's call ran");
        return;
    }
    panic!("no cut landed while the calls ran");
}

#[tokio::test]
async fn a_step_dropped_at_any_await_leaves_the_runtime_and_its_store_consistent() {
    let (mut before_commit, mut during_calls) = (0, 0);
    // The cut step is each kind in turn (a call, a search, the found tool, text); past 40
    // polls every step finishes, so the last cuts let it run whole.
    for (warm, polls) in (0..4).flat_map(|warm| (0..40).map(move |polls| (warm, polls))) {
        let dir = tempfile::tempdir().expect("tempdir");
        let model = Model4::default();
        let mut rt = open(dir.path()).await;
        // Some history first.
        let finished = warm_then_cut(&mut rt, &model, warm + 4, polls).await;

        // The same runtime goes on. A response committed before the cut has calls waiting,
        // which run first.
        let waiting = match rt.prepare().await {
            Ok(prepared) => {
                rt.abandon(prepared);
                false
            }
            Err(e) if e.kind() == RuntimeErrorKind::Usage => {
                rt.execute().await.expect("the waiting calls run");
                true
            }
            Err(e) => panic!("after a cut at poll {polls} of step kind {warm}: {e}"),
        };
        let prepared = rt.prepare().await.expect("the next request");
        let in_process = prepared.request.clone();
        rt.abandon(prepared);
        calls_answered(&in_process)
            .unwrap_or_else(|e| panic!("cut at poll {polls} of step kind {warm}: {e}"));
        drop(rt);

        // Reopened from the store: what was committed, and nothing else.
        let mut reopened = open(dir.path()).await;
        let request = reopened
            .prepare()
            .await
            .unwrap_or_else(|e| panic!("cut at poll {polls} of step kind {warm}: reopening: {e}"))
            .request;
        calls_answered(&request)
            .unwrap_or_else(|e| panic!("cut at poll {polls} of step kind {warm}: {e}"));
        // And the reopened runtime steps on.
        reopened
            .add_user_message("after", "and now?", &[])
            .await
            .expect("user message");
        reopened.step_with(&model).await.unwrap_or_else(|e| {
            panic!("cut at poll {polls} of step kind {warm}: the next step: {e}")
        });
        // The runtime that went on answered the cut calls as interrupted, as the reopened
        // one did (never running them twice behind the model's back): the same request.
        if waiting {
            during_calls += 1;
            let last_results: Vec<&str> = in_process
                .messages
                .iter()
                .rev()
                .find(|m| {
                    m.content
                        .iter()
                        .any(|p| matches!(p, Part::ToolResult { .. }))
                })
                .into_iter()
                .flat_map(|m| &m.content)
                .filter_map(|p| match p {
                    Part::ToolResult { text, .. } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            assert!(
                !last_results.is_empty()
                    && last_results.iter().all(|t| t.contains("was interrupted")),
                "cut at poll {polls} of step kind {warm}: {last_results:?}"
            );
        } else {
            before_commit += usize::from(finished.is_none());
        }
        assert_eq!(
            in_process, request,
            "cut at poll {polls} of step kind {warm}: the runtime that went on and the reopened one differ"
        );
    }
    assert!(
        before_commit > 0 && during_calls > 0,
        "the cuts landed before a commit ({before_commit}) and while calls ran ({during_calls})"
    );
}

/// Two requests prepared, one committed with calls: the other is refused until those calls
/// have run, so committing it cannot drop them.
#[tokio::test]
async fn a_second_response_is_refused_while_the_first_ones_calls_wait() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = open(dir.path()).await;
    rt.add_user_message("m", "go", &[])
        .await
        .expect("user message");
    let first = rt.prepare().await.expect("a request");
    let second = rt.prepare().await.expect("another request");
    let call = ToolCall {
        id: "c1".to_owned(),
        name: "slow".to_owned(),
        input: json!({ "n": 1 }),
    };
    rt.commit(first, ModelResponse::from_calls([call]))
        .await
        .expect("the first response");
    let error = rt
        .commit(second, ModelResponse::from_text("done"))
        .await
        .expect_err("refused while c1 waits");
    assert_eq!(error.kind(), RuntimeErrorKind::Usage);
    assert!(
        error.message().contains("call execute"),
        "{}",
        error.message()
    );
    let reports = rt.execute().await.expect("c1 runs");
    assert_eq!(reports[0].text, "slow 1");
}
