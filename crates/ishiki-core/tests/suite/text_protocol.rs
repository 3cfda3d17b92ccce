//! The text protocol (TP-1, SEC-3): JSON and XML tool-call forms in a model's text.

use std::fmt::Write as _;

use ishiki_core::text_protocol::{
    MAX_CALLS, ParsedCall, Segment, parse, parse_counted, render_json, render_xml,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::with_snapshots;

fn no_schema(_: &str) -> Option<Value> {
    None
}

fn call(name: &str, arguments: Value) -> Segment {
    Segment::Call(ParsedCall {
        name: name.to_owned(),
        arguments,
    })
}

fn text(s: &str) -> Segment {
    Segment::Text(s.to_owned())
}

/// A schema like a real tool's: typed properties for the XML form's conversions.
fn tool_schema(name: &str) -> Option<Value> {
    match name {
        "write_file" => Some(json!({
            "type": "object",
            "properties": {
                "path": { "type": "string" },
                "content": { "type": "string" },
                "mode": { "type": "integer" },
                "ratio": { "type": "number" },
                "append": { "type": "boolean" },
                "tags": { "type": "array" },
                "meta": { "type": "object" },
                "note": { "type": ["string", "null"] },
                "limit": { "type": ["integer", "null"] }
            }
        })),
        _ => None,
    }
}

#[test]
fn tp1_json_form_with_text_around() {
    let input = "Let me read it.\n<tool_call>{\"name\": \"read\", \"arguments\": {\"url\": \"workspace:///a.txt\"}}</tool_call>\nDone.";
    assert_eq!(
        parse(input, &no_schema),
        vec![
            text("Let me read it.\n"),
            call("read", json!({ "url": "workspace:///a.txt" })),
            text("\nDone."),
        ]
    );
}

#[test]
fn tp1_json_form_variants() {
    // Arguments double-encoded as a JSON string.
    let encoded = r#"<tool_call>{"name": "echo", "arguments": "{\"value\": [1, 2]}"}</tool_call>"#;
    assert_eq!(
        parse(encoded, &no_schema),
        vec![call("echo", json!({ "value": [1, 2] }))]
    );

    // Missing final close at the end of the text, with trailing whitespace.
    let unclosed = "ok <tool_call>\n{\"name\": \"echo\", \"arguments\": {\"value\": 1}}\n\n";
    assert_eq!(
        parse(unclosed, &no_schema),
        vec![text("ok "), call("echo", json!({ "value": 1 }))]
    );

    // `parameters` for `arguments`, missing arguments, and null arguments.
    let aliases = r#"<tool_call>{"name": "a", "parameters": {"x": 1}}</tool_call><tool_call>{"name": "b"}</tool_call><tool_call>{"name": "c", "arguments": null}</tool_call>"#;
    assert_eq!(
        parse(aliases, &no_schema),
        vec![
            call("a", json!({ "x": 1 })),
            call("b", json!({})),
            call("c", json!({})),
        ]
    );

    // Tags inside JSON strings do not end the call.
    let tricky = r#"<tool_call>{"name": "echo", "arguments": {"value": "</tool_call> and <tool_call>"}}</tool_call>"#;
    assert_eq!(
        parse(tricky, &no_schema),
        vec![call(
            "echo",
            json!({ "value": "</tool_call> and <tool_call>" })
        )]
    );
}

#[test]
fn tp1_xml_form_converts_values_by_schema() {
    let input = "\
I will write the file.
<tool_call>
<function=write_file>
<parameter=path>
/home/workspace/tasks.txt
</parameter>
<parameter=content>
TODO: buy milk
  indented line

</parameter>
<parameter=mode>
420
</parameter>
<parameter=ratio>0.5</parameter>
<parameter=append>
true
</parameter>
<parameter=tags>
[\"a\", \"b\"]
</parameter>
<parameter=meta>
{\"k\": 1}
</parameter>
<parameter=note>
\"quoted\"
</parameter>
<parameter=limit>
null
</parameter>
</function>
</tool_call>
";
    assert_eq!(
        parse(input, &tool_schema),
        vec![
            text("I will write the file.\n"),
            call(
                "write_file",
                json!({
                    "path": "/home/workspace/tasks.txt",
                    // One leading and one trailing newline belong to the form.
                    "content": "TODO: buy milk\n  indented line\n",
                    "mode": 420,
                    "ratio": 0.5,
                    "append": true,
                    "tags": ["a", "b"],
                    "meta": { "k": 1 },
                    // A string property keeps its quotes: strings are written bare.
                    "note": "\"quoted\"",
                    "limit": null,
                })
            ),
            text("\n"),
        ]
    );

    // A string-typed value that looks like a number stays a string.
    let numeric_path = "<tool_call><function=write_file><parameter=path>42</parameter><parameter=mode>ten</parameter></function></tool_call>";
    assert_eq!(
        parse(numeric_path, &tool_schema),
        vec![call("write_file", json!({ "path": "42", "mode": "ten" }))]
    );

    // Without a schema: JSON first, then a string.
    let unknown = "<tool_call><function=mystery><parameter=a>42</parameter><parameter=b>hello world</parameter><parameter=c>{\"x\": true}</parameter></function>";
    assert_eq!(
        parse(unknown, &no_schema),
        vec![call(
            "mystery",
            json!({ "a": 42, "b": "hello world", "c": { "x": true } })
        )]
    );
}

#[test]
fn tp1_several_calls_in_both_forms() {
    let input = "First <tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call> then <tool_call><function=b><parameter=x>1</parameter></function></tool_call> and a stray </tool_call> stays text.";
    assert_eq!(
        parse(input, &no_schema),
        vec![
            text("First "),
            call("a", json!({})),
            text(" then "),
            call("b", json!({ "x": 1 })),
            text(" and a stray </tool_call> stays text."),
        ]
    );
    assert_eq!(parse("", &no_schema), vec![]);
    assert_eq!(parse("just text", &no_schema), vec![text("just text")]);
}

#[test]
fn tp1_render_forms_for_prompts() {
    let c = ParsedCall {
        name: "write_file".into(),
        arguments: json!({ "path": "/tmp/a.txt", "content": "line 1\nline 2", "mode": 420 }),
    };
    let out = format!("{}\n\n{}", render_json(&c), render_xml(&c));
    with_snapshots(|| insta::assert_snapshot!("text_protocol_render", out));
}

#[test]
fn tp1_malformed_calls_get_clear_errors() {
    let cases = [
        (
            "bad json",
            r#"<tool_call>{"name": "read", "arguments": {"url": }}</tool_call> after"#,
        ),
        (
            "truncated json at the end",
            r#"text <tool_call>{"name": "read", "arguments": {"url": "a"#,
        ),
        (
            "missing name",
            r#"<tool_call>{"arguments": {}}</tool_call>"#,
        ),
        (
            "empty name",
            r#"<tool_call>{"name": " ", "arguments": {}}</tool_call>"#,
        ),
        (
            "name not a string",
            r#"<tool_call>{"name": 7, "arguments": {}}</tool_call>"#,
        ),
        (
            "arguments a list",
            r#"<tool_call>{"name": "a", "arguments": [1]}</tool_call>"#,
        ),
        (
            "arguments a string of bad json",
            r#"<tool_call>{"name": "a", "arguments": "{x: 1}"}</tool_call>"#,
        ),
        (
            "arguments a string of a list",
            r#"<tool_call>{"name": "a", "arguments": "[1]"}</tool_call>"#,
        ),
        ("call not an object", r#"<tool_call>["a", {}]</tool_call>"#),
        (
            "text after the json",
            r#"<tool_call>{"name": "a", "arguments": {}} oops</tool_call> next"#,
        ),
        ("empty call", "<tool_call></tool_call>"),
        ("empty call at the end", "see <tool_call>  "),
        ("neither form", "<tool_call>read the file</tool_call>"),
        (
            "function without name",
            "<tool_call><function=><parameter=a>1</parameter></function></tool_call>",
        ),
        (
            "function tag not closed",
            "<tool_call><function=read\n<parameter=a>1</parameter></function></tool_call>",
        ),
        (
            "function not closed",
            "<tool_call><function=read><parameter=url>x</parameter></tool_call> after",
        ),
        (
            "function not closed at the end",
            "<tool_call><function=read><parameter=url>x</parameter>",
        ),
        (
            "parameter not closed",
            "<tool_call><function=read><parameter=url>x</function></tool_call>",
        ),
        (
            "parameter without key",
            "<tool_call><function=read><parameter=>x</parameter></function></tool_call>",
        ),
        (
            "parameter given twice",
            "<tool_call><function=read><parameter=a>1</parameter><parameter=a>2</parameter></function></tool_call>",
        ),
        (
            "stray text in function",
            "<tool_call><function=read>url=x</function></tool_call>",
        ),
        (
            "text after function",
            "<tool_call><function=read></function> extra</tool_call>",
        ),
        (
            "bad then good",
            "<tool_call>{bad}</tool_call><tool_call>{\"name\": \"ok\"}</tool_call>",
        ),
    ];
    let mut out = String::new();
    for (name, input) in cases {
        let segments = parse(input, &no_schema);
        assert!(
            segments
                .iter()
                .any(|s| matches!(s, Segment::Malformed { .. })),
            "{name}: {segments:?}"
        );
        let _ = writeln!(out, "## {name}\ninput: {input:?}");
        for segment in &segments {
            match segment {
                Segment::Text(t) => {
                    let _ = writeln!(out, "text: {t:?}");
                }
                Segment::Call(c) => {
                    let _ = writeln!(out, "call: {} {}", c.name, c.arguments);
                }
                Segment::Malformed { raw, error } => {
                    let _ = writeln!(out, "malformed raw: {raw:?}\nerror: {error}");
                    assert!(!error.ends_with('.'), "{name}");
                }
            }
        }
        out.push('\n');
        // Text and raw attempts together are the whole input when no call parsed.
        let rebuilt: String = segments
            .iter()
            .map(|s| match s {
                Segment::Text(t) => t.clone(),
                Segment::Malformed { raw, .. } => raw.clone(),
                Segment::Call(c) => render_json(c),
            })
            .collect();
        if segments.iter().all(|s| !matches!(s, Segment::Call(_))) {
            assert_eq!(rebuilt, input, "{name}");
        }
    }
    with_snapshots(|| insta::assert_snapshot!("text_protocol_malformed", out));
}

// --- properties ---------------------------------------------------------------------------------

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1.0e6f64..1.0e6).prop_map(Value::from),
        ".{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arguments() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("[a-zA-Z_][a-zA-Z0-9_.-]{0,10}", json_value(), 0..5)
        .prop_map(|m| m.into_iter().collect())
}

/// Text that cannot open a call.
fn plain_text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,30}",
        Just(String::new()),
        Just("</tool_call>".to_owned()),
        Just("<tool_call".to_owned()),
        Just("\n\n".to_owned()),
    ]
    // Backticks and `<think>` make a region whose calls are text, not calls.
    .prop_filter("no call opener", |t| {
        !t.contains("<tool_call>") && !t.contains('`') && !t.contains("<think>")
    })
}

