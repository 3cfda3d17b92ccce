//! `cargo xtask bench --scale`: many conversations per process, and one long conversation
//! (issue 16).
//!
//! - Scale: N conversations × S steps, each conversation a [`Runtime`] of its own, run by 1, 8
//!   and 64 concurrent tasks. History: SQLite in each conversation's state directory
//!   (`--store sqlite`, the default) or one PostgreSQL database with a conversation id each
//!   (`--store postgres`: a throwaway cluster started by the `ishiki-postgres` test harness).
//!   Artifacts and assets: the state directory, or object storage (`--objects URL`, or
//!   `--objects moto`: a moto S3 server started by the `ishiki-objects` test harness, one
//!   bucket, a key prefix per conversation, one S3 client for the process). A scripted model
//!   answers at once; the tools are real (`read` of a workspace text file and of a workspace
//!   image — an artifact —, a codemode program, `send_message`, a plain answer; the first user
//!   message carries an image — an asset). Reported: steps/s
//!   (wall clock, runtime opens included) and p50/p99 pipeline overhead of a step —
//!   prepare + commit + execute, model time excluded — and p50/p99 of opening a runtime.
//! - Long: one conversation stepped to the largest checkpoint; at each checkpoint (100, 1,000,
//!   5,000 by default) the mean and median overhead of the last 100 steps, the median of
//!   `prepare` alone (the part that reads history), and the process's resident memory.
//!
//! `--shared-pool false` gives every runtime a codemode worker pool of its own (what a
//! runtime did before `RuntimeBuilder::codemode_sandbox`), for before/after figures;
//! `--fork-server false` executes every codemode worker instead of forking it from the
//! sandbox's fork server (what a sandbox did before issue 26's fork server).
//!
//! `--stalled N` (issue 26's burst test) runs N more conversations beside the measured ones,
//! each calling, step after step (50 ms apart, as a model would answer), a blocking tool that
//! never returns, under a 200 ms deadline. Compare the measured conversations' p99 with
//! `--stalled 0`; the table's last columns give the process's threads at the end and the
//! abandoned calls still running (capped by `AbandonedWork`).

#![allow(clippy::print_stdout, clippy::print_stderr)] // A bench prints its table.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ishiki_core::{
    AbandonedWork, Assembly, Durability, ModelResponse, ModelsDoc, Profile, Runtime, Sandbox,
    SandboxConfig, Tool, ToolCall, ToolContext, ToolDef, ToolError, WorkerSpawn, assemble,
};
use serde_json::json;

#[derive(Debug, Clone)]
struct Options {
    conversations: usize,
    steps: u64,
    concurrency: Vec<usize>,
    long: Vec<u64>,
    shared_pool: bool,
    fork_server: bool,
    objects: Option<String>,
    store: Store,
    durability: Durability,
    stalled: usize,
}

/// Where the conversations keep their history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    /// SQLite in each conversation's state directory.
    Sqlite,
    /// One PostgreSQL database (a throwaway cluster), a conversation id each.
    Postgres,
}

/// What [`open`] needs besides the options: started once per process.
#[derive(Clone)]
struct Backends {
    /// The PostgreSQL connection string (`--store postgres`).
    postgres: Option<String>,
    /// The connections every conversation shares, opened on the tokio runtime that runs the
    /// conversations ([`Backends::connected`]).
    pool: Option<ishiki_postgres::PostgresPool>,
    /// The object store every conversation's prefix lives in (`--objects`).
    objects: Option<ishiki_objects::Objects>,
    /// Numbers conversations (ids and key prefixes).
    next: Arc<AtomicUsize>,
}

