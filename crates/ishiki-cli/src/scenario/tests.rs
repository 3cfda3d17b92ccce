//! Unit tests of loading and checking scenarios: shapes, ids, references, located errors.

use std::path::Path;

use super::*;
use std::fs;

const HEAD: &str =
    "version: 1\nname: t\nmodels: { models: { main: { input: [text] } } }\nmain_model: main\n";

fn ok(body: &str) -> Scenario {
    match parse(&format!("{HEAD}{body}"), Path::new(".")) {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

fn err(body: &str) -> ScenarioError {
    match parse(&format!("{HEAD}{body}"), Path::new(".")) {
        Ok(_) => panic!("parsed:\n{body}"),
        Err(e) => e,
    }
}

/// The directories holding the public scenarios: the repo's `examples/` once the lead
/// copies them there, and the shared folder beside the checkout.
fn scenario_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    [
        root.join("../../examples"),
        root.join("../../../shared/scenarios"),
    ]
    .into_iter()
    .filter(|d| d.is_dir())
    .collect()
}

#[test]
fn public_scenarios_load() {
    let dirs = scenario_dirs();
    assert!(
        !dirs.is_empty(),
        "neither examples/ nor ../shared/scenarios/ exists"
    );
    let mut seen = Vec::new();
    for dir in dirs {
        let mut files: Vec<PathBuf> = fs::read_dir(&dir)
            .expect("readable")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        for f in files {
            let s = match load(&f) {
                Ok(s) => s,
                Err(e) => panic!("{}: {e}", f.display()),
            };
            seen.push(s.name.clone());
        }
    }
    for name in ["todo-journey", "recent-pruning", "continue-paging"] {
        assert!(
            seen.iter().any(|s| s == name),
            "{name} not found in {seen:?}"
        );
    }
}

#[test]
fn todo_journey_reads_as_written() {
    let dir = scenario_dirs()
        .into_iter()
        .find(|d| d.join("todo-journey.yaml").exists());
    let s = load(&dir.expect("a scenario dir").join("todo-journey.yaml")).expect("loads");
    assert_eq!(s.main_model, "main");
    assert_eq!(s.profile["codemode"]["enable"], true);
    assert_eq!(s.models["models"]["main"]["toolCalling"], "native");
    assert_eq!(s.workspace.len(), 1);
    assert_eq!(s.workspace[0].path, "/home/workspace/notes.txt");
    assert!(s.workspace[0].bytes.starts_with(b"TODO: buy milk\n"));
    assert_eq!(
        s.tools,
        vec![ToolSpec::Fixture {
            tool: FixtureTool::WriteFile,
            resident: false
        }]
    );
    assert_eq!(s.steps.len(), 5);
    assert_eq!(s.model_steps(), 4);
    let Step::Model(m) = &s.steps[2] else {
        panic!("step 2 is a model step")
    };
    assert_eq!(m.calls[0].name, "codemode");
    assert!(
        m.calls[0].input["code"]
            .as_str()
            .expect("code")
            .contains("tools.write_file")
    );
}

#[test]
fn every_field_of_the_format_parses() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(
            dir.path().join("catalog.json"),
            r#"[{"name": "a", "description": "A", "input_schema": {"type": "object"}},
                {"name": "b", "description": "B", "input_schema": {}, "output_schema": {"type": "object"}}]"#,
        )
        .expect("write");
    let yaml = format!(
        "{HEAD}{}",
        r#"profile: { attachment: { recentImageCount: 3 } }
workspace:
  /home/workspace/notes.txt: { text: "a\nb\n" }
  /home/workspace/shot.png:  { image: { width: 64, height: 48, format: png } }
  /home/workspace/raw.bin: { base64: "AAEC" }
local:
  /docs/manual.txt: { lines: { count: 3, text: "line {n}" } }
tools:
  - { name: write_file, resident: false }
  - { name: screenshot, resident: true }
  - define:
      name: calendar_create_event
      description: Create an event
      input_schema: { type: object, properties: { title: { type: string } }, required: [title] }
      output_schema: { type: object }
  - { definitions: catalog.json, resident: true }
vision:
  - { reply: "The image says: hello" }
  - { fail: "upstream timeout" }
steps:
  - user: { id: m1, text: "look", images: [ { width: 8, height: 8, format: jpeg }, { width: 9, height: 9, format: webp, bytes: 4000 } ], chat: group }
  - model: { calls: [ { id: c1, name: read, input: { url: "${m1.images.0.url}" } } ] }
  - model: { calls: [ { id: c2, name: read, input: { $continue: c1 } } ], abort: true }
  - model: { text: "see ${c1.continue.url}" }
  - model: { fail: "provider 500" }
  - withdraw: m1
  - restart: {}
  - clock: { advance: "31d" }
  - cleanup: {}
  - model: { calls: [ { id: c3, name: echo, input: { value: [1, "${c2.attachments.0.url}", { k: true }] } } ] }
"#
    );
    let s = parse(&yaml, dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.profile["attachment"]["recentImageCount"], 3);
    let paths: Vec<&str> = s.workspace.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/home/workspace/notes.txt",
            "/home/workspace/raw.bin",
            "/home/workspace/shot.png"
        ]
    );
    assert_eq!(s.workspace[1].bytes, [0, 1, 2]);
    assert!(s.workspace[2].bytes.starts_with(b"\x89PNG"));
    assert_eq!(s.local[0].bytes, b"line 1\nline 2\nline 3\n");
    let names: Vec<(String, bool)> = s
        .tools
        .iter()
        .map(|t| match t {
            ToolSpec::Fixture { tool, resident } => (tool.as_str().to_owned(), *resident),
            ToolSpec::Declared {
                definition,
                resident,
            } => (definition.name.clone(), *resident),
        })
        .collect();
    assert_eq!(
        names,
        [
            ("write_file".to_owned(), false),
            ("screenshot".to_owned(), true),
            ("calendar_create_event".to_owned(), false),
            ("a".to_owned(), true),
            ("b".to_owned(), true),
        ]
    );
    assert_eq!(
        s.vision,
        [
            VisionAnswer::Reply("The image says: hello".into()),
            VisionAnswer::Fail("upstream timeout".into())
        ]
    );
    let Step::User(user) = &s.steps[0] else {
        panic!("user step")
    };
    assert_eq!(user.chat, Chat::Group);
    assert_eq!(user.images[1].format, ImageFormat::Webp);
    assert_eq!(user.image_bytes.len(), 2);
    assert_eq!(user.image_bytes[1].len(), 4000);
    assert_eq!(s.steps[5], Step::Withdraw("m1".into()));
    assert_eq!(s.steps[6], Step::Restart(Empty {}));
    assert_eq!(
        s.steps[7],
        Step::Clock(ClockStep {
            advance: Duration::from_secs(31 * 86_400)
        })
    );
    assert_eq!(s.steps[8], Step::Cleanup(Empty {}));
    assert_eq!(s.model_steps(), 5);
    let Step::Model(m) = &s.steps[2] else {
        panic!("model step")
    };
    assert!(m.abort);
    assert_eq!(m.calls[0].input, serde_json::json!({"$continue": "c1"}));
}

