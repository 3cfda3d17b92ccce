//! Every tool call is bounded (issue 13): a deadline and a result cap for direct calls and
//! calls from programs, a cap on a program's attachments and on `send_message` images, each
//! source read once; the host lives through every limit.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ishiki_core::{
    CallReport, Durability, FileScheme, ModelResponse, Runtime, Tool, ToolCall, ToolContext,
    ToolDef, ToolError, ToolErrorKind, WorkerSpawn,
};
use ishiki_resources::ResourceError;
use serde_json::{Value, json};
use url::Url;

use super::runtime::{assembly, clock_at, png};

/// A gate tools wait on until the test opens it.
#[derive(Debug, Default)]
struct Gate {
    open: Mutex<bool>,
    changed: Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut open = self.open.lock().expect("gate lock");
        while !*open {
            open = self.changed.wait(open).expect("gate lock");
        }
    }

    fn open(&self) {
        *self.open.lock().expect("gate lock") = true;
        self.changed.notify_all();
    }
}

/// Opens its gate when dropped, so a failing assertion does not leave stalled threads that the
/// test's runtime would wait for forever.
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// `stall`: blocks its thread (synchronous work, no await) until the gate opens.
#[derive(Debug)]
struct Stall {
    gate: Arc<Gate>,
}

/// `big({ n })`: a string of `n` bytes.
#[derive(Debug)]
struct Big;

fn def(name: &str, properties: Value) -> ToolDef {
    ToolDef::new(
        name,
        "A test tool.",
        json!({ "type": "object", "properties": properties, "additionalProperties": false }),
    )
}

#[async_trait]
impl Tool for Stall {
    /// It blocks its thread, and says so.
    fn blocking(&self) -> bool {
        true
    }

    fn definition(&self) -> ToolDef {
        def("stall", json!({}))
    }

    async fn execute(&self, _input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        self.gate.wait();
        Ok(json!("released"))
    }
}

#[async_trait]
impl Tool for Big {
    fn definition(&self) -> ToolDef {
        def("big", json!({ "n": { "type": "integer" } }))
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let n = input.get("n").and_then(Value::as_u64).unwrap_or(0);
        Ok(Value::String("x".repeat(usize::try_from(n).unwrap_or(0))))
    }
}

/// `fail({ n })`: fails with a message of `n` bytes.
#[derive(Debug)]
struct Fail;

#[async_trait]
impl Tool for Fail {
    fn definition(&self) -> ToolDef {
        def("fail", json!({ "n": { "type": "integer" } }))
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let n = input.get("n").and_then(Value::as_u64).unwrap_or(0);
        Err(ToolError::new("e".repeat(usize::try_from(n).unwrap_or(0))))
    }
}

/// `pictures({ n })`: `n` different PNG image blocks, as an MCP tool returns them.
#[derive(Debug)]
struct Pictures;

#[async_trait]
impl Tool for Pictures {
    fn definition(&self) -> ToolDef {
        def("pictures", json!({ "n": { "type": "integer" } }))
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        use base64::Engine as _;
        let n = input.get("n").and_then(Value::as_u64).unwrap_or(0);
        Ok(Value::Array(
            (0..n)
                .map(|k| {
                    json!({
                        "type": "image",
                        "mimeType": "image/png",
                        "data": base64::engine::general_purpose::STANDARD.encode(png(2, 2, k)),
                    })
                })
                .collect(),
        ))
    }
}

/// A file scheme that serves one PNG for every URL and counts its loads.
#[derive(Debug)]
struct Counting {
    scheme: &'static str,
    loads: AtomicUsize,
    bytes: Vec<u8>,
}

impl Counting {
    fn new(scheme: &'static str) -> Arc<Self> {
        Arc::new(Self {
            scheme,
            loads: AtomicUsize::new(0),
            bytes: png(8, 8, 7),
        })
    }
}

#[async_trait]
impl FileScheme for Counting {
    fn scheme(&self) -> &str {
        self.scheme
    }

    async fn load(&self, _url: &Url) -> Result<Vec<u8>, ResourceError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        Ok(self.bytes.clone())
    }
}