fn backends(options: &Options) -> Backends {
    let postgres = (options.store == Store::Postgres).then(|| {
        let cluster = ishiki_postgres::testing::TestCluster::shared()
            .unwrap_or_else(|e| panic!("the PostgreSQL cluster starts: {e}"));
        cluster
            .database()
            .unwrap_or_else(|e| panic!("a database: {e}"))
    });
    let objects = options.objects.as_deref().map(|location| {
        if location == "moto" {
            let server = ishiki_objects::testing::TestServer::shared()
                .unwrap_or_else(|e| panic!("the moto S3 server starts: {e}"));
            let bucket = server.bucket().unwrap_or_else(|e| panic!("a bucket: {e}"));
            server
                .open(&format!("s3://{bucket}/bench"))
                .unwrap_or_else(|e| panic!("the bucket opens: {e}"))
        } else {
            ishiki_objects::Objects::open(location).expect("--objects")
        }
    });
    Backends {
        postgres,
        pool: None,
        objects,
        next: Arc::new(AtomicUsize::new(0)),
    }
}

impl Backends {
    /// These backends with the PostgreSQL pool opened on the current tokio runtime (its
    /// connections' tasks run there), as a service would open it once.
    async fn connected(&self) -> Self {
        let mut backends = self.clone();
        if let Some(url) = &self.postgres {
            let options = ishiki_postgres::PoolOptions {
                max_connections: 64,
                ..ishiki_postgres::PoolOptions::default()
            };
            let pool = ishiki_postgres::PostgresPool::connect(url, &options)
                .await
                .unwrap_or_else(|e| panic!("the PostgreSQL pool connects: {e}"));
            backends.pool = Some(pool);
        }
        backends
    }
}

fn parse_list<T: std::str::FromStr>(text: &str) -> Result<Vec<T>, String> {
    text.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim()
                .parse()
                .map_err(|_| format!("`{s}` is not a number"))
        })
        .collect()
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        conversations: 1000,
        steps: 20,
        concurrency: vec![1, 8, 64],
        long: vec![100, 1000, 5000],
        shared_pool: true,
        fork_server: true,
        objects: None,
        store: Store::Sqlite,
        durability: Durability::Normal,
        stalled: 0,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        // `cargo bench` passes `--bench`; everything else takes a value.
        if arg == "--bench" {
            continue;
        }
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--conversations" => {
                o.conversations = value()?.parse().map_err(|_| "--conversations")?
            }
            "--steps" => o.steps = value()?.parse().map_err(|_| "--steps")?,
            "--concurrency" => o.concurrency = parse_list(&value()?)?,
            "--long" => o.long = parse_list(&value()?)?,
            "--shared-pool" => o.shared_pool = value()? != "false",
            "--fork-server" => o.fork_server = value()? != "false",
            "--stalled" => o.stalled = value()?.parse().map_err(|_| "--stalled")?,
            "--objects" => o.objects = Some(value()?),
            "--store" => {
                o.store = match value()?.as_str() {
                    "sqlite" => Store::Sqlite,
                    "postgres" => Store::Postgres,
                    other => return Err(format!("--store {other}: use sqlite or postgres")),
                }
            }
            "--durability" => {
                o.durability = match value()?.as_str() {
                    "full" => Durability::Full,
                    "normal" => Durability::Normal,
                    other => return Err(format!("--durability {other}: use full or normal")),
                }
            }
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(o)
}

fn assembly() -> Assembly {
    assembly_of("codemode: { enable: true }\n")
}

fn assembly_of(profile: &str) -> Assembly {
    let profile = Profile::from_yaml(profile).expect("profile");
    let models =
        ModelsDoc::from_yaml("models:\n  main: { input: [text, image] }\n").expect("models");
    assemble(profile, models, "main").expect("assembles")
}

/// `hang`: blocks its thread and never returns (a stalled synchronous client, say).
#[derive(Debug)]
struct Hang;

#[async_trait::async_trait]
impl Tool for Hang {
    fn blocking(&self) -> bool {
        true
    }

    fn definition(&self) -> ToolDef {
        ToolDef::new(
            "hang",
            "Never returns.",
            json!({ "type": "object", "properties": {}, "additionalProperties": false }),
        )
    }

