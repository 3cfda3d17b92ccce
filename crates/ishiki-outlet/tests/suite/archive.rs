//! Archiving and paging through real resources: a dynamic source is read once and paged from
//! its artifact (OUT-5); FileScheme text pages from its own URL without new artifacts (OUT-6);
//! media become artifacts and markers, persisted URLs are reused (OUT-3, CM-7).

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use ishiki_outlet::{Budget, Emitted, Media, Outlet, OutletErrorKind, ToolDisplay, marker};
use ishiki_resources::{
    ArtifactStore as _, FileScheme, ReadResult, ResourceCenter, ResourceError, ResourceErrorKind,
    SchemeHandler,
};
use url::Url;

use super::common::{FailingStore, TempStore, check_page};

/// `example://large.text?lines=N`: a dynamic, non-file source that counts its reads.
#[derive(Debug, Default)]
struct LargeText {
    reads: AtomicUsize,
}

fn large_text(lines: usize) -> String {
    (1..=lines)
        .map(|n| format!("line {n} of a dynamic text ✓\n"))
        .collect()
}

#[async_trait]
impl SchemeHandler for LargeText {
    fn scheme(&self) -> &str {
        "example"
    }

    async fn read(&self, url: &Url) -> Result<ReadResult, ResourceError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let lines = url
            .query_pairs()
            .find(|(k, _)| k == "lines")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(10);
        Ok(ReadResult::Text {
            text: large_text(lines),
            source: None,
        })
    }
}

/// `mem://` files: a FileScheme whose loads are counted.
#[derive(Debug, Default)]
struct MemFiles {
    files: BTreeMap<String, String>,
    loads: AtomicUsize,
}

#[async_trait]
impl FileScheme for MemFiles {
    fn scheme(&self) -> &str {
        "mem"
    }

    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.files
            .get(url.path())
            .map(|t| t.clone().into_bytes())
            .ok_or_else(|| {
                ResourceError::new(ResourceErrorKind::NotFound, format!("no file at `{url}`"))
            })
    }
}

/// What the runtime's direct `read` does with a raw result: FileScheme text pages from its
/// source, anything else goes through the display path.
async fn emit_read(outlet: &Outlet, result: ReadResult) -> Emitted {
    match result {
        ReadResult::Text {
            text,
            source: Some(source),
        } => outlet.emit_read_text(&text, &source),
        ReadResult::Text { text, source: None } => {
            outlet.emit("read", ToolDisplay::text(text)).await.unwrap()
        }
        ReadResult::File { .. } => panic!("text expected"),
    }
}

/// Reads `url` and follows its continuations to the end, checking every page.
async fn read_all(center: &ResourceCenter, outlet: &Outlet, url: &str) -> (Vec<Emitted>, String) {
    let mut pages = Vec::new();
    let mut joined = String::new();
    let mut next = Some(url.to_owned());
    while let Some(url) = next {
        let page = emit_read(outlet, center.read(&url).await.unwrap()).await;
        joined.push_str(&check_page(&page, outlet.budget()));
        next = page.continuation.as_ref().map(|c| c.url.clone());
        pages.push(page);
    }
    (pages, joined)
}

#[tokio::test]
async fn out5_dynamic_source_is_read_once_and_paged_from_its_artifact() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone());
    let center = ResourceCenter::new();
    let example = Arc::new(LargeText::default());
    center.register(example.clone());
    center.register_file_scheme(store.store.clone());

    let (pages, joined) = read_all(&center, &outlet, "example://large.text?lines=3000").await;

    assert_eq!(example.reads.load(Ordering::SeqCst), 1, "the tool ran once");
    assert_eq!(joined, large_text(3000));
    assert!(pages.len() >= 3, "{} pages", pages.len());
    let first = pages[0].continuation.as_ref().unwrap();
    assert!(first.url.starts_with("artifact://read/"), "{}", first.url);
    for page in &pages[1..] {
        if let Some(next) = &page.continuation {
            assert!(next.url.starts_with(first.url.split('?').next().unwrap()));
        }
    }
    assert_eq!(pages.last().unwrap().continuation, None);
    // One artifact: the full display, stored once; paging it archives nothing more (OUT-6).
    assert_eq!(store.count(), 1);
}