async fn build(
    dir: &Path,
    profile: &str,
    tools: Vec<Arc<dyn Tool>>,
    schemes: Vec<Arc<dyn FileScheme>>,
) -> Runtime {
    let mut builder = Runtime::builder(assembly(profile, "seeing"), dir)
        .clock(clock_at(Duration::ZERO))
        .codemode_worker(WorkerSpawn::InProcess)
        .durability(Durability::Normal);
    for tool in tools {
        builder = builder.tool(tool);
    }
    for scheme in schemes {
        builder = builder.file_scheme(scheme);
    }
    builder.build().await.expect("the runtime builds")
}

/// Runs one step whose response is the single call `name(input)`, and returns its report.
async fn run(rt: &mut Runtime, id: &str, name: &str, input: Value) -> CallReport {
    let prepared = rt.prepare().await.expect("prepare");
    let response = ModelResponse::from_calls(vec![ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        input,
    }]);
    rt.commit(prepared, response).await.expect("commit");
    let mut reports = rt.execute().await.expect("execute");
    assert_eq!(reports.len(), 1);
    reports.remove(0)
}

const STALLED: &str = "the tool `stall` did not finish within its time limit of 100 ms (tools.timeoutMs); it was abandoned";

#[tokio::test]
async fn a_tool_that_blocks_its_thread_fails_at_the_deadline_and_the_host_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gate = Arc::new(Gate::default());
    let _open = OpenOnDrop(gate.clone());
    let mut rt = build(
        dir.path(),
        "codemode: { enable: true }\ntools: { timeoutMs: 100 }\n",
        vec![Arc::new(Stall { gate: gate.clone() }), Arc::new(Big)],
        vec![],
    )
    .await;

    let direct = run(&mut rt, "c1", "stall", json!({})).await;
    assert!(direct.is_error);
    assert_eq!(direct.error_kind, Some(ToolErrorKind::Limit));
    assert_eq!(direct.text, STALLED);

    let code = "try { await tools.stall({}); return 'finished'; } catch (e) { return 'caught: ' + e.message; }";
    let program = run(&mut rt, "c2", "codemode", json!({ "code": code })).await;
    assert!(!program.is_error, "{}", program.text);
    assert!(
        program.text.starts_with("caught: ") && program.text.contains(STALLED),
        "{}",
        program.text
    );

    gate.open();
    let after = run(&mut rt, "c3", "big", json!({ "n": 3 })).await;
    assert!(!after.is_error);
    assert_eq!(after.text, "xxx");
}

/// A runtime with `stall` (held by `gate`) and `other`, counting abandoned calls in `work`,
/// whose first two calls of `stall` were abandoned at the 100 ms deadline.
async fn two_stalled(
    dir: &std::path::Path,
    gate: &Arc<Gate>,
    work: &Arc<ishiki_core::AbandonedWork>,
    other: Arc<dyn Tool>,
) -> Runtime {
    let mut rt = Runtime::builder(assembly("tools: { timeoutMs: 100 }\n", "seeing"), dir)
        .clock(clock_at(Duration::ZERO))
        .codemode_worker(WorkerSpawn::InProcess)
        .durability(Durability::Normal)
        .abandoned_work(work.clone())
        .tool(Arc::new(Stall { gate: gate.clone() }))
        .tool(other)
        .build()
        .await
        .expect("the runtime builds");
    for id in ["c1", "c2"] {
        let report = run(&mut rt, id, "stall", json!({})).await;
        assert_eq!(report.text, STALLED);
    }
    rt
}

