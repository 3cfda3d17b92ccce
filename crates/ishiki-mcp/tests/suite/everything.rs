//! The reference server `@modelcontextprotocol/server-everything`: its tools join the pool,
//! toolsearch finds them, and images, resources and tool errors come through a real runtime.

use std::sync::Arc;

use base64::Engine as _;
use ishiki_core::{ModelsDoc, Part, Profile, Runtime, Tool, ToolContext, WorkerSpawn, assemble};
use ishiki_mcp::{McpServerConfig, connect_all};
use serde_json::json;

use super::{everything_profile, runtime, stable, step, with_snapshots};

async fn everything(resident: bool, extra: &str) -> (Profile, Vec<Arc<dyn Tool>>) {
    let profile = Profile::from_yaml(&everything_profile(extra, resident)).expect("valid profile");
    let configs = McpServerConfig::from_profile(&profile);
    assert_eq!(configs.len(), 1);
    let (tools, errors) = connect_all(&configs).await;
    assert!(errors.is_empty(), "{errors:?}");
    (profile, tools)
}

fn context() -> ToolContext {
    ToolContext {
        call_id: "c1".to_owned(),
        step: 1,
        from_program: false,
    }
}

#[tokio::test]
async fn ts1_everything_tools_join_the_pool_deferred() {
    let (_, tools) = everything(false, "").await;
    let mut listing = String::new();
    for tool in &tools {
        let def = tool.definition();
        assert!(!def.resident, "{} should wait in the pool", def.name);
        assert_eq!(def.origin.as_deref(), Some("mcp:everything"));
        assert!(def.name.starts_with("everything_"));
        listing.push_str(&format!(
            "{}{} — {}\n",
            def.name,
            if def.output_schema.is_some() {
                " (structured)"
            } else {
                ""
            },
            def.description
        ));
    }
    with_snapshots(|| insta::assert_snapshot!("everything_tools", listing));
}

#[tokio::test]
async fn ts2_search_finds_the_tiny_image_and_a_direct_call_yields_a_png_attachment() {
    let (profile, tools) = everything(false, "toolsearch: { enable: true }\n").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = runtime(&profile, tools, dir.path()).await;

    // Deferred: not listed in the first request.
    let first = rt.prepare().await.expect("prepare");
    assert!(
        !first
            .request
            .tools
            .iter()
            .any(|t| t.name == "everything_get-tiny-image")
    );
    rt.abandon(first);

    let found = step(&mut rt, &[("search", json!({ "query": "tiny image" }))]).await;
    assert!(!found[0].is_error, "{}", found[0].text);
    assert!(
        found[0].text.contains("everything_get-tiny-image"),
        "{}",
        found[0].text
    );

    let shot = step(&mut rt, &[("everything_get-tiny-image", json!({}))]).await;
    let report = &shot[0];
    assert!(!report.is_error, "{}", report.text);
    assert_eq!(report.attachments.len(), 1, "{report:?}");
    let attachment = &report.attachments[0];
    assert_eq!(attachment.media_type, "image/png");
    assert!(
        attachment.url.starts_with("artifact://"),
        "{}",
        attachment.url
    );
    assert_eq!(attachment.lifetime, ishiki_core::Lifetime::Once);
    let bytes = rt.resources().read(&attachment.url).await;
    assert!(bytes.is_ok(), "the artifact reads back: {bytes:?}");
    with_snapshots(|| {
        insta::assert_snapshot!("everything_tiny_image_report", stable(&report.text))
    });

    // The next request carries the image after the result (lifetime once).
    let next = rt.prepare().await.expect("prepare");
    let images: Vec<_> = next
        .request
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|p| match p {
            Part::Image(media) => Some(media),
            _ => None,
        })
        .collect();
    assert_eq!(images.len(), 1, "one image in the next request");
    assert_eq!(images[0].media_type, "image/png");
    let data = base64::engine::general_purpose::STANDARD
        .decode(images[0].data.as_deref().unwrap_or_default())
        .expect("base64");
    assert!(
        data.starts_with(b"\x89PNG"),
        "the PNG bytes reach the model"
    );
}

#[tokio::test]
async fn cm2_raw_result_is_the_content_array() {
    let (_, tools) = everything(true, "").await;
    let tiny = tools
        .iter()
        .find(|t| t.definition().name == "everything_get-tiny-image")
        .expect("listed");
    let raw = tiny.execute(json!({}), &context()).await.expect("runs");
    assert_eq!(raw[1]["type"], "image");
    assert_eq!(raw[1]["mimeType"], "image/png");
    assert!(
        raw[1]["data"]
            .as_str()
            .is_some_and(|d| d.starts_with("iVBOR"))
    );
    assert_eq!(raw[0]["type"], "text");

    // With an output schema a program's raw result is the structured value, sent once; a
    // direct call keeps the content blocks for the model.
    let structured = tools
        .iter()
        .find(|t| t.definition().output_schema.is_some())
        .expect("a tool with an output schema");
    let name = structured.definition().name;
    assert_eq!(name, "everything_get-structured-content");
    let program = structured.program_view().expect("a program view");
    let raw = program
        .execute(json!({ "location": "Chicago" }), &context())
        .await
        .expect("runs");
    assert!(raw.is_object(), "{raw}");
    assert!(raw.get("content").is_none(), "{raw}");
    let direct = structured
        .execute(json!({ "location": "Chicago" }), &context())
        .await
        .expect("runs");
    assert_eq!(direct[0]["type"], "text", "{direct}");
}

