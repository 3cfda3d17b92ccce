//! `toolsearch.semantic` in the product (TS-7): `ishiki scenario run` with the sentence-embedding
//! model ranks `search` with the hybrid ranker, keeps the tool vectors in the state directory,
//! and refuses a directory without a usable model. The model is the one `cargo xtask tools`
//! puts in `.tools/all-minilm-l6-v2` (CI runs it first), so without it these tests fail.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{events, root, run};

fn model_dir() -> PathBuf {
    let dir = root().join(".tools/all-minilm-l6-v2");
    assert!(
        dir.join("model.safetensors").is_file(),
        "no all-MiniLM-L6-v2 in {}: run `cargo xtask tools`",
        dir.display()
    );
    dir
}

/// A scenario over the tools of mcp-server-git that searches once for `query`.
fn scenario(dir: &Path, profile: &str, query: &str) -> PathBuf {
    let git = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ishiki-toolsearch/tests/data/mcp-server-git.json");
    let mut tools: Value =
        serde_json::from_slice(&std::fs::read(git).expect("the git tools")).expect("json");
    // A scenario's definitions have no `origin` (the scenario is theirs).
    for tool in tools.as_array_mut().into_iter().flatten() {
        tool.as_object_mut().map(|t| t.remove("origin"));
    }
    std::fs::write(dir.join("git-tools.json"), tools.to_string()).expect("the git tools");
    let path = dir.join("search.yaml");
    let text = format!(
        "version: 1\nname: semantic-search\nprofile: {profile}\n\
         models: {{ models: {{ main: {{ input: [text] }} }} }}\nmain_model: main\n\
         tools:\n  - {{ definitions: git-tools.json, resident: false }}\n\
         steps:\n  - user: {{ id: m1, text: \"look it up\" }}\n\
         \x20 - model: {{ calls: [ {{ id: c1, name: search, input: {{ query: \"{query}\" }} }} ] }}\n\
         \x20 - model: {{ text: done }}\n"
    );
    std::fs::write(&path, text).expect("the scenario is written");
    path
}

fn search_result(stdout: &str) -> String {
    events(stdout)
        .into_iter()
        .find(|e| e["event"] == "tool_result" && e["call_id"] == "c1")
        .and_then(|e| e["text"].as_str().map(str::to_owned))
        .expect("the search has a result")
}

const QUERY: &str = "history of earlier snapshots";

#[test]
fn ts7_scenario_run_with_the_semantic_model_ranks_with_the_hybrid_ranker() {
    let model = model_dir();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = scenario(dir.path(), "{ toolsearch: { enable: true } }", QUERY);

    let lexical = run(&file, &[]);
    assert_eq!(lexical.code, 0, "{}", lexical.stderr);
    let lexical = search_result(&lexical.stdout);
    assert!(!lexical.contains("git_log"), "lexical finds it: {lexical}");

    let state = dir.path().join("state");
    let state_arg = state.to_string_lossy().into_owned();
    let model_arg = model.to_string_lossy().into_owned();
    let args = ["--state", &state_arg, "--semantic-model", &model_arg];
    let hybrid = run(&file, &args);
    assert_eq!(hybrid.code, 0, "{}", hybrid.stderr);
    let text = search_result(&hybrid.stdout);
    insta::assert_snapshot!(text);

    // The tool vectors are kept in the state directory; a second run (a restart) embeds nothing
    // and so leaves the file as it was.
    let cache = state.join("toolsearch-embeddings.json");
    let written = std::fs::metadata(&cache).and_then(|m| m.modified());
    let cached: Value =
        serde_json::from_slice(&std::fs::read(&cache).expect("the cache is written"))
            .expect("the cache is json");
    assert_eq!(cached["vectors"].as_object().map(|v| v.len()), Some(12));
    let again = run(&file, &args);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(search_result(&again.stdout), text);
    assert_eq!(
        std::fs::metadata(&cache).and_then(|m| m.modified()).ok(),
        written.ok(),
        "a restart recomputed the embeddings"
    );

    // The profile key does the same; a relative directory is relative to the scenario file.
    let relative = dir.path().join("model");
    std::fs::create_dir(&relative).expect("dir");
    for name in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::hard_link(model.join(name), relative.join(name))
            .or_else(|_| std::fs::copy(model.join(name), relative.join(name)).map(drop))
            .expect("the model is linked");
    }
    let file = scenario(
        dir.path(),
        "{ toolsearch: { enable: true, semantic: { model: model } } }",
        QUERY,
    );
    let keyed = run(&file, &[]);
    assert_eq!(keyed.code, 0, "{}", keyed.stderr);
    assert_eq!(search_result(&keyed.stdout), text);
}

#[test]
fn ts7_a_missing_or_damaged_model_is_an_assembly_error_naming_the_path() {
    let model = model_dir();
    let dir = tempfile::tempdir().expect("temp dir");
    let damaged = dir.path().join("damaged");
    std::fs::create_dir(&damaged).expect("dir");
    for name in ["config.json", "tokenizer.json"] {
        std::fs::copy(model.join(name), damaged.join(name)).expect("copied");
    }
    let weights = std::fs::read(model.join("model.safetensors")).expect("weights");
    std::fs::write(damaged.join("model.safetensors"), &weights[..4096]).expect("truncated");

    let mut report = String::new();
    for (name, profile, extra) in [
        (
            "a relative directory that does not exist",
            "{ toolsearch: { enable: true, semantic: { model: no-such-model } } }",
            None,
        ),
        (
            "a damaged weights file, from --semantic-model",
            "{ toolsearch: { enable: true } }",
            Some(damaged.to_string_lossy().into_owned()),
        ),
        (
            "--semantic-model without toolsearch",
            "{}",
            Some(damaged.to_string_lossy().into_owned()),
        ),
    ] {
        let file = scenario(dir.path(), profile, QUERY);
        let args: Vec<&str> = match &extra {
            Some(dir) => vec!["--semantic-model", dir],
            None => Vec::new(),
        };
        let out = run(&file, &args);
        assert_eq!(out.code, 2, "{name}: {}", out.stderr);
        let lines = events(&out.stdout);
        assert_eq!(lines.len(), 1, "{name}: one error event: {}", out.stdout);
        let shown = out
            .stdout
            .replace(&dir.path().to_string_lossy().into_owned(), "[DIR]");
        report.push_str(&format!("## {name}\n{shown}\n"));
    }
    insta::assert_snapshot!(report);
}
