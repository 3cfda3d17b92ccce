//! The context engine through the library API (issue 23): folding, compaction, calibration,
//! a provider's "too long", and what a reopened runtime projects.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ishiki_core::context::Window;
use ishiki_core::{
    Durability, ModelResponse, ModelsDoc, Part, Prepared, Profile, Request, Role, Runtime, Tool,
    ToolCall, ToolContext, ToolDef, ToolError, Usage, WorkerSpawn, assemble,
};
use ishiki_resources::ArtifactStore as _;
use serde_json::{Value, json};

use super::runtime::{assembly, clock_at};

/// `report {lines, tag}`: `lines` lines of 60 characters, each naming the tag.
#[derive(Debug)]
struct Report;

#[async_trait]
impl Tool for Report {
    fn definition(&self) -> ToolDef {
        ToolDef {
            resident: true,
            ..ToolDef::new(
                "report",
                "A long report.",
                json!({
                    "type": "object",
                    "properties": { "lines": { "type": "integer" }, "tag": { "type": "string" } },
                    "required": ["lines", "tag"]
                }),
            )
        }
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let lines = input["lines"].as_u64().unwrap_or(1);
        let tag = input["tag"].as_str().unwrap_or("?");
        Ok(Value::String(
            (1..=lines)
                .map(|n| format!("{tag} line {n:>5} {}\n", ".".repeat(40)))
                .collect(),
        ))
    }
}

const PROFILE: &str = "context: { foldAt: 0.5, foldAtLeast: 3000, keep: 1, compactAt: 0.8 }\n";

async fn open(dir: &Path, profile: &str, window: u64) -> Runtime {
    Runtime::builder(assembly(profile, "seeing"), dir)
        .clock(clock_at(Duration::ZERO))
        .codemode_worker(WorkerSpawn::InProcess)
        .durability(Durability::Normal)
        .window(Window {
            tokens: window,
            output: window / 10,
        })
        .tool(Arc::new(Report))
        .build()
        .await
        .expect("the runtime builds")
}

fn report_call(id: &str, lines: u64) -> ModelResponse {
    ModelResponse::from_calls(vec![ToolCall {
        id: id.into(),
        name: "report".into(),
        input: json!({ "lines": lines, "tag": id }),
    }])
}

fn read_call(id: &str, url: &str) -> ModelResponse {
    ModelResponse::from_calls(vec![ToolCall {
        id: id.into(),
        name: "read".into(),
        input: json!({ "url": url }),
    }])
}

/// The text of `call_id`'s result in `request`.
fn result_text<'r>(request: &'r Request, call_id: &str) -> Option<&'r str> {
    request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|p| match p {
            Part::ToolResult {
                call_id: id, text, ..
            } if id == call_id => Some(text.as_str()),
            _ => None,
        })
}

/// Commits `response` to `prepared`, runs its calls, returns the first call's result text.
async fn finish(rt: &mut Runtime, prepared: Prepared, response: ModelResponse) -> Vec<String> {
    rt.commit(prepared, response).await.expect("commit");
    rt.execute()
        .await
        .expect("execute")
        .into_iter()
        .map(|r| r.text)
        .collect()
}

