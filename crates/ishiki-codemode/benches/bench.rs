//! Codemode benchmarks: each Boa figure beside rquickjs doing the same work in the same run.
//!
//! Rows (`BENCH\t<measurement>\t<value>\t<target>`):
//! - invocation latency with a warm worker, a program making 2 tool calls (target ≤ 1.5× rquickjs
//!   with a fresh runtime and context per invocation, tools as host functions);
//! - the TODO journey over 20 000 lines: read, split, filter, join, write (target ≤ 10×);
//! - host memory growth over 10 000 consecutive programs in-process and 2 000 through worker
//!   processes (target < 10 %);
//! - the hostile corpus: the slowest program's end, with a 2 s timeout (target ≤ timeout + 1 s).
//!
//! `cargo bench -p ishiki-codemode --bench bench -- invocation` runs only the rows whose name
//! holds one of the given words (`invocation`, `journey`, `hostile`, `memory`).

#![allow(clippy::print_stdout, reason = "a bench binary reports on stdout")]

#[path = "../tests/corpus/mod.rs"]
mod corpus;

use ishiki_codemode::{CallableTool, Limits, Sandbox, SandboxConfig, ToolFailure, WorkerSpawn};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TWO_CALLS: &str = r#"
const a = await tools.read({ url: "workspace:///notes.txt" });
const b = await tools.echo({ n: a.text.length });
return { n: b.n, ok: true };
"#;

const JOURNEY: &str = r#"
const source = await tools.read({ url: "workspace:///home/workspace/notes.txt" });
if (source.type !== "text") throw new Error("not text");
const tasks = source.text.split("\n").filter((line) => line.startsWith("TODO:"));
await tools.write_file({ path: "/home/workspace/tasks.txt", content: tasks.join("\n") });
return { count: tasks.length, url: "workspace:///home/workspace/tasks.txt" };
"#;

#[derive(Debug)]
struct Read {
    text: String,
    schema: Value,
}

