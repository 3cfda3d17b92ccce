//! `cargo xtask search-eval` runs this: the retrieval table (hit@1, hit@5, MRR per ranker,
//! query set and class) over the MCP corpus in `tests/data`, or over files given.
//!
//! Usage: `search_eval [--catalog FILE]... [--queries NAME=FILE]... [--misses NAME]`.
//! Without `--catalog`, every file of `tests/data/mcp-catalog` is loaded; without `--queries`,
//! `tune` and `heldout` of `tests/data/mcp-queries`. `--misses NAME` also lists what that set
//! missed (for tuning: use it with `tune` only).

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
    let report = eval::compare(&tools, &loaded);
    println!(
        "{} tools from {} catalog file(s); {} query set(s)\n",
        tools.len(),
        catalogs.len(),
        loaded.len()
    );
    print!("{}", eval::table(&report.rows));
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
