//! `send_message` element mode (SEND-1, SEND-2): what reaches the platform is rebuilt from what
//! is allowed — images only through the allowed schemes and only when they decode, every other
//! tag or attribute that could fetch or run something escaped or removed, and reported.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use ishiki_core::platform::Outgoing;
use ishiki_core::{
    Durability, FileScheme, ModelResponse, Platform, Runtime, ToolCall, ToolError, WorkerSpawn,
};
use ishiki_resources::ResourceError;
use serde_json::json;
use url::Url;

use super::runtime::{assembly, clock_at, png};
use super::with_snapshots;

/// Keeps every outgoing message.
#[derive(Debug, Default)]
struct Recorder {
    sent: Mutex<Vec<Outgoing>>,
}

#[async_trait::async_trait]
impl Platform for Recorder {
    async fn send(&self, outgoing: &Outgoing) -> Result<(), ToolError> {
        self.sent.lock().expect("recorder").push(outgoing.clone());
        Ok(())
    }
}

/// `pics://…`: a registered scheme that is not one `send_message` takes; every URL is a PNG.
#[derive(Debug)]
struct Pics;

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffff_u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A 0×0 GIF: a logical screen and one frame of 0×0, complete with its trailer.
fn empty_gif() -> Vec<u8> {
    let mut out = b"GIF89a".to_vec();
    // Screen 0×0 with a global table of two colours.
    out.extend_from_slice(&[0, 0, 0, 0, 0x80, 0, 0, 0, 0, 0, 255, 255, 255]);
    out.extend_from_slice(&[0x2c, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&[2, 2, 0x44, 0x01, 0, 0x3b]);
    out
}

/// A PNG whose IHDR (with a valid CRC) says `side`×`side`, with no image data.
fn png_header(side: u32) -> Vec<u8> {
    let mut out = png(1, 1, 1);
    out[16..20].copy_from_slice(&side.to_be_bytes());
    out[20..24].copy_from_slice(&side.to_be_bytes());
    let crc = crc32(&out[12..29]);
    out[29..33].copy_from_slice(&crc.to_be_bytes());
    out.truncate(33);
    out
}

#[async_trait]
impl FileScheme for Pics {
    fn scheme(&self) -> &str {
        "pics"
    }

    async fn load(&self, _url: &Url) -> Result<Vec<u8>, ResourceError> {
        Ok(png(4, 4, 9))
    }
}

async fn build(dir: &Path, platform: Arc<Recorder>) -> Runtime {
    Runtime::builder(assembly("{}\n", "seeing"), dir.join("state"))
        .clock(clock_at(Duration::ZERO))
        .codemode_worker(WorkerSpawn::InProcess)
        .durability(Durability::Normal)
        .workspace_root(dir.join("ws"))
        .platform(platform)
        .file_scheme(Arc::new(Pics))
        .build()
        .await
        .expect("the runtime builds")
}

async fn send(rt: &mut Runtime, messages: &[&str]) -> String {
    let prepared = rt.prepare().await.expect("prepare");
    rt.commit(
        prepared,
        ModelResponse::from_calls(vec![ToolCall {
            id: "c1".to_owned(),
            name: "send_message".to_owned(),
            input: json!({ "messages": messages, "mode": "element" }),
        }]),
    )
    .await
    .expect("commit");
    let mut reports = rt.execute().await.expect("execute");
    let report = reports.remove(0);
    assert!(!report.is_error, "{}", report.text);
    report.text
}

fn workspace(dir: &Path) {
    let ws = dir.join("ws");
    std::fs::create_dir_all(&ws).expect("ws");
    let good = png(4, 4, 9);
    std::fs::write(ws.join("ok.png"), &good).expect("write");
    std::fs::write(ws.join("signature.png"), &good[..8]).expect("write");
    std::fs::write(ws.join("truncated.png"), &good[..good.len() / 2]).expect("write");
    std::fs::write(ws.join("huge.png"), png_header(50_000)).expect("write");
    std::fs::write(ws.join("empty.gif"), empty_gif()).expect("write");
}

#[tokio::test]
async fn element_markup_reaches_the_platform_only_as_allowed_images_and_escaped_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    workspace(dir.path());
    let platform = Arc::new(Recorder::default());
    let mut rt = build(dir.path(), platform.clone()).await;
    let hostile = [
        "<IMG SRC=http://evil.example/a.png>",
        "<img SRC=http://evil.example/b.png src=\"workspace:///ok.png\">",
        "<img data-src=http://evil.example/c.png src=workspace:///ok.png onerror=alert(1)>",
        "<img srcset=\"http://evil.example/d.png 2x\" alt='a \"quote\"'>",
        "<picture><source srcset=http://evil.example/e.png><img src=pics://x></picture>",
        "<svg><image href=http://evil.example/f.png /></svg>",
        "<p style=\"background:url(http://evil.example/g.png)\" onclick=x()>hi &amp; <b>bye</b></p>",
        "<script>fetch('http://evil.example/h')</script><a href=http://evil.example>link</a>",
        "<iframe src=http://evil.example></iframe><video poster=http://evil.example/i.png>",
        "a < b && c > d <!-- note --> <img src=\"workspace:///ok.png\" alt=ok>",
    ];
    let report = send(&mut rt, &hostile).await;
    let sent = platform.sent.lock().expect("recorder").clone();
    assert_eq!(sent.len(), 1);
    let outgoing = &sent[0];
    // Every `<` that is still markup opens an allowed image or a formatting tag.
    let allowed = ["img src=\"workspace:///ok.png\"", "p>", "/p>", "b>", "/b>"];
    for message in &outgoing.messages {
        for (at, _) in message.match_indices('<') {
            assert!(
                allowed.iter().any(|a| message[at + 1..].starts_with(a)),
                "markup at {at} in {message}"
            );
        }
    }
    assert!(
        outgoing
            .images
            .iter()
            .all(|i| i.src == "workspace:///ok.png"),
        "{:?}",
        outgoing.images.iter().map(|i| &i.src).collect::<Vec<_>>()
    );
    // The unquoted allowed `src` is accepted, and the same source is sent each time.
    assert_eq!(outgoing.images.len(), 2);
    with_snapshots(|| {
        insta::assert_yaml_snapshot!(
            "send_message_element_markup",
            json!({ "messages": outgoing.messages, "report": report.lines().collect::<Vec<_>>() })
        );
    });
}

#[tokio::test]
async fn images_that_do_not_decode_are_dropped_with_a_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    workspace(dir.path());
    let platform = Arc::new(Recorder::default());
    let mut rt = build(dir.path(), platform.clone()).await;
    let report = send(
        &mut rt,
        &[
            "<img src=workspace:///signature.png><img src=workspace:///truncated.png><img src=workspace:///huge.png><img src=workspace:///empty.gif><img src=workspace:///ok.png>",
        ],
    )
    .await;
    let sent = platform.sent.lock().expect("recorder").clone();
    assert_eq!(
        sent[0]
            .images
            .iter()
            .map(|i| i.src.as_str())
            .collect::<Vec<_>>(),
        ["workspace:///ok.png"]
    );
    assert_eq!(sent[0].messages, ["<img src=\"workspace:///ok.png\"/>"]);
    assert_eq!(sent[0].dropped.len(), 4, "{report}");
    with_snapshots(|| insta::assert_snapshot!("send_message_undecodable_images", report));
}