#[tokio::test]
async fn out6_file_scheme_pages_with_its_own_url_and_creates_no_artifact() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone()).with_budget(Budget {
        max_lines: 200,
        max_units: 4000,
    });
    let center = ResourceCenter::new();
    let log: String = (1..=4500).map(|n| format!("entry {n}: ok\n")).collect();
    let mut files = MemFiles::default();
    files.files.insert("/long.log".into(), log.clone());
    let files = Arc::new(files);
    center.register_file_scheme(files.clone());

    let (pages, joined) = read_all(&center, &outlet, "mem:///long.log").await;

    assert_eq!(joined, log);
    assert!(pages.len() > 10);
    for page in &pages[..pages.len() - 1] {
        let url = &page.continuation.as_ref().unwrap().url;
        assert!(url.starts_with("mem:///long.log?offset="), "{url}");
    }
    assert_eq!(store.count(), 0, "FileScheme pages create no artifact");
    assert_eq!(files.loads.load(Ordering::SeqCst), pages.len());
}

#[tokio::test]
async fn out7_file_continuation_keeps_the_requested_range() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone()).with_budget(Budget {
        max_lines: 50,
        max_units: 4000,
    });
    let center = ResourceCenter::new();
    let log: String = (1..=1000).map(|n| format!("entry {n}\n")).collect();
    let mut files = MemFiles::default();
    files.files.insert("/long.log".into(), log.clone());
    center.register_file_scheme(Arc::new(files));

    let (pages, joined) = read_all(&center, &outlet, "mem:///long.log?lines=101-400").await;

    let range: String = (101..=400).map(|n| format!("entry {n}\n")).collect();
    assert_eq!(joined, range);
    assert!(pages.len() > 3);
    let url = &pages[0].continuation.as_ref().unwrap().url;
    assert!(
        url.starts_with("mem:///long.log?lines=101-400&offset="),
        "{url}"
    );
    assert_eq!(store.count(), 0);
}

#[tokio::test]
async fn out6_existing_artifact_pages_create_no_new_artifact() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone()).with_budget(Budget {
        max_lines: 100,
        max_units: 3000,
    });
    let center = ResourceCenter::new();
    center.register_file_scheme(store.store.clone());
    let text = large_text(700);
    let url = store
        .store
        .put("bash", text.as_bytes(), "txt")
        .await
        .unwrap();
    assert_eq!(store.count(), 1);

    let (pages, joined) = read_all(&center, &outlet, &url).await;

    assert_eq!(joined, text);
    assert!(pages.len() > 3);
    assert_eq!(store.count(), 1, "paging an artifact archives nothing");
}

#[tokio::test]
async fn out5_same_output_is_archived_once() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone()).with_budget(Budget {
        max_lines: 10,
        max_units: 1000,
    });
    let text = large_text(100);
    let a = outlet
        .emit("bash", ToolDisplay::text(text.clone()))
        .await
        .unwrap();
    let b = outlet.emit("bash", ToolDisplay::text(text)).await.unwrap();
    assert_eq!(a, b);
    assert_eq!(store.count(), 1);
}

#[tokio::test]
async fn out5_archive_failure_is_a_clear_error() {
    let failing = Arc::new(FailingStore::default());
    let outlet = Outlet::new(failing.clone()).with_budget(Budget {
        max_lines: 10,
        max_units: 1000,
    });
    let err = outlet
        .emit("bash", ToolDisplay::text(large_text(100)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), OutletErrorKind::Archive);
    assert_eq!(
        err.to_string(),
        "cannot archive the output of `bash` to page it: disk full"
    );
    // Within budget nothing is archived, so nothing can fail.
    let ok = outlet.emit("bash", ToolDisplay::text("ok")).await.unwrap();
    assert_eq!(ok.text, "ok");
    assert_eq!(failing.puts.load(Ordering::SeqCst), 1);
}

