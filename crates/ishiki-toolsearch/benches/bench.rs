//! `cargo xtask bench` rows for toolsearch: a 10,000-tool index (synthesized from the test set
//! by renaming and re-describing its tools) — build time, query latency p50/p99 over the
//! paraphrased queries — and signature rendering. Built with the `semantic` feature and the
//! model in `.tools/all-minilm-l6-v2` (`cargo xtask tools`), also the hybrid reranker: one
//! query embedding, and a hybrid query over the test set's tools.
//!
//! Prints `BENCH\t<measurement>\t<value>\t<target>` lines; extra arguments are ignored.

#![allow(clippy::print_stdout)] // A bench binary reports on stdout.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ishiki_toolsearch::{Catalog, ToolDef, ToolIndex, parse_definitions, signature};

const TOOLS: usize = 10_000;
const SERVERS: [&str; 8] = [
    "acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "wonka",
];

fn synthesize(base: &[ToolDef]) -> Vec<ToolDef> {
    (0..TOOLS)
        .map(|i| {
            let b = &base[i % base.len()];
            let copy = i / base.len();
            if copy == 0 {
                return b.clone();
            }
            let server = SERVERS[copy % SERVERS.len()];
            ToolDef {
                name: format!("{server}{copy}_{}", b.name),
                description: format!(
                    "{} (via the {server} integration, variant {copy})",
                    b.description
                ),
                origin: Some(format!("mcp:{server}{copy}")),
                ..b.clone()
            }
        })
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let base = match parse_definitions(include_str!("../tests/data/tools.json")) {
        Ok(defs) => defs,
        Err(e) => {
            eprintln!("tools.json: {e}");
            std::process::exit(1);
        }
    };
    let queries: Vec<String> =
        serde_json::from_str::<Vec<serde_json::Value>>(include_str!("../tests/data/queries.json"))
            .unwrap_or_default()
            .iter()
            .filter_map(|q| q["query"].as_str().map(str::to_owned))
            .collect();
    let tools = synthesize(&base);

    let mut builds: Vec<Duration> = (0..7)
        .map(|_| {
            let start = Instant::now();
            black_box(ToolIndex::build(black_box(&tools)));
            start.elapsed()
        })
        .collect();
    builds.sort();
    println!(
        "BENCH\ttoolsearch index build (10k tools)\t{}\t≤ 100 ms",
        millis(percentile(&builds, 0.5))
    );

    let index = ToolIndex::build(&tools);
    let mut times: Vec<Duration> = Vec::new();
    for _ in 0..20 {
        for q in &queries {
            let start = Instant::now();
            black_box(index.search(black_box(q), 5));
            times.push(start.elapsed());
        }
    }
    times.sort();
    println!(
        "BENCH\ttoolsearch query p50 (10k tools)\t{}\t≤ 200 µs",
        micros(percentile(&times, 0.5))
    );
    println!(
        "BENCH\ttoolsearch query p99 (10k tools)\t{}\t-",
        micros(percentile(&times, 0.99))
    );

    let start = Instant::now();
    let mut catalog = Catalog::with_toolsearch();
    for t in &tools {
        catalog.add(t.clone());
    }
    black_box(catalog.search("send an email", 5));
    println!(
        "BENCH\ttoolsearch catalog add 10k + first search\t{}\t-",
        millis(start.elapsed())
    );
    // Another conversation's catalog over the same tools while the first one lives: it takes
    // the first one's index instead of building its own.
    let start = Instant::now();
    let mut second = Catalog::with_toolsearch();
    for t in &tools {
        second.add(t.clone());
    }
    black_box(second.search("send an email", 5));
    println!(
        "BENCH\ttoolsearch catalog add 10k + first search, the same tools in a second catalog\t{}\t< the row above",
        millis(start.elapsed())
    );
    drop((catalog, second));

    hybrid(&base, &queries);

    let start = Instant::now();
    let mut bytes = 0;
    for t in &base {
        bytes += black_box(signature(black_box(t))).len();
    }
    let per = start.elapsed() / base.len() as u32;
    println!(
        "BENCH\ttoolsearch signature per tool ({} tools, {bytes} bytes)\t{}\t-",
        base.len(),
        micros(per)
    );
}

/// Hybrid rows: the query embedding dominates; the cosine over every tool and the fusion
/// with the lexical hits add little.
#[cfg(feature = "semantic")]
fn hybrid(base: &[ToolDef], queries: &[String]) {
    use ishiki_toolsearch::semantic::{Embedder, EmbeddingCache, HybridIndex};
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/all-minilm-l6-v2");
    let embedder = match Embedder::load(&dir) {
        Ok(e) => std::sync::Arc::new(e),
        Err(e) => {
            println!("BENCH\ttoolsearch hybrid (no model: run `cargo xtask tools`: {e})\t-\t-");
            return;
        }
    };
    let start = Instant::now();
    let index = match HybridIndex::build(base, embedder.clone(), &mut EmbeddingCache::default()) {
        Ok(index) => index,
        Err(e) => {
            println!("BENCH\ttoolsearch hybrid build failed: {e}\t-\t-");
            return;
        }
    };
    println!(
        "BENCH\ttoolsearch hybrid build, embedding {} tools\t{}\t-",
        base.len(),
        millis(start.elapsed())
    );
    // A second conversation of the process over the same tools, with its own (empty) cache
    // file: the model remembers what it embedded (issue 26).
    let start = Instant::now();
    if HybridIndex::build(base, embedder.clone(), &mut EmbeddingCache::default()).is_ok() {
        println!(
            "BENCH\ttoolsearch hybrid build, the same {} tools in a second catalog of the process\t{}\t< the row above",
            base.len(),
            millis(start.elapsed())
        );
    }
    let mut embeds = Vec::new();
    let mut searches = Vec::new();
    for q in queries {
        let start = Instant::now();
        black_box(embedder.embed(black_box(q)).ok());
        embeds.push(start.elapsed());
        let start = Instant::now();
        black_box(index.search(black_box(q), 5).ok());
        searches.push(start.elapsed());
    }
    embeds.sort();
    searches.sort();
    println!(
        "BENCH\ttoolsearch query embedding p50 ({} queries)\t{}\t≤ 10 ms",
        queries.len(),
        millis(percentile(&embeds, 0.5))
    );
    println!(
        "BENCH\ttoolsearch hybrid query p50 ({} tools)\t{}\t-",
        base.len(),
        millis(percentile(&searches, 0.5))
    );
    println!(
        "BENCH\ttoolsearch hybrid query p99 ({} tools)\t{}\t-",
        base.len(),
        millis(percentile(&searches, 0.99))
    );
}

/// Without the `semantic` feature there is no hybrid reranker to measure.
#[cfg(not(feature = "semantic"))]
fn hybrid(_base: &[ToolDef], _queries: &[String]) {}
