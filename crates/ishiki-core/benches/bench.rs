//! `cargo xtask bench` rows for the context engine (issue 23): one session of 1,000 steps, each
//! calling a tool whose result fills the display budget (30,000 characters, about 7,500
//! tokens), on a 200,000-token window with 32,000 kept for the answer and the default
//! `context` section (fold past 75 %, at least half the window per fold, keep 3, compact past
//! 90 %). The provider's count is played by the estimate itself, so calibration stays 1:1.
//!
//! Rows: peak request tokens against `foldAt` × window + one step's growth; cache-prefix
//! breaks per 100 steps (the requests whose prefix differs from the previous one's, as the
//! edit planner reports them); pipeline time per step (prepare, commit, execute) around step
//! 1,000 against around step 100; and the model-visible tokens of the whole session against
//! the same session without a context engine (every request carrying the whole history) and
//! against clearing old results with a placeholder that cannot be read back.
//!
//! Also: opening a runtime over the 359 tools of the MCP corpus, alone and while another
//! runtime holds them (`ISHIKI_BENCH_ONLY=catalog` runs these rows alone).
//!
//! Prints `BENCH\t<measurement>\t<value>\t<target>` rows; extra arguments are ignored.

#![allow(clippy::print_stdout, clippy::unwrap_used)] // a bench binary reports on stdout

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ishiki_core::context::{Fold, Window, stub, text_tokens};
use ishiki_core::{
    Durability, ModelResponse, ModelsDoc, Part, Profile, Runtime, Tool, ToolCall, ToolContext,
    ToolDef, ToolError, Usage, assemble,
};
use serde_json::{Value, json};

const STEPS: usize = 1_000;

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
                json!({ "type": "object", "properties": { "n": { "type": "integer" } } }),
            )
        }
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        let n = input["n"].as_u64().unwrap_or(0);
        // 500 lines of 59 characters and a newline: 30,000 characters, the display budget.
        Ok(Value::String(
            (1..=500)
                .map(|k| format!("report {n:>6} line {k:>5} {}\n", ".".repeat(33)))
                .collect(),
        ))
    }
}

fn percentile(mut xs: Vec<Duration>, p: f64) -> Duration {
    xs.sort();
    xs[((xs.len() - 1) as f64 * p) as usize]
}

fn main() {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // `ISHIKI_BENCH_ONLY=catalog` runs the catalog rows alone.
    if std::env::var("ISHIKI_BENCH_ONLY").as_deref() != Ok("catalog") {
        // A 200,000-token window (Claude Sonnet, GPT-5 class) and a 1,000,000-token one.
        tokio.block_on(session(200_000, 32_000));
        tokio.block_on(session(1_000_000, 64_000));
    }
    tokio.block_on(catalog_open());
}

/// A tool of the MCP corpus: its definition as its server lists it.
#[derive(Debug)]
struct Listed(ToolDef);

#[async_trait]
impl Tool for Listed {
    fn definition(&self) -> ToolDef {
        self.0.clone()
    }

    async fn execute(&self, _input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        Ok(Value::Null)
    }
}

/// Opening a runtime over the 359 tools of the MCP corpus (issue 26: what one process pays per
/// conversation for a catalog it already serves): each open while no other runtime holds the
/// catalog compiles every input schema; each open while one does takes the compiled ones.
async fn catalog_open() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ishiki-toolsearch/tests/data/mcp-catalog");
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for file in files {
        let catalog: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        let server = catalog["server"].as_str().unwrap().to_owned();
        for tool in catalog["tools"].as_array().unwrap() {
            // Named as `ishiki-mcp` names them: `<server>_<tool>`.
            let mut def = ToolDef::new(
                format!("{server}_{}", tool["name"].as_str().unwrap()),
                tool["description"].as_str().unwrap_or_default(),
                tool["inputSchema"].clone(),
            );
            def.origin = Some(format!("mcp:{server}"));
            tools.push(Arc::new(Listed(def)));
        }
    }
    let models = ModelsDoc::from_yaml("models:\n  main: { input: [text] }\n").unwrap();
    let open = async |dir: &std::path::Path| {
        let assembly = assemble(Profile::from_yaml("{}").unwrap(), models.clone(), "main").unwrap();
        let mut builder = Runtime::builder(assembly, dir).durability(Durability::Normal);
        for tool in &tools {
            builder = builder.tool(tool.clone());
        }
        builder.build().await.unwrap()
    };
    let time = async |held: bool| {
        let keep = tempfile::tempdir().unwrap();
        let holder = match held {
            true => Some(open(keep.path()).await),
            false => None,
        };
        let mut times = Vec::new();
        for _ in 0..15 {
            let dir = tempfile::tempdir().unwrap();
            let started = Instant::now();
            let runtime = open(dir.path()).await;
            times.push(started.elapsed());
            drop(runtime);
        }
        drop(holder);
        percentile(times, 0.5)
    };
    let alone = time(false).await;
    let shared = time(true).await;
    println!(
        "BENCH\truntime open, {} MCP tools, no other runtime holds the catalog (p50)\t{:.2} ms\t-",
        tools.len(),
        alone.as_secs_f64() * 1e3
    );
    println!(
        "BENCH\truntime open, {} MCP tools, another runtime holds it (p50)\t{:.2} ms\t< the row above",
        tools.len(),
        shared.as_secs_f64() * 1e3
    );
}

