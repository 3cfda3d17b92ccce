//! `ishiki search-eval --catalog tools.json --queries q.json`: how well tool search finds the
//! right tool in anyone's catalog. Prints hit@1, hit@5 and MRR for Ishiki's ranker and for
//! plain BM25, overall and per query class, as a Markdown table (the same table as
//! `cargo xtask search-eval`).

use std::io::Write;
use std::path::PathBuf;

use ishiki_toolsearch::ToolDef;
use ishiki_toolsearch::eval::{self, EvalQuery};

/// The largest catalog or query file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct SearchEvalOptions {
    /// Catalog files: arrays of tool definitions or MCP listings `{server, tools}`.
    pub catalogs: Vec<PathBuf>,
    /// Query files; each is one set in the table, named after the file stem.
    pub queries: Vec<PathBuf>,
}

fn read(path: &PathBuf) -> Result<String, String> {
    let len = std::fs::metadata(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .len();
    if len > MAX_FILE_BYTES {
        return Err(format!(
            "{} is {len} bytes, more than the {MAX_FILE_BYTES} a catalog or query file may have",
            path.display()
        ));
    }
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Runs the evaluation and writes the table to `out`; an error names the file at fault.
pub fn run(options: &SearchEvalOptions, out: &mut dyn Write) -> Result<(), String> {
    if options.catalogs.is_empty() || options.queries.is_empty() {
        return Err("search-eval needs at least one --catalog and one --queries file".to_owned());
    }
    let mut tools: Vec<ToolDef> = Vec::new();
    for file in &options.catalogs {
        let defs =
            eval::parse_catalog(&read(file)?).map_err(|e| format!("{}: {e}", file.display()))?;
        tools.extend(defs);
    }
    let mut sets: Vec<(String, Vec<EvalQuery>)> = Vec::new();
    for file in &options.queries {
        let queries = eval::parse_queries(&read(file)?, &tools)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        let name = file.file_stem().map_or_else(
            || "queries".to_owned(),
            |s| s.to_string_lossy().into_owned(),
        );
        sets.push((name, queries));
    }
    let report = eval::compare(&tools, &sets);
    writeln!(out, "{} tools, {} query set(s)\n", tools.len(), sets.len())
        .and_then(|()| out.write_all(eval::table(&report.rows).as_bytes()))
        .map_err(|e| format!("cannot write the table: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_a_table_for_a_catalog_and_its_queries() {
        let dir = tempfile::tempdir().expect("temp dir");
        let catalog = dir.path().join("tools.json");
        std::fs::write(
            &catalog,
            r#"[{"name":"send_email","description":"Send an email"},
                {"name":"read_file","description":"Read a file from disk"}]"#,
        )
        .expect("write catalog");
        let queries = dir.path().join("mine.json");
        std::fs::write(
            &queries,
            r#"[{"query":"mail my boss","expect":"send_email","class":"paraphrase"}]"#,
        )
        .expect("write queries");
        let mut out = Vec::new();
        run(
            &SearchEvalOptions {
                catalogs: vec![catalog],
                queries: vec![queries],
            },
            &mut out,
        )
        .expect("evaluation runs");
        let text = String::from_utf8(out).expect("utf-8");
        assert!(text.starts_with("2 tools, 1 query set(s)"), "{text}");
        assert!(
            text.contains("| ishiki lexical | mine | all | 1 |"),
            "{text}"
        );
        assert!(
            text.contains("| plain bm25 | mine | paraphrase | 1 |"),
            "{text}"
        );
    }

    #[test]
    fn an_unknown_expected_tool_names_the_query_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let catalog = dir.path().join("tools.json");
        std::fs::write(&catalog, r#"[{"name":"a"}]"#).expect("write catalog");
        let queries = dir.path().join("q.json");
        std::fs::write(&queries, r#"[{"query":"x","expect":"b"}]"#).expect("write queries");
        let err = run(
            &SearchEvalOptions {
                catalogs: vec![catalog],
                queries: vec![queries.clone()],
            },
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(err.contains("q.json"), "{err}");
        assert!(err.contains("unknown tool \"b\""), "{err}");
    }
}
