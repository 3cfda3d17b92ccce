//! Hostile servers (the fake server's modes in `tests/data/fake_server.js`, speaking real MCP
//! over stdio): each one costs bounded memory and time, fails only the piece of work it
//! spoils with an error that says what happened, and leaves the rest of the session working.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ishiki_core::{ModelsDoc, Profile, Runtime, Tool, ToolContext, WorkerSpawn, assemble};
use ishiki_mcp::{McpErrorKind, McpServer, connect_all, server_tools, server_tools_checked};
use serde_json::json;

use super::{fake_config, runtime, step, with_snapshots};

const LONG: Duration = Duration::from_secs(20);
const SHORT: Duration = Duration::from_millis(5000);

#[tokio::test]
async fn a_server_writing_stderr_without_newlines_is_quoted_cut_short() {
    // 64 MiB on stderr without one newline, then it answers normally.
    let config = fake_config("flood", "stderr-flood", SHORT);
    let server = McpServer::start(config).await.expect("starts");
    let error = server.call("hang", json!({})).await.expect_err("hangs");
    assert_eq!(error.kind(), McpErrorKind::Timeout, "{error}");
    let quoted = format!("(its stderr ends: {}…)", "x".repeat(300));
    assert!(
        error.message().contains(&quoted),
        "the endless line is quoted, cut: {}",
        &error.message()[..error.message().len().min(400)]
    );
    assert!(
        error.message().len() < 1000,
        "{} bytes",
        error.message().len()
    );
    let pong = server.call("ping", json!({})).await.expect("restarted");
    assert_eq!(pong["content"][0]["text"], "pong");
    server.stop().await;
}

#[tokio::test]
async fn endless_tool_list_pages_stop_at_the_page_limit_with_an_error_saying_so() {
    let started = Instant::now();
    let error = McpServer::start(fake_config("pager", "pages-endless", LONG))
        .await
        .expect_err("refused");
    assert_eq!(error.kind(), McpErrorKind::BadReply, "{error}");
    assert!(started.elapsed() < LONG, "not waited out");
    with_snapshots(|| insta::assert_snapshot!("endless_pages_error", error.message()));
}

#[tokio::test]
async fn a_repeated_cursor_ends_the_tool_listing_with_an_error_saying_so() {
    let error = McpServer::start(fake_config("pager", "pages-repeat", LONG))
        .await
        .expect_err("refused");
    assert_eq!(error.kind(), McpErrorKind::BadReply, "{error}");
    with_snapshots(|| insta::assert_snapshot!("repeated_cursor_error", error.message()));
}

#[tokio::test]
async fn a_tool_list_nested_too_deep_to_decode_fails_at_once_saying_so() {
    let started = Instant::now();
    let error = McpServer::start(fake_config("deep", "deep-schema", LONG))
        .await
        .expect_err("refused");
    assert_eq!(error.kind(), McpErrorKind::BadReply, "{error}");
    assert!(started.elapsed() < LONG, "not waited out");
    with_snapshots(|| insta::assert_snapshot!("deep_schema_error", error.message()));
}

#[tokio::test]
async fn a_result_nested_too_deep_fails_that_call_only_and_the_server_keeps_running() {
    let server = McpServer::start(fake_config("hostile", "hostile", LONG))
        .await
        .expect("starts");
    let error = server.call("deep", json!({})).await.expect_err("refused");
    assert_eq!(error.kind(), McpErrorKind::BadReply, "{error}");
    assert_eq!(
        error.message(),
        "mcp server `hostile` sent a reply to `deep` that cannot be decoded: it is nested deeper than 128 levels"
    );
    let pong = server.call("ping", json!({})).await.expect("still running");
    assert_eq!(pong["content"][0]["text"], "pong");
    assert_eq!(server.starts(), 1, "no restart");
    server.stop().await;
}