/// Blocking tools that never return keep their threads after their deadline; a burst of them
/// must not take the blocking pool: past the limit of abandoned work, a blocking call fails at
/// once, saying why, and the count falls as abandoned calls finish.
#[tokio::test]
async fn abandoned_calls_are_counted_and_past_their_limit_a_call_fails_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gate = Arc::new(Gate::default());
    let _open = OpenOnDrop(gate.clone());
    let work = ishiki_core::AbandonedWork::new(2);
    let mut rt = two_stalled(dir.path(), &gate, &work, Arc::new(Big)).await;
    assert_eq!(rt.abandoned_work().running(), 2);
    // At the limit: a blocking call is not started, and said so.
    let refused = run(&mut rt, "c3", "stall", json!({})).await;
    assert!(refused.is_error);
    assert_eq!(refused.error_kind, Some(ToolErrorKind::Limit));
    assert_eq!(
        refused.text,
        "the tool `stall` was not started: 2 earlier tool calls of this process are still running after their deadline (at most 2 may be); try again later"
    );
    // An async tool takes no thread of the blocking pool: it still runs.
    let quick = run(&mut rt, "c3b", "big", json!({ "n": 3 })).await;
    assert_eq!((quick.is_error, quick.text.as_str()), (false, "xxx"));
    // The abandoned calls return: the count falls to zero and calls run again.
    gate.open();
    for _ in 0..200 {
        if work.running() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(work.running(), 0);
    let after = run(&mut rt, "c4", "big", json!({ "n": 3 })).await;
    assert_eq!((after.is_error, after.text.as_str()), (false, "xxx"));
}

/// `nap`: blocks its thread briefly, and says so; it always returns.
#[derive(Debug)]
struct Nap;

#[async_trait]
impl Tool for Nap {
    fn blocking(&self) -> bool {
        true
    }

    fn definition(&self) -> ToolDef {
        def("nap", json!({}))
    }

    async fn execute(&self, _input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        std::thread::sleep(Duration::from_millis(5));
        Ok(json!("rested"))
    }
}

/// One tool that keeps stalling uses up its own limit, not the process's: its next call is
/// refused, naming it, while every other blocking tool still runs (issue 26's burst: 64
/// conversations whose tool never returns must not stop the blocking tools of the others).
#[tokio::test]
async fn a_tool_that_keeps_stalling_is_refused_alone_and_other_blocking_tools_still_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gate = Arc::new(Gate::default());
    let _open = OpenOnDrop(gate.clone());
    let work = ishiki_core::AbandonedWork::with_tool_limit(8, 2);
    let mut rt = two_stalled(dir.path(), &gate, &work, Arc::new(Nap)).await;
    assert_eq!((work.running(), work.running_of("stall")), (2, 2));
    let refused = run(&mut rt, "c3", "stall", json!({})).await;
    assert_eq!(refused.error_kind, Some(ToolErrorKind::Limit));
    assert_eq!(
        refused.text,
        "the tool `stall` was not started: 2 earlier calls of it are still running after their deadline (at most 2 of one tool may be); it seems to hang, so try another way or try again later"
    );
    // Another blocking tool is not held to the stalled one's limit.
    let nap = run(&mut rt, "c4", "nap", json!({})).await;
    assert_eq!((nap.is_error, nap.text.as_str()), (false, "rested"));
    gate.open();
    for _ in 0..200 {
        if work.running() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!((work.running(), work.running_of("stall")), (0, 0));
    let again = run(&mut rt, "c5", "stall", json!({})).await;
    assert_eq!((again.is_error, again.text.as_str()), (false, "released"));
}

const TOO_BIG: &str = "the result of the tool `big` is larger than 1000 bytes (tools.maxResultBytes): ask it for less";

#[tokio::test]
async fn a_raw_result_over_the_cap_fails_naming_the_tool_and_the_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = build(
        dir.path(),
        "codemode: { enable: true }\ntools: { maxResultBytes: 1000 }\n",
        vec![Arc::new(Big)],
        vec![],
    )
    .await;
    // 998 bytes of text is 1000 bytes of JSON: just within the cap.
    let fits = run(&mut rt, "c1", "big", json!({ "n": 998 })).await;
    assert!(!fits.is_error, "{}", fits.text);
    let over = run(&mut rt, "c2", "big", json!({ "n": 999 })).await;
    assert!(over.is_error);
    assert_eq!(over.error_kind, Some(ToolErrorKind::Limit));
    assert_eq!(over.text, TOO_BIG);

    let code = "try { await tools.big({ n: 5000 }); return 'no'; } catch (e) { return e.message; }";
    let program = run(&mut rt, "c3", "codemode", json!({ "code": code })).await;
    assert!(program.text.contains(TOO_BIG), "{}", program.text);
}