/// Schema typing every argument as the type of its value, like the tool it came from.
fn schema_for(arguments: &Map<String, Value>) -> Value {
    let properties: Map<String, Value> = arguments
        .iter()
        .map(|(k, v)| {
            let t = match v {
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
            };
            (k.clone(), json!({ "type": t }))
        })
        .collect();
    json!({ "type": "object", "properties": properties })
}

fn fragments() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "<tool_call>",
        "</tool_call>",
        "<function=",
        "<function=read>",
        "</function>",
        "<parameter=",
        "<parameter=url>",
        "</parameter>",
        "{",
        "}",
        "\"name\"",
        "\"arguments\"",
        ":",
        ",",
        "\"",
        "\\",
        "[",
        "]",
        "null",
        "1e999",
        "\n",
        " ",
        ">",
        "<",
        "é",
        "\u{0}",
        "\"{\\\"a\\\": 1}\"",
    ]);
    prop::collection::vec(atoms, 0..40).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sec3_parse_never_panics(input in any::<String>()) {
        let _ = parse(&input, &no_schema);
        let _ = parse(&input, &tool_schema);
    }

    #[test]
    fn sec3_parse_never_panics_on_protocol_fragments(input in fragments()) {
        let segments = parse(&input, &tool_schema);
        for segment in segments {
            if let Segment::Call(call) = segment {
                prop_assert!(call.arguments.is_object());
            }
        }
    }

    #[test]
    fn tp1_render_then_parse_gives_the_same_calls(
        pieces in prop::collection::vec(
            (plain_text(), "[a-zA-Z_][a-zA-Z0-9_.-]{0,15}", arguments(), any::<bool>()),
            0..4,
        ),
        tail in plain_text(),
    ) {
        let mut input = String::new();
        let mut expected: Vec<Segment> = Vec::new();
        let mut schemas = std::collections::HashMap::new();
        let push_text = |expected: &mut Vec<Segment>, t: &str| {
            if t.is_empty() {
                return;
            }
            if let Some(Segment::Text(last)) = expected.last_mut() {
                last.push_str(t);
            } else {
                expected.push(Segment::Text(t.to_owned()));
            }
        };
        for (i, (before, name, args, xml)) in pieces.iter().enumerate() {
            // Distinct names per call, so each has its own schema.
            let name = format!("{name}{i}");
            let xml = *xml
                && !args.values().any(|v| v.as_str().is_some_and(|s| s.contains("</parameter>")));
            push_text(&mut expected, before);
            input.push_str(before);
            let parsed = ParsedCall { name: name.clone(), arguments: Value::Object(args.clone()) };
            input.push_str(&if xml { render_xml(&parsed) } else { render_json(&parsed) });
            schemas.insert(name, schema_for(args));
            expected.push(Segment::Call(parsed));
        }
        push_text(&mut expected, &tail);
        input.push_str(&tail);
        let schema_of = |name: &str| schemas.get(name).cloned();
        prop_assert_eq!(parse(&input, &schema_of), expected, "input: {:?}", input);
    }
}

