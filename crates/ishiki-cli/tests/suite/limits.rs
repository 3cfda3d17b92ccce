//! Tool calls under limits end to end (issue 13): a fixture asked for 100,000 lines × 100,000
//! columns, direct or from a program, fails with a clear error and the run goes on; a result
//! over `tools.maxResultBytes` fails naming the tool and the limit. YAML over its size budget
//! reads as such.

use serde_json::Value;

use super::{events, run};

fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("limits.yaml");
    std::fs::write(&path, text).expect("the scenario is written");
    (dir, path)
}

fn result<'a>(events: &'a [Value], id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["event"] == "tool_result" && e["call_id"] == id)
        .unwrap_or_else(|| panic!("no result for {id}"))
}

const SCENARIO: &str = r#"version: 1
name: limits
profile:
  codemode: { enable: true }
  tools: { maxResultBytes: 1048576 }
models:
  models:
    main: { input: [text], toolCalling: native }
main_model: main
tools:
  - { name: large_text, resident: true }
steps:
  - model: { calls: [ { id: k1, name: large_text, input: { lines: 100000, width: 100000 } } ] }
  - model: { calls: [ { id: k2, name: codemode, input: { code: "try { await tools.large_text({ lines: 100000, width: 100000 }); return 'no'; } catch (e) { return e.message; }" } } ] }
  - model: { calls: [ { id: k3, name: large_text, input: { lines: 100000, width: 100 } } ] }
  - model: { calls: [ { id: k4, name: codemode, input: { code: "try { await tools.large_text({ lines: 100000, width: 100 }); return 'no'; } catch (e) { return e.message; }" } } ] }
  - model: { calls: [ { id: k5, name: large_text, input: { lines: 2 } } ] }
  - model: { text: "done" }
"#;

const FIXTURE_REFUSES: &str = "large_text would produce about 10000100000 bytes, over the fixture's limit of 67108864 bytes: ask for fewer lines or a smaller width";
const OVER_CAP: &str = "the result of the tool `large_text` is larger than 1048576 bytes (tools.maxResultBytes): ask it for less";

#[test]
fn a_huge_fixture_result_fails_with_a_clear_error_and_the_run_goes_on() {
    let (_dir, path) = write(SCENARIO);
    let out = run(&path, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let events = events(&out.stdout);
    assert_eq!(result(&events, "k1")["is_error"], true);
    assert_eq!(result(&events, "k1")["text"], FIXTURE_REFUSES);
    assert!(
        result(&events, "k2")["text"]
            .as_str()
            .is_some_and(|t| t.contains(FIXTURE_REFUSES)),
        "{}",
        result(&events, "k2")
    );
    assert_eq!(result(&events, "k3")["is_error"], true);
    assert_eq!(result(&events, "k3")["text"], OVER_CAP);
    assert!(
        result(&events, "k4")["text"]
            .as_str()
            .is_some_and(|t| t.contains(OVER_CAP)),
        "{}",
        result(&events, "k4")
    );
    assert_eq!(result(&events, "k5")["is_error"], false);
    assert_eq!(
        result(&events, "k5")["text"],
        "report line 1\nreport line 2\n"
    );
}

#[test]
fn a_scenario_over_the_yaml_size_budget_says_so_in_words() {
    let items = vec!["1"; 300_000].join(",");
    let text = format!(
        "version: 1\nname: big\nmodels: {{ models: {{ main: {{ input: [text] }} }} }}\nmain_model: main\nsteps:\n  - model: {{ calls: [ {{ id: c1, name: echo, input: {{ value: [{items}] }} }} ] }}\n"
    );
    let (_dir, path) = write(&text);
    let out = run(&path, &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "the YAML document is over a size limit: it has more than 250000 values (mappings, lists and scalars)"
        ),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("budget breached"), "{}", out.stderr);
}