#[async_trait::async_trait]
impl CallableTool for Read {
    fn name(&self) -> &str {
        "read"
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    async fn call(&self, _input: Value) -> Result<Value, ToolFailure> {
        Ok(json!({ "type": "text", "text": self.text }))
    }
}

#[derive(Debug)]
struct Echo {
    name: &'static str,
    schema: Value,
}

#[async_trait::async_trait]
impl CallableTool for Echo {
    fn name(&self) -> &str {
        self.name
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    async fn call(&self, input: Value) -> Result<Value, ToolFailure> {
        match self.name {
            // Like a real write_file: answers with a small acknowledgement.
            "write_file" => {
                Ok(json!({ "ok": true, "bytes": input["content"].as_str().map_or(0, str::len) }))
            }
            _ => Ok(input),
        }
    }
}

fn notes(lines: usize) -> String {
    (0..lines)
        .map(|i| {
            if i % 3 == 0 {
                format!("TODO: task number {i} to do")
            } else {
                format!("done: task number {i} was finished")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn tools(text: &str) -> Vec<Arc<dyn CallableTool>> {
    let object = json!({ "type": "object" });
    vec![
        Arc::new(Read {
            text: text.to_owned(),
            schema: json!({ "type": "object", "properties": { "url": { "type": "string" } }, "required": ["url"] }),
        }),
        Arc::new(Echo {
            name: "echo",
            schema: object.clone(),
        }),
        Arc::new(Echo {
            name: "write_file",
            schema: json!({ "type": "object", "properties": { "path": { "type": "string" }, "content": { "type": "string" } }, "required": ["path", "content"] }),
        }),
    ]
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// One rquickjs invocation: fresh runtime and context, tools as host functions behind promises.
fn quickjs_run(code: &str, text: &str) -> String {
    use rquickjs::{Context, Function, Runtime};
    let runtime = Runtime::new().expect("runtime");
    let context = Context::full(&runtime).expect("context");
    let read_reply = serde_json::to_string(&json!({ "type": "text", "text": text })).expect("json");
    context.with(|ctx| {
        let globals = ctx.globals();
        let read = Function::new(ctx.clone(), move |_input: String| read_reply.clone()).expect("fn");
        let echo = Function::new(ctx.clone(), |input: String| input).expect("fn");
        let write = Function::new(ctx.clone(), |input: String| {
            let value: Value = serde_json::from_str(&input).unwrap_or_default();
            let bytes = value["content"].as_str().map_or(0, str::len);
            json!({ "ok": true, "bytes": bytes }).to_string()
        })
        .expect("fn");
        globals.set("__read", read).expect("set");
        globals.set("__echo", echo).expect("set");
        globals.set("__write", write).expect("set");
        let prelude = r#"
            const __call = (f, x) => Promise.resolve().then(() => JSON.parse(f(JSON.stringify(x))));
            const tools = {
                read: (x) => __call(__read, x),
                echo: (x) => __call(__echo, x),
                write_file: (x) => __call(__write, x),
            };
            var __result;
        "#;
        let program = format!(
            "{prelude}(async function () {{\n{code}\n}})().then((v) => {{ __result = JSON.stringify(v); }});"
        );
        ctx.eval::<(), _>(program).expect("eval");
    });
    while runtime.is_job_pending() {
        if runtime.execute_pending_job().is_err() {
            break;
        }
    }
    context.with(|ctx| ctx.globals().get::<_, String>("__result").expect("result"))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(bench());
}

/// Whether the row `name` was asked for (all rows when no word is given).
fn wanted(name: &str) -> bool {
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    words.is_empty() || words.iter().any(|word| name.contains(word.as_str()))
}

async fn bench() {
    let worker = std::path::PathBuf::from(env!("CARGO_BIN_EXE_ishiki-codemode-worker"));
    let sandbox = Sandbox::new(SandboxConfig {
        worker: WorkerSpawn::Program(worker),
        prespawn: 1,
        fork_server: std::env::var_os("ISHIKI_BENCH_EXECUTED").is_none(),
        ..SandboxConfig::default()
    });
    sandbox.warm().await.expect("warm");

    // (a) invocation latency, 2 tool calls.
    let small = tools("line one\nline two");
    if wanted("invocation") {
        invocation(&sandbox, &small).await;
    }
    if wanted("start") {
        start(&small).await;
    }
    if wanted("journey") {
        journey(&sandbox).await;
    }
    if wanted("hostile") {
        hostile(&small).await;
    }
    if wanted("memory") {
        memory(&small).await;
    }
}

/// A program on an empty pool, its worker's start included: forked by the fork server against
/// executed (issue 26). Interleaved, one of each per round.
async fn start(small: &[Arc<dyn CallableTool>]) {
    let worker = std::path::PathBuf::from(env!("CARGO_BIN_EXE_ishiki-codemode-worker"));
    let cold = |fork_server| {
        Sandbox::new(SandboxConfig {
            worker: WorkerSpawn::Program(worker.clone()),
            prespawn: 0,
            fork_server,
            ..SandboxConfig::default()
        })
    };
    let (forked, executed) = (cold(true), cold(false));
    let iterations = 200;
    let mut times = [
        Vec::with_capacity(iterations),
        Vec::with_capacity(iterations),
    ];
    for i in 0..iterations + 5 {
        for (n, sandbox) in [&forked, &executed].into_iter().enumerate() {
            let started = Instant::now();
            let outcome = sandbox.run(TWO_CALLS, small.to_vec()).await.expect("run");
            let elapsed = started.elapsed();
            assert_eq!(outcome.value, json!({ "n": 17, "ok": true }));
            if i >= 5 {
                times[n].push(elapsed);
            }
        }
    }
    assert_eq!(
        forked.worker_start().as_deref(),
        Some("forked by the sandbox's fork server")
    );
    let [fork, exec] = times;
    let (fork, exec) = (median(fork), median(exec));
    println!(
        "BENCH\tcodemode program on an empty pool, worker start included, 2 tool calls (median)\t{:.0} µs forked ({:.0} µs executed: {:.2}×)\tforked < executed",
        micros(fork),
        micros(exec),
        micros(fork) / micros(exec)
    );
}

async fn invocation(sandbox: &Sandbox, small: &[Arc<dyn CallableTool>]) {
    // Interleaved, so both engines see the same load on a shared machine.
    let iterations = 300;
    let mut boa = Vec::with_capacity(iterations);
    let mut quick = Vec::with_capacity(iterations);
    for i in 0..iterations + 10 {
        sandbox.warm().await.expect("warm");
        let start = Instant::now();
        let outcome = sandbox.run(TWO_CALLS, small.to_vec()).await.expect("run");
        let boa_elapsed = start.elapsed();
        assert_eq!(outcome.value, json!({ "n": 17, "ok": true }));
        // The pool refills after a run; let that finish before timing the other engine.
        sandbox.warm().await.expect("warm");
        let start = Instant::now();
        let result = quickjs_run(TWO_CALLS, "line one\nline two");
        let quick_elapsed = start.elapsed();
        assert_eq!(result, r#"{"n":17,"ok":true}"#);
        if i >= 10 {
            boa.push(boa_elapsed);
            quick.push(quick_elapsed);
        }
    }
    // rquickjs alone in a hot loop too: its caches stay warm there, which flatters it.
    let mut hot = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        quickjs_run(TWO_CALLS, "line one\nline two");
        hot.push(start.elapsed());
    }
    let (boa, quick, hot) = (median(boa), median(quick), median(hot));
    println!(
        "BENCH\tcodemode invocation, warm worker, 2 tool calls (median)\t{:.0} µs (rquickjs {:.0} µs interleaved: {:.2}×; {:.0} µs in a hot loop: {:.2}×)\t≤ 1.5× rquickjs",
        micros(boa),
        micros(quick),
        micros(boa) / micros(quick),
        micros(hot),
        micros(boa) / micros(hot)
    );
}

async fn journey(sandbox: &Sandbox) {
    // (b) the TODO journey over 20 000 lines.
    let text = notes(20_000);
    let journey = tools(&text);
    let rounds = 21;
    let mut boa = Vec::with_capacity(rounds);
    let mut quick = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        sandbox.warm().await.expect("warm");
        let start = Instant::now();
        let outcome = sandbox
            .run(JOURNEY, journey.clone())
            .await
            .expect("journey");
        boa.push(start.elapsed());
        assert_eq!(outcome.value["count"], json!(6667));
        sandbox.warm().await.expect("warm");
        let start = Instant::now();
        let result = quickjs_run(JOURNEY, &text);
        quick.push(start.elapsed());
        assert!(result.contains("6667"));
    }
    let (boa, quick) = (median(boa), median(quick));
    println!(
        "BENCH\tcodemode TODO journey, 20 000 lines (median)\t{:.1} ms (rquickjs {:.1} ms, {:.1}×)\t≤ 10× rquickjs",
        micros(boa) / 1e3,
        micros(quick) / 1e3,
        micros(boa) / micros(quick)
    );
}

async fn hostile(small: &[Arc<dyn CallableTool>]) {
    // (d) the hostile corpus, a few at a time, default limits but a 2 s timeout.
    let timeout = Duration::from_secs(2);
    let hostile = Sandbox::new(SandboxConfig {
        worker: WorkerSpawn::Program(std::path::PathBuf::from(env!(
            "CARGO_BIN_EXE_ishiki-codemode-worker"
        ))),
        limits: Limits {
            timeout,
            ..Limits::default()
        },
        prespawn: 4,
        ..SandboxConfig::default()
    });
    hostile.warm().await.expect("warm");
    let slots = Arc::new(tokio::sync::Semaphore::new(4));
    let mut runs = tokio::task::JoinSet::new();
    let count = corpus::corpus().len();
    for (name, code) in corpus::corpus() {
        let hostile = hostile.clone();
        let slots = Arc::clone(&slots);
        let tools = small.to_vec();
        runs.spawn(async move {
            let _slot = slots.acquire_owned().await.expect("semaphore");
            let start = Instant::now();
            let result = hostile.run(&code, tools).await;
            (name, start.elapsed(), result.err().map(|e| e.kind()))
        });
    }
    let mut slowest = (Duration::ZERO, "");
    while let Some(joined) = runs.join_next().await {
        let (name, elapsed, _) = joined.expect("task");
        if elapsed > slowest.0 {
            slowest = (elapsed, name);
        }
    }
    let after = hostile
        .run(
            "const r = await tools.echo({ ok: 1 }); return r.ok",
            small.to_vec(),
        )
        .await
        .expect("the host survives");
    assert_eq!(after.value, json!(1));
    println!(
        "BENCH\tcodemode hostile corpus ({count} programs, 2 s timeout): slowest end\t{:.2} s ({})\t≤ timeout + 1 s",
        slowest.0.as_secs_f64(),
        slowest.1
    );
}

async fn memory(small: &[Arc<dyn CallableTool>]) {
    // (c) host memory over consecutive programs: 10 000 in-process (every engine is built and
    // dropped inside this process, the strictest case) and 2 000 through worker processes.
    for (mode, programs, worker) in [
        ("in-process", 10_000, WorkerSpawn::InProcess),
        (
            "worker processes",
            2_000,
            WorkerSpawn::Program(std::path::PathBuf::from(env!(
                "CARGO_BIN_EXE_ishiki-codemode-worker"
            ))),
        ),
    ] {
        let sandbox = Sandbox::new(SandboxConfig {
            worker,
            limits: Limits {
                stack_bytes: 8 << 20,
                ..Limits::default()
            },
            prespawn: 4,
            ..SandboxConfig::default()
        });
        let warmup = 300;
        let start = Instant::now();
        let mut before = 0;
        for i in 0..programs + warmup {
            if i == warmup {
                before = rss_kib();
            }
            let outcome = sandbox
                .run(
                    "const r = await tools.echo({ i: 1 }); return r.i + 1",
                    small.to_vec(),
                )
                .await
                .expect("small program");
            assert_eq!(outcome.value, json!(2));
        }
        let after = rss_kib();
        let growth = (after as f64 - before as f64) / before as f64 * 100.0;
        println!(
            "BENCH\tcodemode host RSS growth over {programs} programs ({mode})\t{growth:+.1} % ({before} → {after} KiB, {:.1} s)\t< 10 %",
            start.elapsed().as_secs_f64()
        );
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}