#[test]
fn optional_sections_default() {
    let s = ok("steps: []\n");
    assert_eq!(s.profile, serde_json::json!({}));
    assert!(s.workspace.is_empty() && s.tools.is_empty() && s.vision.is_empty());
    let s =
        ok("steps:\n  - user: { id: m1 }\n  - model: { calls: [ { id: c1, name: finish } ] }\n");
    let Step::User(u) = &s.steps[0] else {
        panic!("user")
    };
    assert_eq!((u.chat, u.text.as_deref()), (Chat::Private, None));
    let Step::Model(m) = &s.steps[1] else {
        panic!("model")
    };
    assert_eq!(m.calls[0].input, serde_json::json!({}));
}

#[test]
fn errors_carry_kind_path_and_location() {
    let e = err("steps:\n  - user: { id: m1, txt: hi }\n");
    assert_eq!(e.kind(), ScenarioErrorKind::Yaml);
    assert_eq!(e.path(), Some("steps[0].user.txt"));
    assert_eq!(e.location(), Some((6, 21)));
    let e = err("steps:\n  - withdraw: m9\n");
    assert_eq!(e.kind(), ScenarioErrorKind::Invalid);
    assert_eq!(e.path(), Some("steps[0].withdraw"));
    assert_eq!(e.location(), Some((6, 5)));
}

