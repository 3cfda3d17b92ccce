//! TS-6 retrieval quality on a fixed set: realistic tool definitions from many domains and
//! queries written as paraphrases (what a user or model would type, not the tool's name).
//!
//! `queries.json` was written before the ranker was tuned and is the set the ranker was tuned
//! on; `queries_holdout.json` was written afterwards and never tuned against, so the gap
//! between the two shows how much the tuning overfits.

use ishiki_toolsearch::eval::{self, EvalQuery};
use ishiki_toolsearch::{ToolDef, ToolIndex, parse_definitions};
use serde::Deserialize;

#[derive(Deserialize)]
struct Query {
    query: String,
    expect: String,
}

pub(crate) fn tools() -> Vec<ToolDef> {
    parse_definitions(include_str!("../data/tools.json")).unwrap()
}

struct Recall {
    at1: f64,
    at5: f64,
    misses: Vec<String>,
}

fn evaluate(index: &ToolIndex, tools: &[ToolDef], queries: &str) -> Recall {
    let queries: Vec<Query> = serde_json::from_str(queries).unwrap();
    let (mut at1, mut at5) = (0usize, 0usize);
    let mut misses = Vec::new();
    for q in &queries {
        assert!(
            tools.iter().any(|t| t.name == q.expect),
            "unknown tool {}",
            q.expect
        );
        let hits = index.search(&q.query, 5);
        match hits.iter().position(|h| h.name == q.expect) {
            Some(0) => {
                at1 += 1;
                at5 += 1;
            }
            Some(_) => at5 += 1,
            None => misses.push(format!(
                "{:?} → want {}, got {:?}",
                q.query,
                q.expect,
                hits.iter().map(|h| h.name.as_str()).collect::<Vec<_>>()
            )),
        }
    }
    let n = queries.len() as f64;
    Recall {
        at1: at1 as f64 / n,
        at5: at5 as f64 / n,
        misses,
    }
}

fn report(name: &str, queries: usize, recall: &Recall) {
    println!(
        "retrieval {name}: {queries} queries, recall@1 {:.3}, recall@5 {:.3}",
        recall.at1, recall.at5
    );
    for miss in &recall.misses {
        println!("  miss: {miss}");
    }
}

#[test]
fn ts6_recall_on_paraphrased_queries() {
    let tools = tools();
    assert!(tools.len() >= 150, "{} tools", tools.len());
    let index = ToolIndex::build(&tools);
    let main = include_str!("../data/queries.json");
    let count = serde_json::from_str::<Vec<Query>>(main).unwrap().len();
    assert!(count >= 150, "{count} queries");
    let recall = evaluate(&index, &tools, main);
    println!("retrieval set: {} tools", tools.len());
    report("queries.json", count, &recall);
    assert!(recall.at5 >= 0.9, "recall@5 {:.3} < 0.9", recall.at5);
}

#[test]
fn ts6_recall_on_held_out_queries() {
    let tools = tools();
    let index = ToolIndex::build(&tools);
    let holdout = include_str!("../data/queries_holdout.json");
    let count = serde_json::from_str::<Vec<Query>>(holdout).unwrap().len();
    let recall = evaluate(&index, &tools, holdout);
    report("queries_holdout.json", count, &recall);
    // A regression guard, not a target: unseen paraphrases expose the thesaurus's gaps.
    assert!(
        recall.at5 >= 0.7,
        "held-out recall@5 {:.3} < 0.7",
        recall.at5
    );
}

#[test]
fn ts6_every_tool_is_found_by_its_exact_name() {
    let tools = tools();
    let index = ToolIndex::build(&tools);
    for tool in &tools {
        let hits = index.search(&tool.name, 5);
        assert_eq!(hits[0].name, tool.name);
        let hits = index.search(&format!("select:{}", tool.name), 5);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].name, tool.name);
    }
}

/// The MCP corpus: 359 tools as 25 public servers list them, and queries in two halves
/// (`tune.json`, and `heldout.json`, frozen before any tuning).
fn mcp_corpus() -> (Vec<ToolDef>, Vec<EvalQuery>, Vec<EvalQuery>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<_> = std::fs::read_dir(dir.join("mcp-catalog"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut tools = Vec::new();
    for file in files {
        tools.extend(eval::parse_catalog(&std::fs::read_to_string(file).unwrap()).unwrap());
    }
    let half = |name: &str| {
        let text = std::fs::read_to_string(dir.join(format!("mcp-queries/{name}.json"))).unwrap();
        eval::parse_queries(&text, &tools).unwrap()
    };
    let (tune, heldout) = (half("tune"), half("heldout"));
    (tools, tune, heldout)
}

#[test]
fn ts6_mcp_corpus_lexical_ranking_beats_plain_bm25_on_both_halves() {
    let (tools, tune, heldout) = mcp_corpus();
    assert!(tools.len() >= 300, "{} tools", tools.len());
    let covered: std::collections::HashSet<&str> = tune
        .iter()
        .chain(&heldout)
        .map(|q| q.expect.as_str())
        .collect();
    assert_eq!(covered.len(), tools.len(), "a query for every tool");
    let index = ToolIndex::build(&tools);
    let bm25 = eval::PlainBm25::build(&tools);
    for (name, queries) in [("tune", &tune), ("heldout", &heldout)] {
        let ours = eval::evaluate(queries, |q| {
            index.search(q, 10).into_iter().map(|h| h.name).collect()
        });
        let plain = eval::evaluate(queries, |q| bm25.search(q, 10));
        println!(
            "{name}: ishiki {:?}\n{name}: plain bm25 {:?}",
            ours.overall, plain.overall
        );
        assert!(ours.overall.hit5 > plain.overall.hit5, "{name}");
        assert!(ours.overall.mrr > plain.overall.mrr, "{name}");
        // Typo tolerance: misspelled queries do about as well as the others.
        let typo = ours.per_class["typo"];
        assert!(typo.hit5 >= 0.8, "{name}: typo hit@5 {:.3}", typo.hit5);
    }
}
