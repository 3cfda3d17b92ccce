//! Measuring retrieval: labelled queries over a catalog, hit@1, hit@5 and MRR per query class,
//! and a plain BM25 baseline to compare against.
//!
//! A query file is a JSON array of `{query, expect, class?, also?}`: `expect` is the tool that
//! should be found, `also` lists tools that would answer it as well (a hit on any counts),
//! `class` groups queries in the report (`paraphrase`, `typo`, …). A catalog file is either a
//! JSON array of tool definitions or an MCP `tools/list` result with a server name
//! (`{server, tools: [...]}`); the tools of the latter are named `<server>_<tool>` with origin
//! `mcp:<server>`, as `ishiki-mcp` names them.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Deserialize;
use serde_json::Value;

use crate::def::{ToolDef, parse_definitions};
use crate::error::{ToolsearchError, ToolsearchErrorKind};
use crate::index::ToolIndex;
use crate::text::split_identifier;

/// How many hits a query is scored on: MRR counts the first right tool in the top 10.
pub const EVAL_DEPTH: usize = 10;
/// The largest query file or catalog accepted, in queries or tools.
pub const MAX_EVAL_ITEMS: usize = 100_000;

/// One labelled query.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct EvalQuery {
    /// What the user asks.
    pub query: String,
    /// The tool that should be found.
    pub expect: String,
    /// The query's class in the report; `all` when absent.
    #[serde(default)]
    pub class: Option<String>,
    /// Other tools that answer the query as well.
    #[serde(default)]
    pub also: Vec<String>,
}

impl EvalQuery {
    fn accepts(&self, name: &str) -> bool {
        self.expect == name || self.also.iter().any(|a| a == name)
    }
}

/// Parses a query file and checks that every named tool is in `tools`.
pub fn parse_queries(json: &str, tools: &[ToolDef]) -> Result<Vec<EvalQuery>, ToolsearchError> {
    let queries: Vec<EvalQuery> = serde_json::from_str(json).map_err(|e| {
        ToolsearchError::new(ToolsearchErrorKind::InvalidJson, format!("queries: {e}"))
    })?;
    if queries.len() > MAX_EVAL_ITEMS {
        return Err(ToolsearchError::new(
            ToolsearchErrorKind::InvalidJson,
            format!(
                "queries: {} queries, at most {MAX_EVAL_ITEMS}",
                queries.len()
            ),
        ));
    }
    let names: HashSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for q in &queries {
        for name in std::iter::once(&q.expect).chain(&q.also) {
            if !names.contains(name.as_str()) {
                return Err(ToolsearchError::new(
                    ToolsearchErrorKind::InvalidDefinition,
                    format!("query {:?} expects unknown tool {name:?}", q.query),
                ));
            }
        }
    }
    Ok(queries)
}

#[derive(Deserialize)]
struct McpListing {
    server: String,
    tools: Vec<Value>,
}

/// Parses a catalog file: an array of tool definitions, or an MCP listing
/// `{server, tools}` whose tools become `<server>_<tool>` with origin `mcp:<server>`.
pub fn parse_catalog(json: &str) -> Result<Vec<ToolDef>, ToolsearchError> {
    let text = json.trim_start();
    if text.starts_with('[') {
        return parse_definitions(json);
    }
    let listing: McpListing = serde_json::from_str(json).map_err(|e| {
        ToolsearchError::new(ToolsearchErrorKind::InvalidJson, format!("catalog: {e}"))
    })?;
    let mut defs = Vec::with_capacity(listing.tools.len());
    for tool in listing.tools {
        let mut def: ToolDef = serde_json::from_value(tool).map_err(|e| {
            ToolsearchError::new(
                ToolsearchErrorKind::InvalidJson,
                format!("catalog tool: {e}"),
            )
        })?;
        def.name = format!("{}_{}", listing.server, def.name);
        def.origin = Some(format!("mcp:{}", listing.server));
        defs.push(def);
    }
    let mut seen = HashSet::new();
    for def in &defs {
        def.validate()?;
        if !seen.insert(def.name.as_str()) {
            return Err(ToolsearchError::new(
                ToolsearchErrorKind::DuplicateName,
                format!("tool {:?} is defined twice", def.name),
            ));
        }
    }
    Ok(defs)
}

/// hit@1, hit@5 and MRR over a set of queries.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Scores {
    /// Number of queries.
    pub queries: usize,
    /// Share of queries whose first hit is right.
    pub hit1: f64,
    /// Share of queries with a right tool in the first five hits.
    pub hit5: f64,
    /// Mean reciprocal rank of the first right tool in the first [`EVAL_DEPTH`] hits.
    pub mrr: f64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Sums {
    n: usize,
    hit1: usize,
    hit5: usize,
    rr: f64,
}