/// The work the parser does on `text`, in bytes examined per byte of input.
fn work_per_byte(text: &str) -> f64 {
    let (_, work) = parse_counted(text, &no_schema);
    work as f64 / text.len() as f64
}

#[test]
fn sec3_unclosed_parameter_tags_are_parsed_in_linear_work() {
    // 64,000 calls, each with an unclosed <parameter=: every one used to search the rest of
    // the text for </parameter>.
    let unit = "<tool_call><function=echo><parameter=value>v</tool_call>\n";
    let text = unit.repeat(64_000);
    let (segments, work) = parse_counted(&text, &no_schema);
    assert!(
        work <= 4 * text.len() as u64,
        "{work} bytes examined for {} bytes of text",
        text.len()
    );
    // The first MAX_CALLS are read (each malformed), the rest is one refusal.
    let malformed = segments
        .iter()
        .filter(|s| matches!(s, Segment::Malformed { .. }))
        .count();
    assert_eq!(malformed, MAX_CALLS + 1);
    let Some(Segment::Malformed { error, .. }) = segments.last() else {
        panic!("the last segment is the refusal: {:?}", segments.last());
    };
    assert_eq!(
        error,
        "too many tool calls in one message: only the first 128 were read; make at most 128 calls per message and the rest in the next one"
    );

    // Within one call's reach the work does not grow with the number of tags either: one
    // call whose parameters never close, then text with many more tags.
    for n in [1_000, 8_000, 64_000] {
        let text = format!(
            "<tool_call><function=echo>{}",
            "<parameter=value>x\n".repeat(n)
        );
        assert!(work_per_byte(&text) <= 4.0, "n = {n}");
    }
}