#[tokio::test]
async fn past_fold_at_the_oldest_results_become_stubs_whose_url_reads_back_the_exact_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = open(dir.path(), PROFILE, 16_000).await;
    rt.add_user_message("m1", "survey the reports", &[])
        .await
        .expect("message");
    let mut seen = Vec::new();
    let mut folded_at = None;
    for k in 1..=6 {
        let prepared = rt.prepare().await.expect("prepare");
        if !prepared.context.folded.is_empty() && folded_at.is_none() {
            folded_at = Some((k, prepared.context.clone(), prepared.request.clone()));
        }
        let id = format!("c{k}");
        let texts = finish(&mut rt, prepared, report_call(&id, 250)).await;
        seen.push((id, texts[0].clone()));
    }
    let (k, report, request) = folded_at.expect("a request past foldAt folds");
    assert!(report.estimated_before > 8_000, "{report:?}");
    assert!(report.estimated_after < report.estimated_before);
    // The oldest results went first, at least foldAtLeast tokens in one batch.
    assert_eq!(report.folded[0].call_id, "c1");
    assert!(
        report.estimated_before - report.estimated_after >= 3_000,
        "{report:?}"
    );
    for fold in &report.folded {
        let original = &seen.iter().find(|(id, _)| *id == fold.call_id).unwrap().1;
        let stub = result_text(&request, &fold.call_id).expect("the result part stays");
        assert!(
            stub.starts_with("[folded") && stub.contains(&fold.url),
            "{stub}"
        );
        // The archive holds the exact text the model saw.
        let bytes = ishiki_resources::DiskArtifactStore::open(dir.path().join("artifacts"))
            .expect("artifacts")
            .get(&fold.url)
            .await
            .expect("the archive exists");
        assert_eq!(String::from_utf8(bytes).unwrap(), *original);
    }
    // The newest result (keep: 1) is never folded.
    let newest = format!("c{}", k - 1);
    assert!(report.folded.iter().all(|f| f.call_id != newest));
    // And the model reads a folded result back through `read`: the same text.
    let url = report.folded[0].url.clone();
    let prepared = rt.prepare().await.expect("prepare");
    let texts = finish(&mut rt, prepared, read_call("r1", &url)).await;
    assert_eq!(texts[0], seen[0].1);
}

/// Runs `steps` report calls of `lines` lines each after one user message.
async fn session(rt: &mut Runtime, steps: u64, lines: u64) {
    rt.add_user_message("m1", "survey the reports", &[])
        .await
        .expect("message");
    for k in 1..=steps {
        let prepared = rt.prepare().await.expect("prepare");
        finish(rt, prepared, report_call(&format!("c{k}"), lines)).await;
    }
}

#[tokio::test]
async fn a_reopened_runtime_projects_the_identical_request_after_folds_and_a_compaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile =
        "context: { foldAt: 0.5, foldAtLeast: 3000, keep: 1, compactAt: 0.6, neverFold: [read] }\n";
    let next = async |rt: &mut Runtime| {
        let prepared = rt.prepare().await.expect("prepare");
        serde_json::to_string(&prepared.request).expect("json")
        // Dropped without a commit: nothing of this request is stored.
    };
    let folded = {
        let mut rt = open(dir.path(), profile, 16_000).await;
        session(&mut rt, 5, 250).await;
        next(&mut rt).await
    };
    assert!(folded.contains("[folded"), "the session folded");
    let mut rt = open(dir.path(), profile, 16_000).await;
    assert_eq!(next(&mut rt).await, folded);
    // Results of a never-folded tool fill the window until compaction must come.
    let mut compacted = false;
    for k in 1..=8 {
        let mut prepared = rt.prepare().await.expect("prepare");
        if prepared.compaction.is_some() {
            prepared = rt
                .compact(prepared, Ok("the reports c1..c5 were surveyed".into()))
                .await
                .expect("compact");
            compacted = true;
        }
        let url = format!("workspace:///home/workspace/r{k}.txt");
        rt.workspace()
            .write(&url, format!("{k} {}", "x ".repeat(6000)).as_bytes())
            .expect("write");
        finish(&mut rt, prepared, read_call(&format!("r{k}"), &url)).await;
    }
    assert!(compacted, "the session compacted");
    let before = next(&mut rt).await;
    drop(rt);
    let mut rt = open(dir.path(), profile, 16_000).await;
    assert_eq!(next(&mut rt).await, before);
    assert!(before.contains("context-summary"));
}