pub(super) fn png(width: u32, height: u32) -> Vec<u8> {
    encode(width, height, image::ImageFormat::Png)
}

pub(super) fn gif(width: u32, height: u32) -> Vec<u8> {
    encode(width, height, image::ImageFormat::Gif)
}

fn encode(width: u32, height: u32, format: image::ImageFormat) -> Vec<u8> {
    let img = image::RgbaImage::from_fn(width, height, |x, y| {
        image::Rgba([(x * 7) as u8, (y * 5) as u8, 90, 255])
    });
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgba8(img)
        .write_to(&mut out, format)
        .unwrap();
    out.into_inner()
}

#[tokio::test]
async fn out3_media_is_archived_and_replaced_by_its_marker() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone());
    let bytes = png(64, 48);
    let shown = outlet
        .emit(
            "screenshot",
            ToolDisplay::text("Captured the window.")
                .with_media(Media::new("image/png", bytes.clone()))
                .with_text("Done."),
        )
        .await
        .unwrap();
    let [r] = shown.attachments.as_slice() else {
        panic!("one attachment expected: {shown:?}");
    };
    assert!(r.url.starts_with("artifact://screenshot/") && r.url.ends_with(".png"));
    assert_eq!(r.media_type, "image/png");
    assert_eq!(r.bytes, bytes.len() as u64);
    assert_eq!(r.dimensions, Some((64, 48)));
    assert_eq!(
        shown.text,
        format!("Captured the window.\n{}\nDone.", marker(r))
    );
    assert_eq!(shown.continuation, None);
    // The bytes live in the resource.
    assert_eq!(store.store.get(&r.url).await.unwrap(), bytes);
    assert_eq!(store.count(), 1);
}

#[tokio::test]
async fn out3_non_image_media_has_no_dimensions_and_sniffs_an_empty_type() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone());
    let wav = b"RIFF\x24\0\0\0WAVEfmt ".to_vec();
    let r = outlet
        .attach("tts", Media::new("", wav.clone()))
        .await
        .unwrap();
    assert_eq!(r.media_type, "audio/wav");
    assert_eq!(r.dimensions, None);
    assert!(r.url.starts_with("artifact://tts/") && r.url.ends_with(".wav"));
    assert_eq!(
        marker(&r),
        format!("[attachment: {}; audio/wav; {} bytes]", r.url, wav.len())
    );
}

#[tokio::test]
async fn cm7_persisted_urls_are_reused_and_live_urls_snapshotted() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone());
    let bytes = png(8, 8);

    let asset = "asset://0190a6f0-7c4e-7d2a-8b3c-1234567890ab";
    let r = outlet
        .attach(
            "codemode",
            Media::new("image/png", bytes.clone()).with_url(asset),
        )
        .await
        .unwrap();
    assert_eq!(r.url, asset);
    let artifact = "artifact://screenshot/00112233aabbccdd.png";
    let r = outlet
        .attach(
            "codemode",
            Media::new("image/png", bytes.clone()).with_url(artifact),
        )
        .await
        .unwrap();
    assert_eq!(r.url, artifact);
    assert_eq!(r.dimensions, Some((8, 8)));
    assert_eq!(store.count(), 0, "persisted content is not copied");

    let live = "workspace:///home/workspace/shot.png";
    let r = outlet
        .attach(
            "codemode",
            Media::new("image/png", bytes.clone()).with_url(live),
        )
        .await
        .unwrap();
    assert!(r.url.starts_with("artifact://codemode/"), "{}", r.url);
    assert_eq!(store.store.get(&r.url).await.unwrap(), bytes);
    assert_eq!(store.count(), 1, "a live reference is snapshotted");
}