impl Sums {
    fn add(&mut self, rank: Option<usize>) {
        self.n += 1;
        if let Some(r) = rank {
            self.hit1 += usize::from(r == 0);
            self.hit5 += usize::from(r < 5);
            self.rr += 1.0 / (r + 1) as f64;
        }
    }

    fn scores(&self) -> Scores {
        let n = self.n.max(1) as f64;
        Scores {
            queries: self.n,
            hit1: self.hit1 as f64 / n,
            hit5: self.hit5 as f64 / n,
            mrr: self.rr / n,
        }
    }
}

/// A query whose right tool was not first.
#[derive(Debug, Clone, PartialEq)]
pub struct Miss {
    /// The query.
    pub query: String,
    /// The tool it expects.
    pub expect: String,
    /// Rank of the first right tool (0 is first), if in the first [`EVAL_DEPTH`].
    pub rank: Option<usize>,
    /// The first hits.
    pub got: Vec<String>,
}

/// The result of one ranker over one query set.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// Over all queries.
    pub overall: Scores,
    /// Per query class, by class name.
    pub per_class: BTreeMap<String, Scores>,
    /// Queries whose right tool was not first.
    pub misses: Vec<Miss>,
}

/// Scores `rank` (a query to tool names, best first) on `queries`.
pub fn evaluate(queries: &[EvalQuery], mut rank: impl FnMut(&str) -> Vec<String>) -> Evaluation {
    let mut overall = Sums::default();
    let mut classes: BTreeMap<String, Sums> = BTreeMap::new();
    let mut misses = Vec::new();
    for q in queries {
        let got = rank(&q.query);
        let found = got.iter().take(EVAL_DEPTH).position(|n| q.accepts(n));
        overall.add(found);
        let class = q.class.clone().unwrap_or_else(|| "all".to_owned());
        classes.entry(class).or_default().add(found);
        if found != Some(0) {
            misses.push(Miss {
                query: q.query.clone(),
                expect: q.expect.clone(),
                rank: found,
                got: got.into_iter().take(5).collect(),
            });
        }
    }
    Evaluation {
        overall: overall.scores(),
        per_class: classes.into_iter().map(|(c, s)| (c, s.scores())).collect(),
        misses,
    }
}

/// One row of a report table: a ranker over a query set, overall or one class.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The ranker (`ishiki lexical`, `plain bm25`, …).
    pub ranker: String,
    /// The query set (`tune`, `heldout`, …).
    pub set: String,
    /// `all` or a class name.
    pub class: String,
    /// The figures.
    pub scores: Scores,
}

/// The rows of one evaluation: overall first, then each class.
pub fn rows(ranker: &str, set: &str, evaluation: &Evaluation) -> Vec<Row> {
    let mut out = vec![Row {
        ranker: ranker.to_owned(),
        set: set.to_owned(),
        class: "all".to_owned(),
        scores: evaluation.overall,
    }];
    for (class, scores) in &evaluation.per_class {
        if class != "all" {
            out.push(Row {
                ranker: ranker.to_owned(),
                set: set.to_owned(),
                class: class.clone(),
                scores: *scores,
            });
        }
    }
    out
}

/// A Markdown table of `rows`.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| ranker | set | class | queries | hit@1 | hit@5 | MRR |\n|---|---|---|---:|---:|---:|---:|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |\n",
            r.ranker, r.set, r.class, r.scores.queries, r.scores.hit1, r.scores.hit5, r.scores.mrr
        ));
    }
    out
}

/// The rows of a comparison, and what it compared.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Per ranker, query set and class.
    pub rows: Vec<Row>,
}

/// Ishiki's lexical ranker and plain BM25 over the same `tools`, on each named query set.
pub fn compare(tools: &[ToolDef], sets: &[(String, Vec<EvalQuery>)]) -> Report {
    let index = ToolIndex::build(tools);
    let bm25 = PlainBm25::build(tools);
    let mut report = Report::default();
    for (set, queries) in sets {
        let lexical = evaluate(queries, |q| {
            index
                .search(q, EVAL_DEPTH)
                .into_iter()
                .map(|h| h.name)
                .collect()
        });
        report.rows.extend(rows("ishiki lexical", set, &lexical));
        let plain = evaluate(queries, |q| bm25.search(q, EVAL_DEPTH));
        report.rows.extend(rows("plain bm25", set, &plain));
    }
    report
}

/// Plain BM25 (k1 1.2, b 0.75) over one field per tool: the words of its name (split at `_`,
/// `-`, `.` and camelCase), its description and its top-level parameter names, lower-cased,
/// split on anything not a letter or digit. No stemming, stopwords, field weights or
/// expansion: the baseline the ranker is measured against.
#[derive(Debug, Clone, Default)]
pub struct PlainBm25 {
    names: Vec<String>,
    lens: Vec<f64>,
    postings: HashMap<String, Vec<(u32, f64)>>,
    avg_len: f64,
}