#[tokio::test]
async fn compaction_replaces_the_oldest_turns_and_they_read_back_in_full() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = "context: { foldAt: 0.5, foldAtLeast: 3000, keep: 1, compactAt: 0.6, neverFold: [report] }\n";
    let mut rt = open(dir.path(), profile, 16_000).await;
    rt.add_user_message("m1", "survey the reports", &[])
        .await
        .expect("message");
    let mut k = 0;
    let prepared = loop {
        k += 1;
        assert!(k < 20, "no compaction was asked for");
        let prepared = rt.prepare().await.expect("prepare");
        if prepared.compaction.is_some() {
            break prepared;
        }
        finish(&mut rt, prepared, report_call(&format!("c{k}"), 100)).await;
    };
    let asked = prepared.compaction.as_ref().expect("a compaction request");
    // The summary request is this request's own prefix, then the instruction.
    let n = asked.request.messages.len();
    assert_eq!(
        &asked.request.messages[..n - 1],
        &prepared.request.messages[..n - 1]
    );
    assert!(matches!(asked.request.messages[n - 1].role, Role::User));
    assert_eq!(asked.request.tools, prepared.request.tools);
    let replaced = asked.replaces();
    let compacted = rt
        .compact(prepared, Ok("c1..c3 were surveyed; all clean".into()))
        .await
        .expect("compact");
    let report = compacted.context.compacted.clone().expect("reported");
    assert_eq!(report.messages, replaced);
    assert!(report.summarized);
    assert!(compacted.context.estimated_after < compacted.context.estimated_before);
    let first = &compacted.request.messages[0];
    let Part::Text { text } = &first.content[0] else {
        panic!("the summary is text")
    };
    assert!(
        text.contains("c1..c3 were surveyed") && text.contains(&report.url),
        "{text}"
    );
    // Every call kept in the request still has its result after it.
    let ids: Vec<&str> = compacted
        .request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::ToolCall { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    for id in ids {
        assert!(
            result_text(&compacted.request, id).is_some(),
            "{id} lost its result"
        );
    }
    // The turns read back in full: the user's words and the first result are in the archive.
    let texts = finish(&mut rt, compacted, read_call("back", &report.url)).await;
    assert!(
        texts[0].contains("survey the reports"),
        "{}",
        &texts[0][..200]
    );
    assert!(texts[0].contains("c1 line     1"));
}

#[tokio::test]
async fn a_failed_summary_still_compacts_with_a_note_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile = "context: { foldAt: 0.5, keep: 1, compactAt: 0.6, neverFold: [report] }\n";
    let mut rt = open(dir.path(), profile, 16_000).await;
    session(&mut rt, 4, 250).await;
    let prepared = rt.prepare().await.expect("prepare");
    assert!(prepared.compaction.is_some());
    let compacted = rt
        .compact(
            prepared,
            Err("the compaction model answered 529 overloaded".into()),
        )
        .await
        .expect("a failed summary is no failed step");
    let report = compacted.context.compacted.clone().expect("compacted");
    assert!(!report.summarized);
    let Part::Text { text } = &compacted.request.messages[0].content[0] else {
        panic!("text")
    };
    assert!(text.contains("No summary could be written") && text.contains(&report.url));
    finish(&mut rt, compacted, ModelResponse::from_text("ok")).await;
}

#[tokio::test]
async fn a_request_refused_as_too_long_is_folded_next_time_whatever_the_estimate_said() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A window the estimate thinks is roomy: nothing is folded on its own.
    let mut rt = open(dir.path(), PROFILE, 400_000).await;
    session(&mut rt, 4, 250).await;
    let prepared = rt.prepare().await.expect("prepare");
    assert!(prepared.context.folded.is_empty());
    let estimate = prepared.context.estimated_after;
    rt.abandon_failed(
        prepared,
        "anthropic answered 400: prompt is too long: 412000 tokens > 400000 maximum",
    );
    let prepared = rt.prepare().await.expect("prepare");
    let folded: Vec<&str> = prepared
        .context
        .folded
        .iter()
        .map(|f| f.call_id.as_str())
        .collect();
    assert_eq!(folded, ["c1", "c2", "c3"], "every result but the kept one");
    // The estimate learnt that it was short.
    assert!(prepared.context.estimated_before > estimate);
    finish(&mut rt, prepared, ModelResponse::from_text("ok")).await;
}