#[tokio::test]
async fn out_embedded_blob_resource_and_resource_link_come_through() {
    let (profile, tools) = everything(true, "").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = runtime(&profile, tools, dir.path()).await;
    let reports = step(
        &mut rt,
        &[
            (
                "everything_get-resource-reference",
                json!({ "resourceType": "Blob", "resourceId": 1 }),
            ),
            (
                "everything_get-resource-reference",
                json!({ "resourceType": "Text", "resourceId": 2 }),
            ),
            ("everything_get-resource-links", json!({ "count": 2 })),
        ],
    )
    .await;
    let mut out = String::new();
    for report in &reports {
        assert!(!report.is_error, "{}", report.text);
        out.push_str(&format!(
            "## {} ({} attachment(s): {})\n{}\n\n",
            report.name,
            report.attachments.len(),
            report
                .attachments
                .iter()
                // The blob embeds its creation time, so its size varies by a byte or two.
                .map(|a| format!("{} <n> bytes", a.media_type))
                .collect::<Vec<_>>()
                .join(", "),
            blob_size_free(&stable(&report.text))
        ));
    }
    // The embedded text resource is text; the link is its URI.
    assert!(
        reports[1].text.contains("plaintext resource"),
        "{}",
        reports[1].text
    );
    assert!(
        reports[2].text.contains("demo://resource/"),
        "{}",
        reports[2].text
    );
    with_snapshots(|| insta::assert_snapshot!("everything_resources", out));
}

#[tokio::test]
async fn sec_tool_error_stays_a_readable_result() {
    let (profile, tools) = everything(true, "").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rt = runtime(&profile, tools, dir.path()).await;
    let reports = step(
        &mut rt,
        &[(
            "everything_get-resource-reference",
            json!({ "resourceType": "Text", "resourceId": 0 }),
        )],
    )
    .await;
    assert!(reports[0].is_error);
    with_snapshots(|| insta::assert_snapshot!("everything_tool_error", reports[0].text));

    // The session goes on: the next call works.
    let next = step(
        &mut rt,
        &[("everything_echo", json!({ "message": "still here" }))],
    )
    .await;
    assert!(!next[0].is_error, "{}", next[0].text);
    assert!(next[0].text.contains("still here"));
}

#[tokio::test]
async fn cm6_a_program_returns_the_mcp_image_with_lifetime_recent() {
    let (profile, tools) = everything(false, "codemode: { enable: true }\n").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let models =
        ModelsDoc::from_yaml("models:\n  main: { input: [text, image] }\n").expect("valid models");
    let assembly = assemble(profile, models, "main").expect("assembles");
    let mut builder =
        Runtime::builder(assembly, dir.path()).codemode_worker(WorkerSpawn::InProcess);
    for tool in tools {
        builder = builder.tool(tool);
    }
    let mut rt = builder.build().await.expect("the runtime builds");

    let code = "const shot = await tools[\"everything_get-tiny-image\"]({});\n\
                return { caption: shot[0].text, kind: shot[1].type, attachments: [{ ...shot[1], lifetime: \"recent\" }] };";
    let reports = step(&mut rt, &[("codemode", json!({ "code": code }))]).await;
    let report = &reports[0];
    assert!(!report.is_error, "{}", report.text);
    assert_eq!(report.attachments.len(), 1, "{report:?}");
    assert_eq!(report.attachments[0].media_type, "image/png");
    assert_eq!(
        report.attachments[0].lifetime,
        ishiki_core::Lifetime::Recent
    );
    assert!(
        report.text.contains("\"kind\":\"image\""),
        "{}",
        report.text
    );
    with_snapshots(|| insta::assert_snapshot!("everything_codemode_report", stable(&report.text)));

    // The next request embeds it.
    let next = rt.prepare().await.expect("prepare");
    let images = next
        .request
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter(|p| matches!(p, Part::Image(media) if media.media_type == "image/png"))
        .count();
    assert_eq!(images, 1);
}

/// `text/plain; 55 bytes` → `text/plain; <n> bytes`: the demo blob's size depends on the time.
fn blob_size_free(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    let key = "text/plain; ";
    while let Some(at) = rest.find(key) {
        out.push_str(&rest[..at + key.len()]);
        let tail = &rest[at + key.len()..];
        let digits = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        out.push_str(if digits > 0 { "<n>" } else { "" });
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}