/// The odd-results server's tools (named `hostile_…`) in a runtime that runs programs
/// in-process.
async fn hostile_runtime(dir: &std::path::Path) -> Runtime {
    let (tools, errors) = connect_all(&[fake_config("hostile", "odd-results", LONG)]).await;
    let profile = Profile::from_yaml("codemode: { enable: true }\n").expect("valid profile");
    let models =
        ModelsDoc::from_yaml("models:\n  main: { input: [text, image] }\n").expect("valid models");
    let assembly = assemble(profile, models, "main").expect("assembles");
    let mut builder = Runtime::builder(assembly, dir).codemode_worker(WorkerSpawn::InProcess);
    for tool in tools {
        builder = builder.tool(tool);
    }
    assert!(errors.is_empty(), "{errors:?}");
    builder.build().await.expect("the runtime builds")
}

#[tokio::test]
async fn one_duplicate_or_malformed_tool_name_leaves_out_or_renames_that_tool_only() {
    let (tools, errors) = connect_all(&[fake_config("hostile", "hostile", LONG)]).await;
    let names: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
    let renamed = tools
        .iter()
        .map(|t| t.definition())
        .find(|d| d.name == "hostile_bad_name")
        .expect("renamed, not left out");
    let text = format!(
        "tools: {}\nrenamed: {}\nerrors:\n{}\n",
        names.join(", "),
        renamed.description,
        errors
            .iter()
            .map(|e| format!("{} {}", e.kind().code(), e.message()))
            .collect::<Vec<_>>()
            .join("\n")
    );
    with_snapshots(|| insta::assert_snapshot!("bad_tool_names", text));
    assert!(
        errors.iter().all(|e| e.kind() == McpErrorKind::InvalidTool),
        "{errors:?}"
    );

    // The runtime builds with every tool that was kept, and the renamed one answers.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = runtime(&Profile::default(), tools, dir.path()).await;
    let reports = step(
        &mut rt,
        &[("hostile_dup", json!({})), ("hostile_bad_name", json!({}))],
    )
    .await;
    assert!(reports.iter().all(|r| !r.is_error), "{reports:?}");
}

#[tokio::test]
async fn a_tool_whose_input_schema_does_not_compile_is_left_out_when_checked_and_named_when_not() {
    let config = fake_config("schemas", "bad-schema", LONG);
    let (servers, errors) = ishiki_mcp::start_all(&[config]).await;
    assert!(errors.is_empty(), "{errors:?}");

    // Checked as the runtime checks: `broken` is left out with the runtime's reason, and the
    // runtime builds with the rest.
    let (tools, left_out) = server_tools_checked(&servers[0], ishiki_core::check_tool);
    let names: Vec<String> = tools.iter().map(|t| t.definition().name).collect();
    assert_eq!(names, ["schemas_ping"]);
    assert_eq!(left_out.len(), 1, "{left_out:?}");
    assert_eq!(left_out[0].kind(), McpErrorKind::InvalidTool);
    assert!(
        left_out[0].message().starts_with(
            "mcp server `schemas`: tool `broken` is left out: tool `schemas_broken` has an invalid input schema"
        ),
        "{}",
        left_out[0].message()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = runtime(&Profile::default(), tools, dir.path()).await;
    let reports = step(&mut rt, &[("schemas_ping", json!({}))]).await;
    assert_eq!(reports[0].text, "pong");

    // Unchecked, the tool is kept and the runtime refuses to build, naming it: the schema is
    // compiled in one place, the runtime.
    let (tools, left_out) = server_tools(&servers[0]);
    assert!(left_out.is_empty(), "{left_out:?}");
    let models = ModelsDoc::from_yaml(
        "models:
  main: { input: [text] }
",
    )
    .expect("valid models");
    let assembly = assemble(Profile::default(), models, "main").expect("assembles");
    let dir = tempfile::tempdir().expect("tempdir");
    let error = tools
        .into_iter()
        .fold(Runtime::builder(assembly, dir.path()), |b, t| b.tool(t))
        .build()
        .await
        .expect_err("refused");
    assert!(
        error
            .message()
            .contains("tool `schemas_broken` has an invalid input schema"),
        "{}",
        error.message()
    );
}

#[tokio::test]
async fn servers_whose_names_join_alike_get_distinct_tool_names() {
    let a = fake_config("a", "named", LONG).args(["b_c"]);
    let a_b = fake_config("a_b", "named", LONG).args(["c"]);
    let (tools, errors) = connect_all(&[a, a_b]).await;
    assert!(errors.is_empty(), "{errors:?}");
    let defs: Vec<_> = tools.iter().map(|t| t.definition()).collect();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    // The first keeps today's name; the second is told apart.
    assert_eq!(names, ["a_b_c", "a_b__c"]);
    with_snapshots(|| insta::assert_snapshot!("renamed_tool_description", defs[1].description));

    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = runtime(&Profile::default(), tools, dir.path()).await;
    let reports = step(&mut rt, &[("a_b_c", json!({})), ("a_b__c", json!({}))]).await;
    let texts: Vec<&str> = reports.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(
        texts,
        ["b_c", "c"],
        "each name reaches its own server's tool"
    );
}

#[tokio::test]
async fn an_unknown_content_block_type_is_a_text_note_and_the_server_keeps_running() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = hostile_runtime(dir.path()).await;
    let reports = step(&mut rt, &[("hostile_widget", json!({}))]).await;
    assert!(!reports[0].is_error, "{}", reports[0].text);
    with_snapshots(|| insta::assert_snapshot!("unknown_block_note", reports[0].text));
    let pong = step(&mut rt, &[("hostile_ping", json!({}))]).await;
    assert_eq!(pong[0].text, "pong");
}