fn plain_words(text: &str, out: &mut Vec<String>) {
    for w in text.split(|c: char| !c.is_alphanumeric()) {
        if !w.is_empty() {
            out.push(w.to_lowercase());
        }
    }
}

impl PlainBm25 {
    /// The baseline index over `tools`.
    pub fn build(tools: &[ToolDef]) -> Self {
        let mut index = Self::default();
        let mut total = 0.0;
        for (doc, tool) in tools.iter().enumerate() {
            let mut words = Vec::new();
            split_identifier(&tool.name, |w| words.push(w.to_lowercase()));
            plain_words(&tool.description, &mut words);
            if let Some(props) = tool
                .input_schema
                .get("properties")
                .and_then(Value::as_object)
            {
                for name in props.keys() {
                    split_identifier(name, |w| words.push(w.to_lowercase()));
                }
            }
            let mut tf: HashMap<String, f64> = HashMap::new();
            for w in &words {
                *tf.entry(w.clone()).or_default() += 1.0;
            }
            for (w, n) in tf {
                index.postings.entry(w).or_default().push((doc as u32, n));
            }
            index.names.push(tool.name.clone());
            index.lens.push(words.len() as f64);
            total += words.len() as f64;
        }
        index.avg_len = if tools.is_empty() {
            1.0
        } else {
            (total / tools.len() as f64).max(1.0)
        };
        index
    }

    /// At most `k` tool names for `query`, best first, ties broken by name.
    pub fn search(&self, query: &str, k: usize) -> Vec<String> {
        let mut words = Vec::new();
        plain_words(query, &mut words);
        let n = self.names.len() as f64;
        let mut scores: HashMap<u32, f64> = HashMap::new();
        for w in &words {
            let Some(postings) = self.postings.get(w) else {
                continue;
            };
            let df = postings.len() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(doc, tf) in postings {
                let norm = 1.0 - 0.75 + 0.75 * self.lens[doc as usize] / self.avg_len;
                *scores.entry(doc).or_default() += idf * tf * 2.2 / (tf + 1.2 * norm);
            }
        }
        let mut ranked: Vec<(u32, f64)> = scores.into_iter().collect();
        ranked.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| self.names[a.0 as usize].cmp(&self.names[b.0 as usize]))
        });
        ranked
            .into_iter()
            .take(k)
            .map(|(d, _)| self.names[d as usize].clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<ToolDef> {
        vec![
            ToolDef::new(
                "read_file",
                "Read a file from disk",
                json!({"type": "object"}),
            ),
            ToolDef::new(
                "send_email",
                "Send an email message",
                json!({"type": "object"}),
            ),
        ]
    }

    #[test]
    fn scores_count_first_right_hit_and_alternatives() {
        let queries = vec![
            EvalQuery {
                query: "a".into(),
                expect: "x".into(),
                class: Some("typo".into()),
                also: vec![],
            },
            EvalQuery {
                query: "b".into(),
                expect: "x".into(),
                class: None,
                also: vec!["y".into()],
            },
        ];
        let e = evaluate(&queries, |q| {
            if q == "a" {
                vec!["z".into(), "x".into()]
            } else {
                vec!["y".into()]
            }
        });
        assert_eq!(e.overall.queries, 2);
        assert!((e.overall.hit1 - 0.5).abs() < 1e-9);
        assert!((e.overall.hit5 - 1.0).abs() < 1e-9);
        assert!((e.overall.mrr - 0.75).abs() < 1e-9);
        assert_eq!(e.per_class["typo"].hit1, 0.0);
        assert_eq!(e.misses.len(), 1);
        assert_eq!(e.misses[0].rank, Some(1));
    }

    #[test]
    fn unknown_expected_tools_are_rejected() {
        let err = parse_queries(r#"[{"query":"q","expect":"nope"}]"#, &tools()).unwrap_err();
        assert!(err.message().contains("unknown tool \"nope\""));
    }

    #[test]
    fn mcp_listings_are_named_after_their_server() {
        let defs = parse_catalog(
            r#"{"server":"fs","package":"p","tools":[{"name":"read","inputSchema":{"type":"object"}}]}"#,
        )
        .unwrap();
        assert_eq!(defs[0].name, "fs_read");
        assert_eq!(defs[0].origin.as_deref(), Some("mcp:fs"));
    }

    #[test]
    fn plain_bm25_ranks_by_shared_words() {
        let index = PlainBm25::build(&tools());
        assert_eq!(index.search("send an email", 5)[0], "send_email");
        assert_eq!(index.search("file", 5), vec!["read_file".to_owned()]);
    }
}