#[tokio::test]
async fn big_integers_in_tool_input_are_refused_not_rounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = build(dir.path(), "{}\n", vec![Arc::new(Big)], vec![]).await;
    let input: Value =
        serde_json::from_str(r#"{"n": 123456789012345678901234567890}"#).expect("json");
    let report = run(&mut rt, "c1", "big", input).await;
    assert!(report.is_error);
    assert_eq!(report.error_kind, Some(ToolErrorKind::Input));
    assert_eq!(
        report.text,
        "invalid input for `big`: at /n: the number 1.2345678901234568e+29 is too large to be exact; integers must be within ±9007199254740991 (pass larger ones as strings)"
    );
}

#[tokio::test]
async fn program_attachments_are_capped_and_each_url_is_read_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let count = Counting::new("count");
    let mut rt = build(
        dir.path(),
        "codemode: { enable: true }\n",
        vec![],
        vec![count.clone()],
    )
    .await;
    let many = "return { attachments: Array.from({ length: 60000 }, () => ({ type: 'resource_link', uri: 'count://files/big.png' })) };";
    let refused = run(&mut rt, "c1", "codemode", json!({ "code": many })).await;
    assert!(refused.is_error);
    assert_eq!(refused.error_kind, Some(ToolErrorKind::Limit));
    assert_eq!(
        refused.text,
        "the program returned 60000 attachments, over the limit of 32 per result: return at most 32"
    );
    assert_eq!(count.loads.load(Ordering::SeqCst), 0);

    let ten = "return { n: 10, attachments: Array.from({ length: 10 }, () => ({ type: 'resource_link', uri: 'count://files/big.png' })) };";
    let shown = run(&mut rt, "c2", "codemode", json!({ "code": ten })).await;
    assert!(!shown.is_error, "{}", shown.text);
    assert_eq!(shown.attachments.len(), 10);
    assert_eq!(
        count.loads.load(Ordering::SeqCst),
        1,
        "the URL is read once"
    );
}

#[tokio::test]
async fn send_message_caps_its_images_and_reads_each_source_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let local = Counting::new("local");
    let mut rt = build(dir.path(), "{}\n", vec![], vec![local.clone()]).await;
    let message = "<img src=\"local:///pic.png\"/>".repeat(2000);
    let report = run(
        &mut rt,
        "c1",
        "send_message",
        json!({ "messages": [message], "mode": "element" }),
    )
    .await;
    assert!(!report.is_error, "{}", report.text);
    assert!(
        report.text.starts_with(
            "Sent 1 message(s) with 16 image(s).\nDropped image local:///pic.png: over the limit of 16 images per send_message call\n"
        ),
        "{}",
        report.text
    );
    assert_eq!(
        local.loads.load(Ordering::SeqCst),
        1,
        "the source is read once"
    );
}

#[test]
fn the_tools_section_has_defaults_and_refuses_zero() {
    let defaults = ishiki_core::Profile::from_yaml("{}").expect("valid");
    assert_eq!(defaults.tools.timeout_ms, 60_000);
    assert_eq!(defaults.tools.max_result_bytes, 16 << 20);
    let zero = ishiki_core::Profile::from_yaml("tools:\n  timeoutMs: 0\n").expect_err("zero");
    assert_eq!(
        zero.message(),
        "tools.timeoutMs: must be at least 1, found 0 (line 2, column 14)"
    );
}

#[tokio::test]
async fn a_long_tool_error_is_paged_through_the_outlet_like_a_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = build(dir.path(), "{}\n", vec![Arc::new(Fail)], vec![]).await;
    let report = run(&mut rt, "c1", "fail", json!({ "n": 2_000_000 })).await;
    assert!(report.is_error);
    assert!(
        report.text.len() < 40_000,
        "the model reads one page, not {} bytes",
        report.text.len()
    );
    let continuation = report.continuation.expect("the rest is archived and paged");
    assert!(continuation.starts_with("artifact://"), "{continuation}");
    // A short error is shown whole, as before.
    let short = run(&mut rt, "c2", "fail", json!({ "n": 5 })).await;
    assert_eq!(short.text, "eeeee");
    assert_eq!(short.continuation, None);
}

