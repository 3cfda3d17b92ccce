//! Exit codes and messages for malformed scenarios and assembly errors (docs/scenario-format.md).

use std::path::PathBuf;

use super::{events, run};

fn write(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("the scenario is written");
    (dir, path)
}

const HEAD: &str =
    "version: 1\nname: bad\nmodels: { models: { main: { input: [text] } } }\nmain_model: main\n";

#[test]
fn malformed_scenarios_exit_2_naming_the_field() {
    let cases = [
        (
            "unknown field",
            format!("{HEAD}steps:\n  - model: {{ text: hi, colour: red }}\n"),
        ),
        (
            "wrong type",
            format!(
                "{HEAD}steps:\n  - model: {{ calls: [ {{ id: c1, name: echo, input: 5 }} ], abort: maybe }}\n"
            ),
        ),
        (
            "bad interpolation",
            format!(
                "{HEAD}steps:\n  - model: {{ calls: [ {{ id: c1, name: read, input: {{ url: \"${{c9.continue.url}}\" }} }} ] }}\n"
            ),
        ),
        (
            "unknown continue",
            format!(
                "{HEAD}steps:\n  - model: {{ calls: [ {{ id: c1, name: read, input: {{ $continue: c7 }} }} ] }}\n"
            ),
        ),
        ("malformed yaml", format!("{HEAD}steps: [\n")),
    ];
    let mut report = String::new();
    for (name, text) in cases {
        let (_dir, path) = write("bad.yaml", &text);
        let out = run(&path, &[]);
        assert_eq!(out.code, 2, "{name}: {}", out.stderr);
        assert!(
            out.stdout.is_empty(),
            "{name}: nothing is printed on stdout"
        );
        let stderr = out.stderr.replace(&path.display().to_string(), "<FILE>");
        report.push_str(&format!("## {name}\n{}\n", stderr.trim_end()));
    }
    insta::assert_snapshot!(report);
}

#[test]
fn pro6_assembly_errors_print_one_error_event_and_exit_2() {
    let (_dir, path) = write(
        "renders.yaml",
        &format!("{HEAD}profile: {{ attachment: {{ maxImageRenders: 3 }} }}\nsteps: []\n")
            .replace("version: 1\n", "version: 1\n"),
    );
    let out = run(&path, &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let ev = events(&out.stdout);
    assert_eq!(ev.len(), 1, "exactly one event: {}", out.stdout);
    assert_eq!(ev[0]["event"], "error");
    assert_eq!(ev[0]["code"], "removed_key");
    assert_eq!(
        ev[0]["message"],
        "attachment.maxImageRenders was removed; use image lifetimes (once, recent, retain) and attachment.recentImageCount/imagePruneBatchSize"
    );
}

#[test]
fn pro5_vision_model_without_image_input_is_an_assembly_error() {
    let text = "version: 1\nname: v\nprofile: { attachment: { visionModel: pool } }\nmodels:\n  models:\n    main: { input: [text] }\n    blind: { input: [text] }\n  groups:\n    pool: [blind]\nmain_model: main\nsteps: []\n";
    let (_dir, path) = write("vision.yaml", text);
    let out = run(&path, &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let ev = events(&out.stdout);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["code"], "vision_model_unsupported");
    insta::assert_snapshot!(ev[0]["message"].as_str().unwrap_or_default());
}

#[test]
fn help_is_available_on_every_subcommand() {
    for args in [
        &["--help"][..],
        &["scenario", "--help"],
        &["scenario", "run", "--help"],
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ishiki"))
            .args(args)
            .output()
            .expect("the binary runs");
        assert!(output.status.success(), "{args:?}");
        assert!(String::from_utf8_lossy(&output.stdout).contains("Usage"));
    }
}

#[test]
fn an_mcp_server_with_a_duplicate_and_a_malformed_tool_name_does_not_stop_the_run() {
    // The MCP crate's fake server in `hostile` mode lists `dup` twice, `bad name` and an empty
    // name beside good tools.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ishiki-mcp/tests/data/fake_server.js")
        .display()
        .to_string();
    let text = format!(
        "{HEAD}profile:\n  mcp:\n    servers:\n      hostile:\n        command: node\n        args: [{}, hostile]\n        resident: true\n        timeoutMs: 20000\nsteps:\n  - model: {{ calls: [ {{ id: c1, name: hostile_bad_name, input: {{}} }}, {{ id: c2, name: hostile_ping, input: {{}} }} ] }}\n  - model: {{ text: done }}\n",
        serde_json::to_string(&script).expect("a JSON string")
    );
    let (_dir, path) = write("hostile.yaml", &text);
    let out = run(&path, &["--no-data"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let results: Vec<String> = events(&out.stdout)
        .iter()
        .filter(|e| e["event"] == "tool_result")
        .map(|e| e["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(results, ["bad name", "pong"]);
    insta::assert_snapshot!(out.stderr);
}

#[test]
fn scenario_run_relists_after_tools_list_changed_so_an_added_tool_works_and_a_removed_one_is_withdrawn()
 {
    // The fake server in `changing` mode lists `ping` and `swap`; calling `swap` drops `ping`,
    // adds `echo` and sends notifications/tools/list_changed.
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ishiki-mcp/tests/data/fake_server.js")
        .display()
        .to_string();
    let text = format!(
        "{HEAD}profile:\n  mcp:\n    servers:\n      live:\n        command: node\n        args: [{}, changing]\n        resident: true\n        timeoutMs: 20000\nsteps:\n  - model: {{ calls: [ {{ id: c1, name: live_swap, input: {{}} }} ] }}\n  - model: {{ calls: [ {{ id: c2, name: live_echo, input: {{ text: hello }} }}, {{ id: c3, name: live_ping, input: {{}} }} ] }}\n  - model: {{ text: done }}\n",
        serde_json::to_string(&script).expect("a JSON string")
    );
    let (_dir, path) = write("changing.yaml", &text);
    let out = run(&path, &["--no-data"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let results: Vec<(bool, String)> = events(&out.stdout)
        .iter()
        .filter(|e| e["event"] == "tool_result")
        .map(|e| {
            (
                e["is_error"].as_bool().unwrap_or_default(),
                e["text"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(
        results[1],
        (false, "hello".to_owned()),
        "the added tool works"
    );
    assert!(results[2].0, "the removed tool is gone: {results:?}");
    assert!(
        !results[2].1.contains("mcp server"),
        "refused by the runtime, not sent to the server: {}",
        results[2].1
    );
}

/// What `ishiki --help` and `ishiki chat --help` tell a newcomer: every command for what it
/// is, and every provider `chat` speaks.
#[test]
fn the_help_names_every_command_and_every_provider() {
    let help = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ishiki"))
            .args(args)
            .output()
            .expect("ishiki runs");
        assert!(output.status.success());
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let top = help(&["--help"]);
    for command in ["scenario", "chat", "doctor", "search-eval"] {
        assert!(top.contains(command), "{top}");
    }
    let chat = help(&["chat", "--help"]);
    for provider in ["openai", "openai-responses", "anthropic"] {
        assert!(chat.contains(provider), "{chat}");
    }
    insta::assert_snapshot!("help", top);
}