#[tokio::test]
async fn out5_paged_display_archives_the_text_after_media_replacement() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone()).with_budget(Budget {
        max_lines: 20,
        max_units: 2000,
    });
    let shown = outlet
        .emit(
            "browser",
            ToolDisplay::new()
                .with_media(Media::new("image/png", png(16, 16)))
                .with_text(large_text(200)),
        )
        .await
        .unwrap();
    assert_eq!(shown.attachments.len(), 1);
    let next = shown.continuation.as_ref().unwrap();
    let (url, _) = next.url.split_once('?').unwrap();
    let archived = String::from_utf8(store.store.get(url).await.unwrap()).unwrap();
    assert_eq!(
        archived,
        format!("{}\n{}", marker(&shown.attachments[0]), large_text(200))
    );
    assert!(shown.text.starts_with("[attachment: artifact://browser/"));
    // The image and the text: two artifacts.
    assert_eq!(store.count(), 2);
}

#[tokio::test]
async fn out3_archive_failure_of_media_is_a_clear_error() {
    let outlet = Outlet::new(Arc::new(FailingStore::default()));
    let err = outlet
        .attach("screenshot", Media::new("image/png", png(2, 2)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), OutletErrorKind::Archive);
    assert_eq!(
        err.message(),
        "cannot archive image/png media of `screenshot`: disk full"
    );
}

#[tokio::test]
async fn out5_next_page_follows_an_archived_result_to_its_end() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone()).with_budget(Budget {
        max_lines: 20,
        max_units: 2000,
    });
    let text: String = (1..=300).map(|n| format!("row {n} ✓ 😀\n")).collect();
    let mut page = outlet
        .emit("bash", ToolDisplay::text(text.clone()))
        .await
        .unwrap();
    let mut joined = page.body().to_owned();
    let mut pages = 1;
    while let Some(next) = page.continuation.clone() {
        page = outlet.next_page(&next).await.unwrap();
        check_page(&page, outlet.budget());
        joined.push_str(page.body());
        pages += 1;
    }
    assert_eq!(
        joined, text,
        "the pages joined reproduce the archived text (OUT-7)"
    );
    assert!(pages > 10);
    assert_eq!(store.count(), 1, "paging archives nothing more");
}

#[tokio::test]
async fn next_page_refuses_what_it_cannot_read() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone()).with_budget(Budget {
        max_lines: 5,
        max_units: 1000,
    });
    let long: String = (1..=50).map(|n| format!("{n}\n")).collect();
    let first = outlet.emit("bash", ToolDisplay::text(long)).await.unwrap();
    let url = first.continuation.unwrap().url;
    let base = url.split('?').next().unwrap().to_owned();
    let cases = [
        "workspace:///home/workspace/a.txt?offset=3".to_owned(),
        format!("{base}?offset=x"),
        format!("{base}?offset=100000"),
        format!("{base}?lines=1-2"),
        "artifact://bash/0000000000000000.txt?offset=0".to_owned(),
    ];
    let mut messages = Vec::new();
    for url in &cases {
        let err = outlet
            .next_page(&ishiki_outlet::Continuation { url: url.clone() })
            .await
            .unwrap_err();
        assert_eq!(err.kind(), OutletErrorKind::Continuation);
        messages.push(err.message().replace(&base, "artifact://bash/<hash>.txt"));
    }
    assert_eq!(
        messages[..4],
        [
            "workspace:///home/workspace/a.txt is not an artifact; read it through the resource center",
            "offset \"x\" is not a byte offset",
            "offset 100000 is not inside artifact://bash/<hash>.txt",
            "unexpected parameter \"lines=1-2\" in artifact://bash/<hash>.txt",
        ]
    );
    assert_eq!(
        messages[4],
        "no artifact at `artifact://bash/0000000000000000.txt`"
    );
}