#[tokio::test]
async fn a_direct_result_shows_at_most_32_media_items_and_says_how_many_were_left_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = build(dir.path(), "{}\n", vec![Arc::new(Pictures)], vec![]).await;
    let report = run(&mut rt, "c1", "pictures", json!({ "n": 200 })).await;
    assert!(!report.is_error, "{}", report.text);
    assert_eq!(report.attachments.len(), 32);
    assert!(
        report.text.ends_with(
            "[168 more media items of this result were left out: a result shows at most 32]"
        ),
        "{}",
        report.text
    );
    let fits = run(&mut rt, "c2", "pictures", json!({ "n": 32 })).await;
    assert_eq!(fits.attachments.len(), 32);
    assert!(!fits.text.contains("left out"), "{}", fits.text);
}

/// `forever`: an async tool that never returns; it records when its future is dropped.
#[derive(Debug, Default)]
struct Forever {
    dropped: Arc<std::sync::atomic::AtomicBool>,
}

/// Sets its flag when dropped (with the future that holds it).
struct OnDrop(Arc<std::sync::atomic::AtomicBool>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[async_trait]
impl Tool for Forever {
    fn definition(&self) -> ToolDef {
        def("forever", json!({}))
    }

    async fn execute(&self, _input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let _guard = OnDrop(self.dropped.clone());
        std::future::pending::<()>().await;
        Ok(Value::Null)
    }
}

/// An async tool is a task on the caller's runtime: at its deadline the task is cancelled (its
/// future dropped), so nothing of it keeps running and it is not abandoned work.
#[tokio::test]
async fn an_async_tool_past_its_deadline_is_cancelled_and_holds_no_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let forever = Forever::default();
    let dropped = forever.dropped.clone();
    let work = ishiki_core::AbandonedWork::new(1);
    let mut rt = Runtime::builder(
        assembly("tools: { timeoutMs: 100 }\n", "seeing"),
        dir.path(),
    )
    .clock(clock_at(Duration::ZERO))
    .codemode_worker(WorkerSpawn::InProcess)
    .durability(Durability::Normal)
    .abandoned_work(work.clone())
    .tool(Arc::new(forever))
    .build()
    .await
    .expect("the runtime builds");
    for id in ["c1", "c2", "c3"] {
        let report = run(&mut rt, id, "forever", json!({})).await;
        assert_eq!(report.error_kind, Some(ToolErrorKind::Limit));
        assert!(
            report
                .text
                .contains("did not finish within its time limit of 100 ms"),
            "{}",
            report.text
        );
    }
    // Three past a limit of one: none of them is left running anywhere.
    assert_eq!(work.running(), 0);
    for _ in 0..100 {
        if dropped.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        dropped.load(std::sync::atomic::Ordering::SeqCst),
        "the future was dropped"
    );
}

/// A response with more native calls than a step runs (20,000 once ran in one step): the first
/// 128 run, as for calls written in text, and each one past them is answered with a refusal
/// that says why, so the turn stays whole and nothing else is lost.
#[tokio::test]
async fn a_step_runs_at_most_128_calls_and_refuses_the_rest_saying_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = build(dir.path(), "{}\n", vec![Arc::new(Big)], vec![]).await;
    let prepared = rt.prepare().await.expect("prepare");
    let calls = (0..130)
        .map(|k| ToolCall {
            id: format!("c{k}"),
            name: "big".to_owned(),
            input: json!({ "n": 1 }),
        })
        .collect::<Vec<_>>();
    rt.commit(prepared, ModelResponse::from_calls(calls))
        .await
        .expect("commit");
    let reports = rt.execute().await.expect("execute");
    assert_eq!(reports.len(), 130, "every call is answered");
    for report in &reports[..128] {
        assert!(!report.is_error, "{}: {}", report.call_id, report.text);
        assert_eq!(report.text, "x");
    }
    for report in &reports[128..] {
        assert!(report.is_error, "{}", report.call_id);
        assert_eq!(
            report.text,
            "not run: this response made 130 tool calls and at most 128 run in one step; make the rest in the next step"
        );
    }
}