#[tokio::test]
async fn the_estimate_converges_on_the_tokens_the_provider_reports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = open(dir.path(), PROFILE, 1_000_000).await;
    rt.add_user_message("m1", "survey the reports", &[])
        .await
        .expect("message");
    // The provider's own count, independent of the estimate: a token per 3 bytes of JSON.
    let counted = |r: &Request| serde_json::to_string(r).expect("json").len() as u64 / 3;
    let mut errors = Vec::new();
    for k in 1..=8 {
        let prepared = rt.prepare().await.expect("prepare");
        let truth = counted(&prepared.request);
        let estimate = prepared.context.estimated_after;
        errors.push(estimate.abs_diff(truth) * 100 / truth);
        let mut response = report_call(&format!("c{k}"), 60 + 20 * k);
        response.usage = Some(Usage {
            input_tokens: truth,
            ..Usage::default()
        });
        finish(&mut rt, prepared, response).await;
    }
    assert!(
        errors[0] > 20,
        "uncalibrated, the estimate is off: {errors:?}"
    );
    assert!(
        *errors.last().unwrap() <= 5,
        "calibrated, within 5 %: {errors:?}"
    );
}

#[test]
fn bad_context_keys_are_refused_with_their_path() {
    let models = "models:\n  main: { input: [text] }\n";
    let refused = |profile: &str| {
        let profile = match Profile::from_yaml(profile) {
            Ok(p) => p,
            Err(e) => return e.to_string(),
        };
        match assemble(
            profile,
            ModelsDoc::from_yaml(models).expect("models"),
            "main",
        ) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        }
    };
    let cases = [
        ("context: { foldAt: 1.5 }\n", "context.foldAt"),
        ("context: { foldAt: 0 }\n", "context.foldAt"),
        (
            "context: { foldAt: 0.8, compactAt: 0.5 }\n",
            "context.compactAt",
        ),
        ("context: { foldAtLeast: 0 }\n", "context.foldAtLeast"),
        ("context: { neverFold: [1] }\n", "context.neverFold[0]"),
        (
            "context: { compactionModel: nope }\n",
            "context.compactionModel",
        ),
        ("context: { foldNow: true }\n", "foldNow"),
    ];
    for (profile, path) in cases {
        let message = refused(profile);
        assert!(message.contains(path), "{profile}: {message}");
    }
    assert_eq!(refused("context: { foldAt: 0.6, compactAt: 1 }\n"), "");
}

// The kill -9 test of the context engine's state: the test binary re-executes itself, and the
// test, started with `CHILD_DIR` set, is the session that gets killed (`killed_session`).
const CHILD_DIR: &str = "ISHIKI_CORE_CONTEXT_CRASH_STATE";
const CHILD_ROUND: &str = "ISHIKI_CORE_CONTEXT_CRASH_ROUND";
const KILL_PROFILE: &str =
    "context: { foldAt: 0.5, foldAtLeast: 3000, keep: 1, compactAt: 0.6, neverFold: [read] }\n";

/// Child: steps of report calls (a user message every fifth step) on a small window, so folds
/// and compactions come often. After each commit returns it prints
/// `committed <step> folded=<call ids> compacted=<0|1>`: what that commit stored. Runs in the
/// test's own binary, started again with [`CHILD_DIR`] set.
#[expect(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a test's child process: it fails and reports as its test would"
)]
async fn killed_session(dir: String) {
    let round: u64 = std::env::var(CHILD_ROUND).unwrap().parse().unwrap();
    let mut rt = open(Path::new(&dir), KILL_PROFILE, 16_000).await;
    for i in 0..200u64 {
        if i % 5 == 0 {
            rt.add_user_message(&format!("u{round}-{i}"), "go on", &[])
                .await
                .unwrap();
        }
        let mut prepared = rt.prepare().await.unwrap();
        if prepared.compaction.is_some() {
            prepared = rt
                .compact(prepared, Ok(format!("summary {round}-{i}")))
                .await
                .unwrap();
        }
        let step = prepared.step;
        let folded: Vec<String> = prepared
            .context
            .folded
            .iter()
            .map(|f| f.call_id.clone())
            .collect();
        let compacted = u8::from(prepared.context.compacted.is_some());
        // Every other step reads a file (never folded), so compaction comes too.
        let call = format!("c{round}-{i}");
        let response = if i % 2 == 0 {
            report_call(&call, 150)
        } else {
            let url = format!("workspace:///home/workspace/{call}.txt");
            rt.workspace()
                .write(&url, format!("{call} {}", "y ".repeat(5000)).as_bytes())
                .unwrap();
            read_call(&call, &url)
        };
        rt.commit(prepared, response).await.unwrap();
        println!(
            "committed {step} folded={} compacted={compacted}",
            folded.join(",")
        );
        rt.execute().await.unwrap();
    }
}