async fn session(window: u64, output: u64) {
    let name = format!("{}k window", window / 1000);
    let dir = tempfile::tempdir().unwrap();
    let profile = Profile::from_yaml("{}").unwrap();
    let models = ModelsDoc::from_yaml("models:\n  main: { input: [text] }\n").unwrap();
    let assembly = assemble(profile, models, "main").unwrap();
    let mut rt = Runtime::builder(assembly, dir.path())
        .durability(Durability::Normal)
        .window(Window {
            tokens: window,
            output,
        })
        .tool(Arc::new(Report))
        .build()
        .await
        .unwrap();
    rt.add_user_message("m1", "survey every report", &[])
        .await
        .unwrap();
    let mut peak = 0u64;
    let mut breaks = 0usize;
    let mut visible = 0u64;
    let mut whole = 0u64;
    let mut stubs_total = 0u64;
    let mut step_times = Vec::with_capacity(STEPS);
    let mut parts = Vec::with_capacity(STEPS);
    let mut growth = 0u64;
    let mut last_before = 0u64;
    let mut compactions = 0;
    let mut fold_breaks = 0usize;
    let stub_tokens = text_tokens(&stub(&Fold {
        call_id: "c0".into(),
        tool: "report".into(),
        url: "artifact://folded/0123456789abcdef.txt".into(),
        lines: 500,
        chars: 30_000,
        input_url: None,
    }));
    let cleared_tokens = text_tokens("[Old tool result content cleared]");
    for k in 0..STEPS {
        let started = Instant::now();
        let mut prepared = rt.prepare().await.unwrap();
        let prepare_time = started.elapsed();
        if prepared.compaction.is_some() {
            compactions += 1;
            prepared = rt
                .compact(prepared, Ok("the reports so far were all clean".into()))
                .await
                .unwrap();
        }
        let estimate = prepared.context.estimated_after;
        if k > 0 && prepared.edits.changed_at.is_some() {
            breaks += 1;
            if prepared.context.compacted.is_none() {
                fold_breaks += 1;
            }
        }
        if k > 0 {
            growth = growth.max(
                prepared
                    .context
                    .estimated_before
                    .saturating_sub(last_before),
            );
        }
        last_before = estimate;
        peak = peak.max(estimate);
        visible += estimate;
        let stubs = prepared
            .request
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter(|p| matches!(p, Part::ToolResult { text, .. } if text.starts_with("[folded")))
            .count() as u64;
        stubs_total += stubs;
        let mut response = ModelResponse::from_calls(vec![ToolCall {
            id: format!("c{k}"),
            name: "report".into(),
            input: json!({ "n": k }),
        }]);
        response.usage = Some(Usage {
            input_tokens: estimate,
            ..Usage::default()
        });
        let t = Instant::now();
        rt.commit(prepared, response).await.unwrap();
        let commit_time = t.elapsed();
        let t = Instant::now();
        rt.execute().await.unwrap();
        let execute_time = t.elapsed();
        step_times.push(started.elapsed());
        parts.push((prepare_time, commit_time, execute_time));
        // Without a context engine every request carries every result whole.
        whole += 7_700 * (k as u64 + 1);
    }
    let at = |from: usize| percentile(step_times[from..from + 20].to_vec(), 0.5);
    let (t100, t1000) = (at(90), at(STEPS - 20));
    let fold_at = window * 3 / 4;
    let part = |from: usize, f: fn(&(Duration, Duration, Duration)) -> Duration| {
        percentile(parts[from..from + 20].iter().map(f).collect(), 0.5).as_secs_f64() * 1e3
    };
    println!(
        "BENCH\tcontext ({name}): prepare / commit / execute p50 at step 100\t{:.2} / {:.2} / {:.2} ms\t—",
        part(90, |p| p.0),
        part(90, |p| p.1),
        part(90, |p| p.2)
    );
    println!(
        "BENCH\tcontext ({name}): prepare / commit / execute p50 at step 1,000\t{:.2} / {:.2} / {:.2} ms\t—",
        part(STEPS - 20, |p| p.0),
        part(STEPS - 20, |p| p.1),
        part(STEPS - 20, |p| p.2)
    );
    println!(
        "BENCH\tcontext ({name}): peak request tokens, 1,000 steps of 7,500-token results\t{peak} (foldAt × window + growth = {})\t≤ {}",
        fold_at + growth,
        fold_at + growth
    );
    println!(
        "BENCH\tcontext ({name}): cache-prefix breaks per 100 steps (folds + {compactions} compactions)\t{:.1} ({:.1} by folds)\t≤ 5",
        breaks as f64 * 100.0 / STEPS as f64,
        fold_breaks as f64 * 100.0 / STEPS as f64
    );
    println!(
        "BENCH\tcontext ({name}): pipeline time per step, p50 at step 1,000 vs step 100\t{:.2} ms vs {:.2} ms = {:.2}×\t≤ 1.5×",
        t1000.as_secs_f64() * 1e3,
        t100.as_secs_f64() * 1e3,
        t1000.as_secs_f64() / t100.as_secs_f64()
    );
    println!(
        "BENCH\tcontext ({name}): model-visible tokens of the session vs no context engine\t{:.1} M vs {:.1} M = {:.3}×\t—",
        visible as f64 / 1e6,
        whole as f64 / 1e6,
        visible as f64 / whole as f64
    );
    let cleared = visible - stubs_total * stub_tokens.saturating_sub(cleared_tokens);
    println!(
        "BENCH\tcontext ({name}): model-visible tokens vs clearing without re-readable stubs\t{:.2} M vs {:.2} M = {:.3}×\t—",
        visible as f64 / 1e6,
        cleared as f64 / 1e6,
        visible as f64 / cleared as f64
    );
}