#[test]
fn tp1_calls_beyond_the_cap_are_refused_in_one_segment() {
    let one = r#"<tool_call>{"name": "echo", "arguments": {"value": 1}}</tool_call>"#;
    let text = one.repeat(MAX_CALLS + 5);
    let segments = parse(&text, &no_schema);
    assert_eq!(segments.len(), MAX_CALLS + 1);
    assert!(
        segments[..MAX_CALLS]
            .iter()
            .all(|s| matches!(s, Segment::Call(_)))
    );
    let Some(Segment::Malformed { raw, .. }) = segments.last() else {
        panic!("the rest is refused: {:?}", segments.last());
    };
    assert_eq!(raw, &one.repeat(5));
}

#[test]
fn calls_inside_think_or_code_are_text_and_are_not_run() {
    let written = r#"<tool_call>{"name": "read", "arguments": {}}</tool_call>"#;
    for quiet in [
        format!("<think>maybe {written}</think>"),
        format!("<think>unclosed {written}"),
        format!("use `{written}` like this"),
        format!("```\n{written}\n```"),
    ] {
        assert_eq!(parse(&quiet, &no_schema), [text(&quiet)], "{quiet}");
    }
    // Outside them the call runs, and backticks inside a call's arguments start nothing.
    let ticked = r#"<tool_call>{"name": "a", "arguments": {"q": "`"}}</tool_call> and <tool_call>{"name": "b", "arguments": {"q": "`"}}</tool_call>"#;
    let segments = parse(ticked, &no_schema);
    assert_eq!(
        segments,
        [
            call("a", json!({ "q": "`" })),
            text(" and "),
            call("b", json!({ "q": "`" })),
        ]
    );
    // A lone backtick is a literal one.
    let lone = format!("it costs 5` {written}");
    assert_eq!(parse(&lone, &no_schema)[1], call("read", json!({})));
}