#[tokio::test]
async fn a_killed_session_reopens_with_every_committed_fold_and_compaction() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    if let Ok(dir) = std::env::var(CHILD_DIR) {
        return killed_session(dir).await;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("the test binary has a path");
    let mut folded: Vec<String> = Vec::new();
    let mut compactions = 0;
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    for round in 0..12u64 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let kill_after = 2 + state % 6;
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "suite::context::a_killed_session_reopens_with_every_committed_fold_and_compaction",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_ROUND, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the child starts");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let mut seen = 0;
        let learn = |line: &str, folded: &mut Vec<String>, compactions: &mut usize| {
            let Some(rest) = line.strip_prefix("committed ") else {
                return false;
            };
            let words: Vec<&str> = rest.split_whitespace().collect();
            if let Some(ids) = words.get(1).and_then(|w| w.strip_prefix("folded=")) {
                folded.extend(ids.split(',').filter(|s| !s.is_empty()).map(str::to_owned));
            }
            if words.get(2) == Some(&"compacted=1") {
                *compactions += 1;
            }
            true
        };
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if learn(&line, &mut folded, &mut compactions) {
                seen += 1;
                if seen >= kill_after {
                    break;
                }
            }
        }
        child.kill().expect("the child can be killed");
        child.wait().expect("reaped");
        for line in lines.map_while(Result::ok) {
            learn(&line, &mut folded, &mut compactions);
        }
        assert!(seen >= kill_after, "round {round}: the child stopped early");

        let mut rt = open(dir.path(), KILL_PROFILE, 16_000).await;
        let request = rt.prepare().await.expect("prepare").request;
        // Every committed fold holds: the result is a stub or gone with a compaction, never
        // its whole text again.
        for id in &folded {
            if let Some(text) = result_text(&request, id) {
                assert!(
                    text.starts_with("[folded"),
                    "round {round}: {id} came back: {text:.80}"
                );
            }
        }
        if compactions > 0 {
            assert!(
                request.messages[0].id.ends_with("-context-summary"),
                "round {round}: the committed compaction is gone"
            );
        }
        // Well-formed: every call in the request is answered.
        for m in &request.messages {
            for p in &m.content {
                if let Part::ToolCall { id, .. } = p {
                    assert!(
                        result_text(&request, id).is_some(),
                        "round {round}: {id} unanswered"
                    );
                }
            }
        }
        // And the reopened runtime projects the same request again.
        drop(rt);
        let mut rt = open(dir.path(), KILL_PROFILE, 16_000).await;
        assert_eq!(
            rt.prepare().await.expect("prepare").request,
            request,
            "round {round}"
        );
    }
    assert!(
        !folded.is_empty() && compactions > 0,
        "the killed sessions folded and compacted"
    );
}

#[tokio::test]
async fn with_fold_inputs_a_folded_calls_long_input_goes_too_and_reads_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let profile =
        "context: { foldAt: 0.5, foldAtLeast: 3000, keep: 1, compactAt: 0.9, foldInputs: true }\n";
    let mut rt = open(dir.path(), profile, 20_000).await;
    rt.add_user_message("m1", "survey the reports", &[])
        .await
        .expect("message");
    let long_tag = "t".repeat(2_000);
    let mut folded = None;
    for k in 1..=8 {
        let prepared = rt.prepare().await.expect("prepare");
        if folded.is_none() && !prepared.context.folded.is_empty() {
            folded = Some(prepared.request.clone());
        }
        let response = ModelResponse::from_calls(vec![ToolCall {
            id: format!("c{k}"),
            name: "report".into(),
            input: json!({ "lines": 250, "tag": format!("{k}{long_tag}") }),
        }]);
        finish(&mut rt, prepared, response).await;
    }
    let request = folded.expect("a fold");
    let input = request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .find_map(|p| match p {
            Part::ToolCall { id, input, .. } if id == "c1" => Some(input.clone()),
            _ => None,
        })
        .expect("the call stays");
    let url = input["folded_input"]
        .as_str()
        .expect("the input is folded")
        .to_owned();
    let bytes = ishiki_resources::DiskArtifactStore::open(dir.path().join("artifacts"))
        .expect("artifacts")
        .get(&url)
        .await
        .expect("archived");
    let original: Value = serde_json::from_slice(&bytes).expect("json");
    assert_eq!(
        original,
        json!({ "lines": 250, "tag": format!("1{long_tag}") })
    );
    // And its result is a stub, in the same place.
    assert!(result_text(&request, "c1").is_some_and(|t| t.starts_with("[folded")));
}