    async fn execute(
        &self,
        _input: serde_json::Value,
        _context: &ToolContext,
    ) -> Result<serde_json::Value, ToolError> {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// One stalled conversation (`--stalled`): steps calling `hang` until `done`.
async fn stalled(base: std::path::PathBuf, done: Arc<std::sync::atomic::AtomicBool>) {
    let dir = tempfile::tempdir_in(&base).expect("tempdir");
    let mut runtime = Runtime::builder(assembly_of("tools: { timeoutMs: 200 }\n"), dir.path())
        .tool(Arc::new(Hang))
        .durability(Durability::Normal)
        .build()
        .await
        .expect("runtime");
    runtime
        .add_user_message("m1", "go", &[])
        .await
        .expect("message");
    let mut n = 0;
    while !done.load(Ordering::Relaxed) {
        n += 1;
        let prepared = runtime.prepare().await.expect("prepare");
        let call = ModelResponse::from_calls([ToolCall {
            id: format!("h{n}"),
            name: "hang".to_owned(),
            input: json!({}),
        }]);
        runtime.commit(prepared, call).await.expect("commit");
        let reports = runtime.execute().await.expect("execute");
        assert!(
            reports.iter().all(|r| r.is_error),
            "hang returned: {reports:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The process's threads now (`/proc/self/status`).
fn threads() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .map_or("n/a".to_owned(), |n| n.trim().to_owned())
}

/// The scripted model: what to answer at `step` of a conversation, with real tool calls.
fn response(step: u64) -> ModelResponse {
    let call = |name: &str, input: serde_json::Value| {
        ModelResponse::from_calls([ToolCall {
            id: format!("c{step}"),
            name: name.to_owned(),
            input,
        }])
    };
    match step % 5 {
        1 => call(
            "read",
            json!({ "url": "workspace:///home/workspace/notes.txt" }),
        ),
        2 => call(
            "codemode",
            json!({ "code": "const r = await tools.read({ url: 'workspace:///home/workspace/notes.txt' }); return JSON.stringify(r).length;" }),
        ),
        3 => call(
            "send_message",
            json!({ "messages": [format!("progress {step}")] }),
        ),
        4 => call(
            "read",
            json!({ "url": "workspace:///home/workspace/pic.png", "lifetime": "once" }),
        ),
        _ => ModelResponse::from_text(format!("answer {step}")),
    }
}

struct Conversation {
    runtime: Runtime,
    _dir: tempfile::TempDir,
}

/// A small PNG, different per `seed`.
fn png(seed: usize) -> Vec<u8> {
    use image::ImageEncoder as _;
    let pixels: Vec<u8> = (0..8 * 8 * 3).map(|i| (i * 7 + seed) as u8).collect();
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(&pixels, 8, 8, image::ExtendedColorType::Rgb8)
        .expect("png");
    out
}

async fn open(
    options: &Options,
    backends: &Backends,
    sandbox: Option<&Sandbox>,
    base: &Path,
) -> Conversation {
    let n = backends.next.fetch_add(1, Ordering::Relaxed);
    let dir = tempfile::tempdir_in(base).expect("tempdir");
    let mut builder = Runtime::builder(assembly(), dir.path())
        .codemode_worker(WorkerSpawn::CurrentExe)
        .durability(options.durability);
    if let Some(sandbox) = sandbox {
        builder = builder.codemode_sandbox(sandbox.clone());
    }
    if let Some(pool) = &backends.pool {
        let store = pool
            .open(
                &format!("conversation-{n}"),
                &ishiki_postgres::PostgresOptions::default(),
            )
            .await
            .expect("postgres store");
        builder = builder.store(Box::new(store));
    }
    if let Some(objects) = &backends.objects {
        // One client (and connection pool) for the process; a key prefix per conversation.
        let objects = ishiki_objects::Objects::from_store(
            objects.store().clone(),
            objects.prefix().clone().join(format!("c{n}")),
        );
        builder = builder
            .artifacts(Arc::new(objects.artifacts()))
            .assets(Arc::new(objects.assets()));
    }
    let mut runtime = builder.build().await.expect("runtime");
    runtime
        .workspace()
        .write("/home/workspace/notes.txt", b"one\ntwo\nthree\nfour\n")
        .expect("fixture");
    runtime
        .workspace()
        .write("/home/workspace/pic.png", &png(n))
        .expect("fixture");
    runtime
        .add_user_message("m1", "go", &[png(n + 1)])
        .await
        .expect("message");
    Conversation { runtime, _dir: dir }
}

/// The time of one step's pipeline.
#[derive(Debug, Clone, Copy)]
struct Timing {
    /// prepare + commit + execute
    total: Duration,
    /// prepare alone (projecting the request from history)
    prepare: Duration,
}

/// One step; returns the pipeline overhead (prepare + commit + execute).
async fn step(runtime: &mut Runtime, n: u64) -> Duration {
    timed_step(runtime, n).await.total
}

async fn timed_step(runtime: &mut Runtime, n: u64) -> Timing {
    let started = Instant::now();
    let prepared = runtime.prepare().await.expect("prepare");
    let prepare = started.elapsed();
    let response = response(n); // the model: scripted, instant, not counted
    let started = Instant::now();
    runtime.commit(prepared, response).await.expect("commit");
    let reports = runtime.execute().await.expect("execute");
    assert!(
        reports.iter().all(|r| !r.is_error),
        "a tool failed: {reports:?}"
    );
    Timing {
        total: prepare + started.elapsed(),
        prepare,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

fn rss_mib() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or("n/a".to_owned(), |kb| format!("{:.0} MiB", kb / 1024.0))
}

/// "SQLite + disk", "PostgreSQL + object store", ...
fn describe(options: &Options) -> String {
    let history = match options.store {
        Store::Sqlite => "SQLite history",
        Store::Postgres => "PostgreSQL history",
    };
    let files = match options.objects.as_deref() {
        None => "state-dir artifacts",
        Some("moto") => "object-store artifacts (moto S3)",
        Some(_) => "object-store artifacts",
    };
    format!("{history} + {files}")
}

fn scale(options: &Options, backends: &Backends, base: &Path) {
    println!(
        "\n## {} conversations × {} steps ({}, {} pool, workers {}, durability {:?})\n",
        options.conversations,
        options.steps,
        describe(options),
        if options.shared_pool {
            "shared"
        } else {
            "per-runtime"
        },
        if options.fork_server {
            "forked"
        } else {
            "executed"
        },
        options.durability,
    );
    if options.stalled > 0 {
        println!(
            "{} more conversations beside them call a tool that never returns (200 ms deadline).\n",
            options.stalled
        );
    }
    println!(
        "| concurrent tasks | steps/s | step overhead p50 | p99 | runtime open p50 | p99 | threads | abandoned calls |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &tasks in &options.concurrency {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio");
        let (steps, opens, wall, (threads, abandoned)) = runtime.block_on(async {
            let sandbox = options.shared_pool.then(|| {
                Sandbox::new(SandboxConfig {
                    worker: WorkerSpawn::CurrentExe,
                    fork_server: options.fork_server,
                    ..SandboxConfig::default()
                })
            });
            let backends = backends.connected().await;
            let next = Arc::new(AtomicUsize::new(0));
            let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let stalled: Vec<_> = (0..options.stalled)
                .map(|_| tokio::spawn(stalled(base.to_path_buf(), done.clone())))
                .collect();
            let started = Instant::now();
            let mut handles = Vec::new();
            for _ in 0..tasks {
                let (next, options, sandbox) = (next.clone(), options.clone(), sandbox.clone());
                let backends = backends.clone();
                let base = base.to_path_buf();
                handles.push(tokio::spawn(async move {
                    let mut steps = Vec::new();
                    let mut opens = Vec::new();
                    while next.fetch_add(1, Ordering::Relaxed) < options.conversations {
                        let opened = Instant::now();
                        let mut c = open(&options, &backends, sandbox.as_ref(), &base).await;
                        opens.push(opened.elapsed());
                        for n in 1..=options.steps {
                            steps.push((n % 5, step(&mut c.runtime, n).await));
                        }
                    }
                    (steps, opens)
                }));
            }
            let mut steps = Vec::new();
            let mut opens = Vec::new();
            for h in handles {
                let (s, o) = h.await.expect("task");
                steps.extend(s);
                opens.extend(o);
            }
            let wall = started.elapsed();
            let load = (threads(), AbandonedWork::process().running());
            done.store(true, Ordering::Relaxed);
            for h in stalled {
                h.await.expect("a stalled conversation");
            }
            (steps, opens, wall, load)
        });
        let mut by_kind: Vec<Vec<Duration>> = vec![Vec::new(); 5];
        for &(kind, d) in &steps {
            by_kind[kind as usize].push(d);
        }
        let mut steps: Vec<Duration> = steps.into_iter().map(|(_, d)| d).collect();
        let mut opens = opens;
        steps.sort();
        opens.sort();
        let kinds = ["answer", "read", "codemode", "send_message", "read image"];
        let p99s: Vec<String> = by_kind
            .iter_mut()
            .zip(kinds)
            .map(|(d, kind)| {
                d.sort();
                format!("{kind} {}", ms(percentile(d, 0.99)))
            })
            .collect();
        eprintln!("p99 by step kind, {tasks} tasks: {}", p99s.join(", "));
        let rate = steps.len() as f64 / wall.as_secs_f64();
        println!(
            "| {tasks} | {rate:.0} | {} | {} | {} | {} | {threads} | {abandoned} |",
            ms(percentile(&steps, 0.5)),
            ms(percentile(&steps, 0.99)),
            ms(percentile(&opens, 0.5)),
            ms(percentile(&opens, 0.99)),
        );
        println!(
            "BENCH\tscale {tasks} tasks: steps/s\t{rate:.0}\t-\nBENCH\tscale {tasks} tasks: step p99\t{}\t-",
            ms(percentile(&steps, 0.99))
        );
        runtime.shutdown_timeout(Duration::from_secs(5));
    }
}

fn long(options: &Options, backends: &Backends, base: &Path) {
    let Some(&last) = options.long.iter().max() else {
        return;
    };
    println!("\n## one long conversation ({})\n", describe(options));
    println!(
        "| step | step overhead, last 100 steps: mean | p50 | p50 of prepare alone | resident memory |"
    );
    println!("|---|---|---|---|---|");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    runtime.block_on(async {
        let sandbox = Sandbox::new(SandboxConfig {
            worker: WorkerSpawn::CurrentExe,
            fork_server: options.fork_server,
            ..SandboxConfig::default()
        });
        let backends = backends.connected().await;
        let mut c = open(options, &backends, Some(&sandbox), base).await;
        let mut window = std::collections::VecDeque::new();
        for n in 1..=last {
            window.push_back(timed_step(&mut c.runtime, n).await);
            if window.len() > 100 {
                window.pop_front();
            }
            if options.long.contains(&n) {
                let mut totals: Vec<Duration> = window.iter().map(|t| t.total).collect();
                let mut prepares: Vec<Duration> = window.iter().map(|t| t.prepare).collect();
                totals.sort();
                prepares.sort();
                let mean = totals.iter().sum::<Duration>() / totals.len().max(1) as u32;
                println!(
                    "| {n} | {} | {} | {} | {} |",
                    ms(mean),
                    ms(percentile(&totals, 0.5)),
                    ms(percentile(&prepares, 0.5)),
                    rss_mib()
                );
                println!(
                    "BENCH\tlong conversation step {n}: step overhead\t{}\t-",
                    ms(mean)
                );
            }
        }
    });
}

fn main() {
    // Codemode workers are this binary started again in worker mode.
    ishiki_core::run_if_worker();
    let options = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("scale: {e}");
            std::process::exit(2);
        }
    };
    let base = tempfile::tempdir().expect("tempdir");
    let backends = backends(&options);
    if options.conversations > 0 && options.steps > 0 {
        scale(&options, &backends, base.path());
    }
    long(&options, &backends, base.path());
}