/// Every kind of malformed scenario, with the message the CLI prints (exit status 2).
#[test]
fn scenario_error_messages() {
    let cases: &[(&str, &str)] = &[
        (
            "malformed_yaml",
            "steps:\n  - model: { calls: [ {id: c1, name: r, input: 1 ] }\n",
        ),
        ("unknown_top_level_field", "stepz: []\n"),
        (
            "unknown_step_field",
            "steps:\n  - user: { id: m1, txt: hi }\n",
        ),
        ("unknown_step_kind", "steps:\n  - usr: { id: m1 }\n"),
        (
            "two_step_kinds_in_one_item",
            "steps:\n  - user: { id: m1 }\n    model: {}\n",
        ),
        (
            "wrong_type",
            "steps:\n  - user: { id: m1, images: [ { width: 3, height: x, format: png } ] }\n",
        ),
        ("wrong_type_bool", "steps:\n  - model: { abort: yes }\n"),
        (
            "missing_field",
            "steps:\n  - model: { calls: [ { name: read } ] }\n",
        ),
        ("duplicate_key", "steps: []\nsteps: []\n"),
        (
            "bad_image_format",
            "workspace:\n  /a.bmp: { image: { width: 3, height: 3, format: bmp } }\nsteps: []\n",
        ),
        (
            "bad_file_kind",
            "workspace:\n  /a.txt: { txt: hi }\nsteps: []\n",
        ),
        (
            "image_bytes_too_small",
            "workspace:\n  /home/workspace/shot.png: { image: { width: 32, height: 32, format: png, bytes: 10 } }\nsteps: []\n",
        ),
        (
            "image_zero_width",
            "steps:\n  - user: { id: m1, images: [ { width: 0, height: 3, format: gif } ] }\n",
        ),
        (
            "bad_base64",
            "local:\n  /x.bin: { base64: \"%%%\" }\nsteps: []\n",
        ),
        ("unsupported_version", "steps: []\n"),
        (
            "unknown_fixture_tool",
            "tools:\n  - { name: wrte_file }\nsteps: []\n",
        ),
        (
            "tool_entry_without_kind",
            "tools:\n  - { resident: true }\nsteps: []\n",
        ),
        (
            "tool_entry_with_two_kinds",
            "tools:\n  - { name: echo, definitions: x.json }\nsteps: []\n",
        ),
        (
            "missing_definitions_file",
            "tools:\n  - { definitions: no-such-catalog.json }\nsteps: []\n",
        ),
        (
            "define_missing_description",
            "tools:\n  - define: { name: x, input_schema: {} }\nsteps: []\n",
        ),
        ("bad_duration", "steps:\n  - clock: { advance: 3w }\n"),
        // Found by `cargo xtask fuzz` (scenario_yaml): a panic inside a multi-byte unit.
        (
            "multibyte_duration",
            "steps:\n  - clock: { advance: \"3Л\" }\n",
        ),
        (
            "duplicate_call_id",
            "steps:\n  - model: { calls: [ { id: c1, name: read, input: {} } ] }\n  - model: { calls: [ { id: c1, name: read, input: {} } ] }\n",
        ),
        (
            "call_id_reuses_message_id",
            "steps:\n  - user: { id: m1 }\n  - model: { calls: [ { id: m1, name: read } ] }\n",
        ),
        (
            "withdraw_unknown",
            "steps:\n  - user: { id: m1 }\n  - withdraw: m2\n",
        ),
        (
            "withdraw_before_message",
            "steps:\n  - withdraw: m1\n  - user: { id: m1 }\n",
        ),
        (
            "continue_unknown_call",
            "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: \"x\" } } ] }\n  - model: { calls: [ { id: c2, name: read, input: { $continue: c7 } } ] }\n",
        ),
        (
            "continue_same_step",
            "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: x } }, { id: c2, name: read, input: { $continue: c1 } } ] }\n",
        ),
        (
            "continue_message",
            "steps:\n  - user: { id: m1 }\n  - model: { calls: [ { id: c2, name: read, input: { $continue: m1 } } ] }\n",
        ),
        (
            "continue_with_other_keys",
            "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: x } } ] }\n  - model: { calls: [ { id: c2, name: read, input: { $continue: c1, url: y } } ] }\n",
        ),
        (
            "reference_unknown_id",
            "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: \"${c9.continue.url}\" } } ] }\n",
        ),
        (
            "reference_later_call",
            "steps:\n  - model: { text: \"${c2.continue.url}\" }\n  - model: { calls: [ { id: c2, name: read, input: { url: x } } ] }\n",
        ),
        (
            "reference_bad_field",
            "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: x } } ] }\n  - model: { calls: [ { id: c2, name: read, input: { list: [ \"${c1.contnue.url}\" ] } } ] }\n",
        ),
        (
            "reference_message_field",
            "steps:\n  - user: { id: m1 }\n  - user: { id: m2, text: \"again ${m1.attachments.0.url}\" }\n",
        ),
        (
            "reference_unterminated",
            "steps:\n  - model: { calls: [ { id: c1, name: read, input: { url: x } } ] }\n  - model: { text: \"${c1.continue.url\" }\n",
        ),
        (
            "fail_with_calls",
            "steps:\n  - model: { fail: \"500\", calls: [ { id: c1, name: read } ] }\n",
        ),
    ];
    let mut out = String::new();
    for (name, body) in cases {
        let text = if *name == "unsupported_version" {
            format!("version: 2\nname: t\nmodels: {{}}\nmain_model: main\n{body}")
        } else {
            format!("{HEAD}{body}")
        };
        let message = match parse(&text, Path::new("/nonexistent-base")) {
            Ok(_) => panic!("{name} parsed"),
            Err(e) => e.to_string(),
        };
        out.push_str(&format!("## {name}\n{message}\n\n"));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn load_names_the_file_in_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.yaml");
    fs::write(
        &path,
        format!("{HEAD}steps:\n  - user: {{ id: m1, txt: hi }}\n"),
    )
    .expect("write");
    let e = load(&path).expect_err("unknown field");
    assert!(
        e.to_string().contains(&format!("{}:6:21", path.display())),
        "{e}"
    );
    let e = load(&dir.path().join("missing.yaml")).expect_err("missing");
    assert_eq!(e.kind(), ScenarioErrorKind::Io);
}

#[test]
fn definitions_resolve_relative_to_the_scenario() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir(dir.path().join("defs")).expect("mkdir");
    fs::write(
        dir.path().join("defs/catalog.json"),
        r#"[{"name": "x", "description": "X", "input_schema": {}, "extra": 1}]"#,
    )
    .expect("write");
    let path = dir.path().join("s.yaml");
    fs::write(
        &path,
        format!("{HEAD}tools:\n  - {{ definitions: defs/catalog.json }}\nsteps: []\n"),
    )
    .expect("write");
    let e = load(&path).expect_err("extra field");
    assert_eq!(e.kind(), ScenarioErrorKind::Definitions);
    assert!(e.summary().contains("defs/catalog.json is not a JSON list of tool definitions: [0].extra: unknown field `extra`"), "{e}");
}

#[test]
fn yaml_1_1_booleans_stay_strings() {
    let s = ok(
        "steps:\n  - model: { calls: [ { id: c1, name: echo, input: { value: [y, no, on, true] } } ] }\n",
    );
    let Step::Model(m) = &s.steps[0] else {
        panic!("model")
    };
    assert_eq!(
        m.calls[0].input["value"],
        serde_json::json!(["y", "no", "on", true])
    );
}

#[test]
fn javascript_templates_in_code_are_not_references() {
    let s = ok(
        "steps:\n  - model: { calls: [ { id: c1, name: codemode, input: { code: \"return `${n} items, ${list.length}`\" } } ] }\n",
    );
    assert_eq!(s.model_steps(), 1);
}