/// A model that refuses its first request as too long, then answers; it writes summaries when
/// asked (the compaction request ends with the instruction).
#[derive(Debug, Default)]
struct Tight {
    requests: std::sync::Mutex<Vec<usize>>,
}

#[async_trait]
impl ishiki_core::Model for Tight {
    async fn respond(&self, request: &Request) -> Result<ModelResponse, ishiki_core::ModelError> {
        let mut seen = self.requests.lock().expect("lock");
        seen.push(request.messages.len());
        if seen.len() == 1 {
            return Err(ishiki_core::ModelError::new(
                ishiki_core::ModelErrorKind::ContextTooLong,
                "prompt is too long: 300000 tokens > 200000 maximum",
            ));
        }
        Ok(ModelResponse::from_text("summary or answer"))
    }
}

#[tokio::test]
async fn step_with_tries_a_too_long_request_once_more_after_folding() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = open(dir.path(), PROFILE, 400_000).await;
    session(&mut rt, 4, 250).await;
    let model = Tight::default();
    let reports = rt.step_with(&model).await.expect("the step goes on");
    assert!(reports.is_empty());
    let seen = model.requests.lock().expect("lock").clone();
    assert!(seen.len() >= 2, "refused once, then sent again: {seen:?}");
    // The answer was committed: the next request ends with it.
    let next = rt.prepare().await.expect("prepare").request;
    assert!(next.messages.iter().any(|m| {
        m.role == Role::Assistant
            && m.content
                .iter()
                .any(|p| matches!(p, Part::Text { text } if text == "summary or answer"))
    }));
}

/// A model with a native compaction that works or fails as told; it calls `report` until the
/// window fills, and writes text summaries when asked.
#[derive(Debug)]
struct Compacting {
    native: Result<(), String>,
    compactions: std::sync::Mutex<Vec<usize>>,
    summaries: std::sync::Mutex<usize>,
    steps: std::sync::Mutex<u64>,
}

impl Compacting {
    fn new(native: Result<(), String>) -> Self {
        Self {
            native,
            compactions: std::sync::Mutex::default(),
            summaries: std::sync::Mutex::default(),
            steps: std::sync::Mutex::default(),
        }
    }
}

#[async_trait]
impl ishiki_core::Model for Compacting {
    async fn respond(&self, request: &Request) -> Result<ModelResponse, ishiki_core::ModelError> {
        let asks_summary = request.messages.last().is_some_and(|m| {
            m.content.iter().any(
                |p| matches!(p, Part::Text { text } if text == ishiki_core::context::SUMMARY_INSTRUCTION),
            )
        });
        if asks_summary {
            *self.summaries.lock().expect("lock") += 1;
            return Ok(ModelResponse::from_text("a text summary"));
        }
        let mut steps = self.steps.lock().expect("lock");
        *steps += 1;
        Ok(report_call(&format!("c{steps}"), 250))
    }

    async fn compact(
        &self,
        request: &Request,
    ) -> Result<Option<ishiki_core::Compacted>, ishiki_core::ModelError> {
        self.compactions
            .lock()
            .expect("lock")
            .push(request.messages.len());
        match &self.native {
            Ok(()) => Ok(Some(ishiki_core::Compacted {
                provider: "scripted".into(),
                model: "seeing".into(),
                data: json!({ "type": "compaction", "content": "the provider's summary" }),
                summary: Some("the provider's summary".into()),
            })),
            Err(reason) => Err(ishiki_core::ModelError::retryable(reason.clone())),
        }
    }
}

