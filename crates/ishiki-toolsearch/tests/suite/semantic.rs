//! The semantic reranker (feature `semantic`) with the real all-MiniLM-L6-v2 weights, which
//! `cargo xtask tools` extracts into the workspace's `.tools/all-minilm-l6-v2` (or set
//! `ISHIKI_MINILM_DIR`). Without them these tests fail, on purpose: CI builds every feature
//! after `cargo xtask tools`, so a missing model is a broken setup, not a skip.

use std::path::PathBuf;
use std::sync::Arc;

use ishiki_toolsearch::eval::{self, EvalQuery};
use ishiki_toolsearch::semantic::{Embedder, EmbeddingCache, HybridIndex};
use ishiki_toolsearch::{ToolDef, ToolIndex};

fn model_dir() -> PathBuf {
    std::env::var_os("ISHIKI_MINILM_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/all-minilm-l6-v2"),
        PathBuf::from,
    )
}

fn embedder() -> Embedder {
    let dir = model_dir();
    Embedder::load(&dir).unwrap_or_else(|e| {
        panic!(
            "the semantic tests need all-MiniLM-L6-v2 in {}: run `cargo xtask tools` \
             (or set ISHIKI_MINILM_DIR): {e}",
            dir.display()
        )
    })
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn wordpiece_matches_the_bert_vocabulary() {
    let model = embedder();
    // [CLS] hello , world ! [SEP] in the uncased BERT vocabulary.
    assert_eq!(
        model.tokenize("Hello, World!"),
        [101, 7592, 1010, 2088, 999, 102]
    );
    let ids = model.tokenize("kubernetes screenshots");
    assert!(ids.len() > 4, "sub-words: {ids:?}");
    assert!(!ids.contains(&100), "no [UNK] in {ids:?}");
    // Long input is cut to the model's 128 tokens.
    assert_eq!(model.tokenize(&"word ".repeat(500)).len(), 128);
}

/// Embeddings computed outside Rust (token ids by the Hugging Face `tokenizers` library, the
/// forward pass in numpy float64 over the same weights file; see the fixture's `how`).
#[test]
fn embeddings_match_an_independent_reference() {
    let model = embedder();
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/minilm-reference.json"),
    )
    .expect("fixture");
    let fixture: serde_json::Value = serde_json::from_str(&text).expect("fixture is json");
    let cases = fixture["cases"].as_array().expect("cases");
    assert!(cases.len() >= 5);
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let ids: Vec<u32> = serde_json::from_value(case["ids"].clone()).expect("ids");
        let want: Vec<f32> = serde_json::from_value(case["embedding"].clone()).expect("vector");
        assert_eq!(model.tokenize(text), ids, "token ids of {text:?}");
        let got = model.embed(text).expect("embedding");
        let similarity = cosine(&got, &want);
        // Measured: cosine ≥ 0.9999991, coordinates within 6e-7 (the fixture keeps 6 decimals).
        assert!(similarity >= 0.9999, "{text:?}: cosine {similarity}");
        let worst = got
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 1e-5, "{text:?}: a coordinate is off by {worst}");
    }
}

#[test]
fn embeddings_are_unit_vectors_close_for_close_meanings() {
    let model = embedder();
    let weather = model.embed("what's the weather like in paris").unwrap();
    let forecast = model.embed("get the current forecast for a city").unwrap();
    let branch = model.embed("delete a git branch").unwrap();
    assert_eq!(weather.len(), 384);
    let norm: f32 = weather.iter().map(|x| x * x).sum();
    assert!((norm - 1.0).abs() < 1e-4, "norm² {norm}");
    assert!(
        cosine(&weather, &forecast) > cosine(&weather, &branch) + 0.2,
        "forecast {} vs branch {}",
        cosine(&weather, &forecast),
        cosine(&weather, &branch)
    );
}

fn memory_and_linear() -> Vec<ToolDef> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/mcp-catalog");
    let mut tools = Vec::new();
    for server in ["memory", "linear", "slack", "maps"] {
        let text = std::fs::read_to_string(dir.join(format!("{server}.json"))).unwrap();
        tools.extend(eval::parse_catalog(&text).unwrap());
    }
    tools
}

#[test]
fn hybrid_finds_tools_by_meaning_where_words_differ() {
    let tools = memory_and_linear();
    let mut cache = EmbeddingCache::default();
    let model = Arc::new(embedder());
    let index = HybridIndex::build(&tools, model.clone(), &mut cache).unwrap();
    let lexical = ToolIndex::build(&tools);
    let queries: Vec<EvalQuery> = serde_json::from_str(
        r#"[
          {"query": "who am I logged in as on linear", "expect": "linear_linear_get_user"},
          {"query": "how high above sea level are these coordinates", "expect": "maps_maps_elevation"},
          {"query": "forget a person entirely, with their links", "expect": "memory_delete_entities"},
          {"query": "put a thumbs up on that slack message", "expect": "slack_slack_add_reaction"}
        ]"#,
    )
    .unwrap();
    let hybrid = eval::evaluate(&queries, |q| {
        index
            .search(q, 5)
            .unwrap()
            .into_iter()
            .map(|h| h.name)
            .collect()
    });
    let plain = eval::evaluate(&queries, |q| {
        lexical.search(q, 5).into_iter().map(|h| h.name).collect()
    });
    println!("hybrid {:?}\nlexical {:?}", hybrid.overall, plain.overall);
    assert!(hybrid.overall.hit5 >= 0.99, "{:?}", hybrid.misses);
    assert!(
        hybrid.overall.mrr > plain.overall.mrr,
        "{:?}",
        hybrid.misses
    );
    // Misspelt words mean nothing to the model; the lexical ranker's correction weighs more.
    assert!(!model.knows_word("coment") && model.knows_word("Links"));
    let hits = index.search("delte my coment on linear", 3).unwrap();
    assert_eq!(hits[0].name, "linear_linear_delete_comment", "{hits:?}");
    // An exact name and `select:` still go first, as in the lexical index.
    let hits = index.search("slack_slack_post_message", 3).unwrap();
    assert_eq!(hits[0].name, "slack_slack_post_message");
    let hits = index.search("select:maps_maps_geocode", 3).unwrap();
    assert_eq!(hits.len(), 1);
}

#[test]
fn a_missing_model_is_a_clear_error() {
    let err = Embedder::load(std::path::Path::new("/nonexistent/model")).unwrap_err();
    assert!(
        err.message()
            .contains("cannot read /nonexistent/model/config.json"),
        "{err}"
    );
}
