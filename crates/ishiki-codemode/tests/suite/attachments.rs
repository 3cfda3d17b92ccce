//! CM-5..CM-7: the top-level `attachments` of a return value.

use super::support::{limits, sandbox};
use ishiki_codemode::{
    AttachmentContent, AttachmentItem, CodemodeErrorKind, Lifetime, parse_attachments,
};
use serde_json::json;

#[tokio::test]
async fn cm5_cm6_cm7_every_accepted_item_shape() {
    let sandbox = sandbox(limits());
    let outcome = sandbox
        .run(
            r#"
            return {
                text: "desk",
                attachments: [
                    { type: "image", mimeType: "image/png", data: "AAEC", lifetime: "recent" },
                    { type: "audio", mimeType: "audio/wav", data: "AwQ=" },
                    { type: "file", url: "artifact://codemode/page.png", mediaType: "image/png", data: "BQY=", lifetime: "retain" },
                    { type: "file", url: "workspace:///home/workspace/shot.png", mediaType: "image/png" },
                    { type: "resource", resource: { uri: "mcp://x/blob", mimeType: "image/gif", blob: "Bw==" } },
                    { type: "resource", resource: { uri: "mcp://x/text", mimeType: "text/plain", text: "hello" } },
                    { type: "resource_link", uri: "asset://0190f9f3-3ff8-7000-8000-000000000001", lifetime: "once" },
                ],
            };
            "#,
            vec![],
        )
        .await
        .expect("runs");
    assert_eq!(outcome.value, json!({ "text": "desk" }));
    let bytes = |media_type: &str, data: &[u8], url: Option<&str>| AttachmentContent::Bytes {
        media_type: media_type.to_owned(),
        data: data.to_vec(),
        url: url.map(str::to_owned),
    };
    let item = |lifetime, content| AttachmentItem { lifetime, content };
    assert_eq!(
        outcome.attachments,
        vec![
            item(Lifetime::Recent, bytes("image/png", &[0, 1, 2], None)),
            item(Lifetime::Once, bytes("audio/wav", &[3, 4], None)),
            item(
                Lifetime::Retain,
                bytes("image/png", &[5, 6], Some("artifact://codemode/page.png"))
            ),
            item(
                Lifetime::Once,
                AttachmentContent::Reference {
                    url: "workspace:///home/workspace/shot.png".to_owned(),
                    media_type: Some("image/png".to_owned()),
                }
            ),
            item(
                Lifetime::Once,
                bytes("image/gif", &[7], Some("mcp://x/blob"))
            ),
            item(
                Lifetime::Once,
                AttachmentContent::Text {
                    uri: "mcp://x/text".to_owned(),
                    media_type: Some("text/plain".to_owned()),
                    text: "hello".to_owned(),
                }
            ),
            item(
                Lifetime::Once,
                AttachmentContent::Reference {
                    url: "asset://0190f9f3-3ff8-7000-8000-000000000001".to_owned(),
                    media_type: None,
                }
            ),
        ]
    );
}

#[tokio::test]
async fn cm5_a_malformed_array_fails_the_program_with_its_console() {
    let sandbox = sandbox(limits());
    let error = sandbox
        .run(
            "console.log('made it'); return { attachments: [{ type: 'video', url: 'x' }] }",
            vec![],
        )
        .await
        .expect_err("invalid");
    assert_eq!(error.kind(), CodemodeErrorKind::InvalidAttachments);
    assert_eq!(error.console(), ["made it"]);
}

#[test]
fn cm5_cm6_invalid_items_are_named_precisely() {
    let cases = [
        json!({ "attachments": {} }),
        json!({ "attachments": [7] }),
        json!({ "attachments": [{ "mimeType": "image/png" }] }),
        json!({ "attachments": [{ "type": "video", "url": "x" }] }),
        json!({ "attachments": [{ "type": "image", "data": "AA==" }] }),
        json!({ "attachments": [{ "type": "image", "mimeType": "image/png", "data": "%%%" }] }),
        json!({ "attachments": [{ "type": "file", "mediaType": "image/png" }] }),
        json!({ "attachments": [{ "type": "file", "data": "AA==" }] }),
        json!({ "attachments": [{ "type": "resource", "resource": { "uri": "u" } }] }),
        json!({ "attachments": [{ "type": "resource_link" }] }),
        json!({ "attachments": [{ "type": "resource_link", "uri": "u", "lifetime": "forever" }] }),
        json!({ "attachments": [{ "type": "resource_link", "uri": 5 }] }),
    ];
    let messages: Vec<String> = cases
        .iter()
        .map(|case| match parse_attachments(case) {
            Ok(items) => format!("ok {items:?}"),
            Err(error) => {
                assert_eq!(error.kind(), CodemodeErrorKind::InvalidAttachments);
                error.message().to_owned()
            }
        })
        .collect();
    insta::assert_snapshot!(messages.join("\n"));
}

#[test]
fn cm5_only_the_top_level_array_counts() {
    assert_eq!(parse_attachments(&json!([1, 2])).expect("plain"), vec![]);
    let nested = json!({ "page": { "attachments": [{ "type": "image", "mimeType": "image/png", "data": "AA==" }] } });
    assert_eq!(parse_attachments(&nested).expect("plain"), vec![]);
}