#[tokio::test]
async fn a_direct_call_keeps_the_image_of_a_tool_with_an_output_schema() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = hostile_runtime(dir.path()).await;
    let direct = step(&mut rt, &[("hostile_media", json!({}))]).await;
    let report = &direct[0];
    assert!(!report.is_error, "{}", report.text);
    assert_eq!(report.attachments.len(), 1, "{report:?}");
    assert_eq!(report.attachments[0].media_type, "image/png");
    assert!(report.text.starts_with("a 1x1 image"), "{}", report.text);

    // A program still gets the structured value.
    let code = "const r = await tools.hostile_media({}); return { width: r.width };";
    let program = step(&mut rt, &[("codemode", json!({ "code": code }))]).await;
    assert!(!program[0].is_error, "{}", program[0].text);
    assert!(
        program[0].text.contains("\"width\":1"),
        "{}",
        program[0].text
    );
}

#[tokio::test]
async fn blocks_for_the_user_only_do_not_reach_the_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = hostile_runtime(dir.path()).await;
    let reports = step(&mut rt, &[("hostile_audience", json!({}))]).await;
    assert_eq!(reports[0].text, "for the model\nfor both");
}

#[tokio::test]
async fn a_text_plain_blob_resource_reaches_the_model_as_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = hostile_runtime(dir.path()).await;
    let reports = step(&mut rt, &[("hostile_textblob", json!({}))]).await;
    assert!(reports[0].attachments.is_empty(), "{:?}", reports[0]);
    assert_eq!(reports[0].text, "plain notes, héllo");
}

#[tokio::test]
async fn a_program_sees_the_structured_value_and_a_direct_call_the_content() {
    let (tools, _) = connect_all(&[fake_config("hostile", "hostile", LONG)]).await;
    let media: &Arc<dyn Tool> = tools
        .iter()
        .find(|t| t.definition().name == "hostile_media")
        .expect("listed");
    let context = ToolContext {
        call_id: "c1".to_owned(),
        step: 1,
        from_program: false,
    };
    let direct = media.execute(json!({}), &context).await.expect("runs");
    assert_eq!(direct[1]["type"], "image", "{direct}");
    let program = media
        .program_view()
        .expect("a program view")
        .execute(json!({}), &context)
        .await
        .expect("runs");
    assert_eq!(program, json!({ "width": 1 }));
}