#[tokio::test]
async fn step_with_compacts_natively_when_the_model_can_and_with_a_text_summary_when_that_fails() {
    let profile = "context: { foldAt: 0.5, foldAtLeast: 3000, keep: 1, compactAt: 0.6, neverFold: [report] }\n";
    for native in [Ok(()), Err("compaction_unavailable".to_owned())] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut rt = open(dir.path(), profile, 16_000).await;
        rt.add_user_message("m1", "survey the reports", &[])
            .await
            .expect("message");
        let model = Compacting::new(native.clone());
        let mut k = 0;
        while rt.context().compaction.is_none() {
            k += 1;
            assert!(k < 20, "no compaction came");
            rt.step_with(&model).await.expect("a step");
        }
        let compaction = rt.context().compaction.clone().expect("compacted");
        assert_eq!(model.compactions.lock().expect("lock").len(), 1);
        let summaries = *model.summaries.lock().expect("lock");
        let first = rt.prepare().await.expect("prepare").request.messages[0].clone();
        match native {
            Ok(()) => {
                // The block opens the request, alone, and no text summary was asked for.
                assert_eq!(summaries, 0);
                assert!(compaction.native.is_some());
                assert_eq!(first.role, Role::Assistant);
                assert!(
                    matches!(first.content.as_slice(), [Part::Compaction(c)] if c.summary.as_deref() == Some("the provider's summary"))
                );
            }
            Err(_) => {
                // The provider could not compact: a text summary took its place.
                assert_eq!(summaries, 1);
                assert!(compaction.native.is_none());
                assert_eq!(compaction.summary.as_deref(), Some("a text summary"));
                assert_eq!(first.role, Role::User);
            }
        }
    }
}

/// Two conversations on one artifact store (as on PostgreSQL + S3): each reads back its own
/// folded results and compacted turns, never the other's, even by URL; other artifacts stay
/// readable by both.
#[tokio::test]
async fn archives_read_back_only_in_the_conversation_that_made_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store: Arc<dyn ishiki_resources::ArtifactStore> = Arc::new(
        ishiki_resources::DiskArtifactStore::open(dir.path().join("shared")).expect("store"),
    );
    let open_on = async |name: &str| {
        Runtime::builder(assembly(PROFILE, "seeing"), dir.path().join(name))
            .clock(clock_at(Duration::ZERO))
            .codemode_worker(WorkerSpawn::InProcess)
            .durability(Durability::Normal)
            .window(Window {
                tokens: 16_000,
                output: 1_600,
            })
            .artifacts(store.clone())
            .tool(Arc::new(Report))
            .build()
            .await
            .expect("the runtime builds")
    };
    let mut a = open_on("a").await;
    a.add_user_message("m1", "survey the reports", &[])
        .await
        .expect("message");
    let mut folded = None;
    for k in 1..=8 {
        let prepared = a.prepare().await.expect("prepare");
        folded = folded.or_else(|| prepared.context.folded.first().map(|f| f.url.clone()));
        finish(&mut a, prepared, report_call(&format!("c{k}"), 250)).await;
    }
    let url = folded.expect("conversation a folded a result");
    assert!(url.starts_with("artifact://folded/"), "{url}");
    // A plain artifact (a long result's page archive) of a is readable from b.
    let plain = store
        .put("result", b"a plain artifact", "txt")
        .await
        .expect("an artifact");

    let mut b = open_on("b").await;
    b.add_user_message("m1", "read what you can", &[])
        .await
        .expect("message");
    let prepared = b.prepare().await.expect("prepare");
    let texts = finish(&mut b, prepared, read_call("r1", &url)).await;
    assert!(
        texts[0].contains("is not an archive of this conversation"),
        "{}",
        texts[0]
    );
    let prepared = b.prepare().await.expect("prepare");
    let texts = finish(&mut b, prepared, read_call("r2", &plain)).await;
    assert!(texts[0].contains("a plain artifact"), "{}", texts[0]);

    // a reads it back, also after a restart (the state names its archives).
    drop(a);
    let mut a = open_on("a").await;
    let prepared = a.prepare().await.expect("prepare");
    let texts = finish(&mut a, prepared, read_call("r3", &url)).await;
    assert!(
        texts[0].contains("c1 line"),
        "{}",
        &texts[0][..200.min(texts[0].len())]
    );
}
