//! `cargo xtask search-eval` runs this: the retrieval table (hit@1, hit@5, MRR per ranker,
//! query set and class) over the MCP corpus in `tests/data`, or over files given.
//!
//! Usage: `search_eval [--catalog FILE]... [--queries NAME=FILE]... [--misses NAME]
//! [--model DIR]`.
//! Without `--catalog`, every file of `tests/data/mcp-catalog` is loaded; without `--queries`,
//! `tune` and `heldout` of `tests/data/mcp-queries`. `--misses NAME` also lists what that set
//! missed (for tuning: use it with `tune` only). Built with the `semantic` feature, the hybrid
//! ranker is measured too, with the model in `--model DIR` (default: the workspace's
//! `.tools/all-minilm-l6-v2`, which `cargo xtask tools` fills); tool embeddings are cached in
//! `target/search-eval-embeddings.json`.

#![allow(clippy::print_stdout)] // An evaluation binary reports on stdout.

use std::path::{Path, PathBuf};

use ishiki_toolsearch::eval::{self, EvalQuery};
use ishiki_toolsearch::{ToolDef, ToolIndex};

fn main() {
    if let Err(e) = run() {
        eprintln!("search_eval: {e}");
        std::process::exit(1);
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn run() -> Result<(), String> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut catalogs: Vec<PathBuf> = Vec::new();
    let mut sets: Vec<(String, PathBuf)> = Vec::new();
    let mut misses_of: Option<String> = None;
    let mut model: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--catalog" => catalogs.push(value()?.into()),
            "--queries" => {
                let v = value()?;
                let (name, file) = v.split_once('=').unwrap_or(("queries", &v));
                sets.push((name.to_owned(), file.into()));
            }
            "--misses" => misses_of = Some(value()?),
            "--model" => model = Some(value()?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if catalogs.is_empty() {
        let dir = data.join("mcp-catalog");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        catalogs = files;
    }
    if sets.is_empty() {
        for name in ["tune", "heldout"] {
            sets.push((
                name.to_owned(),
                data.join(format!("mcp-queries/{name}.json")),
            ));
        }
    }
    let mut tools: Vec<ToolDef> = Vec::new();
    for file in &catalogs {
        let defs =
            eval::parse_catalog(&read(file)?).map_err(|e| format!("{}: {e}", file.display()))?;
        tools.extend(defs);
    }
    let mut loaded: Vec<(String, Vec<EvalQuery>)> = Vec::new();
    for (name, file) in &sets {
        let queries = eval::parse_queries(&read(file)?, &tools)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        loaded.push((name.clone(), queries));
    }
    let mut report = eval::compare(&tools, &loaded);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let model = model.unwrap_or_else(|| root.join(".tools/all-minilm-l6-v2"));
    let hybrid = hybrid_rows(&tools, &loaded, &model, &root, misses_of.as_deref())?;
    report.rows.extend(hybrid.0);
    println!(
        "{} tools from {} catalog file(s); {} query set(s)\n",
        tools.len(),
        catalogs.len(),
        loaded.len()
    );
    print!("{}", eval::table(&report.rows));
    print!("{}", hybrid.1);
    if let Some(set) = misses_of {
        let index = ToolIndex::build(&tools);
        let queries = loaded
            .iter()
            .find(|(n, _)| *n == set)
            .map(|(_, q)| q)
            .ok_or_else(|| format!("no query set named {set:?}"))?;
        let e = eval::evaluate(queries, |q| {
            index
                .search(q, eval::EVAL_DEPTH)
                .into_iter()
                .map(|h| h.name)
                .collect()
        });
        println!("\nmisses of ishiki lexical on {set}:");
        for m in &e.misses {
            let rank = m.rank.map_or("-".to_owned(), |r| (r + 1).to_string());
            println!("  [{rank}] {:?} → {} ; got {:?}", m.query, m.expect, m.got);
        }
    }
    Ok(())
}

/// Rows of the hybrid ranker, and text to print after the table (latency, misses).
#[cfg(feature = "semantic")]
fn hybrid_rows(
    tools: &[ToolDef],
    sets: &[(String, Vec<EvalQuery>)],
    model: &Path,
    root: &Path,
    misses_of: Option<&str>,
) -> Result<(Vec<eval::Row>, String), String> {
    use ishiki_toolsearch::semantic::{Embedder, EmbeddingCache, HybridIndex};
    use std::fmt::Write as _;
    use std::time::Instant;

    let embedder = Embedder::load(model).map_err(|e| {
        format!("{e} (the semantic feature needs the model: run `cargo xtask tools` or pass --model DIR)")
    })?;
    let cache_path = root.join("target/search-eval-embeddings.json");
    let mut cache = EmbeddingCache::open(&cache_path);
    let start = Instant::now();
    let mut index = HybridIndex::build(tools, std::sync::Arc::new(embedder), &mut cache)
        .map_err(|e| e.to_string())?;
    if let Some(share) = std::env::var("ISHIKI_LEXICAL_SHARE")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        index.set_lexical_share(share);
    }
    let build = start.elapsed();
    cache.save(&cache_path).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    let mut text = String::new();
    let mut times = Vec::new();
    for (set, queries) in sets {
        let e = eval::evaluate(queries, |q| {
            let start = Instant::now();
            let hits = index.search(q, eval::EVAL_DEPTH).unwrap_or_default();
            times.push(start.elapsed());
            hits.into_iter().map(|h| h.name).collect()
        });
        rows.extend(eval::rows("ishiki hybrid", set, &e));
        if misses_of == Some(set.as_str()) {
            let _ = writeln!(text, "\nmisses of ishiki hybrid on {set}:");
            for m in &e.misses {
                let rank = m.rank.map_or("-".to_owned(), |r| (r + 1).to_string());
                let _ = writeln!(
                    text,
                    "  [{rank}] {:?} → {} ; got {:?}",
                    m.query, m.expect, m.got
                );
            }
        }
    }
    times.sort();
    let p50 = times.get(times.len() / 2).copied().unwrap_or_default();
    let p99 = times
        .get(times.len() * 99 / 100)
        .copied()
        .unwrap_or_default();
    let _ = writeln!(
        text,
        "\nhybrid: index build (embeddings, cached or not) {:.1} s; query p50 {:.1} ms, p99 {:.1} ms",
        build.as_secs_f64(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    Ok((rows, text))
}

/// Without the `semantic` feature there is no hybrid ranker to measure.
#[cfg(not(feature = "semantic"))]
fn hybrid_rows(
    _tools: &[ToolDef],
    _sets: &[(String, Vec<EvalQuery>)],
    _model: &Path,
    _root: &Path,
    _misses_of: Option<&str>,
) -> Result<(Vec<eval::Row>, String), String> {
    Ok((
        Vec::new(),
        "\n(ishiki hybrid not measured: built without the `semantic` feature)\n".to_owned(),
    ))
}
