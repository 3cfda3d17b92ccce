//! Routing (RES-1), run-time registration (RES-2), FileScheme parameters and read sources
//! (RES-3), current state versus snapshot (RES-8).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ishiki_resources::{
    ArtifactStore as _, DiskArtifactStore, ReadResult, ReadSource, ResourceCenter, ResourceError,
    ResourceErrorKind, SchemeHandler,
};
use proptest::prelude::*;
use url::Url;

use super::common::{Memory, Sandbox, runtime, text};

/// Records every URL it is asked to read and answers with a fixed text.
#[derive(Debug, Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
    answer: &'static str,
}

#[async_trait]
impl SchemeHandler for Recorder {
    fn scheme(&self) -> &str {
        "rec"
    }

    async fn read(&self, url: &Url) -> Result<ReadResult, ResourceError> {
        self.seen.lock().unwrap().push(url.to_string());
        Ok(ReadResult::Text {
            text: self.answer.to_owned(),
            source: None,
        })
    }
}

#[tokio::test]
async fn res1_center_routes_the_full_url_and_leaves_parameters_alone() {
    let center = ResourceCenter::new();
    let recorder = Arc::new(Recorder {
        answer: "ok",
        ..Recorder::default()
    });
    center.register(recorder.clone());
    // `offset=zz` and `lines=banana` would be errors for a FileScheme: the center itself
    // interprets no parameter, so a plain handler gets them untouched.
    let urls = [
        "rec://host/a/b?x=1&offset=zz&lines=banana#frag",
        "rec:///p?question=%E5%9B%BE#x",
        "REC://Host/a?b",
    ];
    for url in urls {
        let got = center.read(url).await.unwrap();
        assert_eq!(
            got,
            ReadResult::Text {
                text: "ok".into(),
                source: None
            }
        );
    }
    assert_eq!(
        *recorder.seen.lock().unwrap(),
        vec![
            "rec://host/a/b?x=1&offset=zz&lines=banana#frag".to_owned(),
            "rec:///p?question=%E5%9B%BE#x".to_owned(),
            "rec://Host/a?b".to_owned(),
        ]
    );
    let parsed = Url::parse("rec://h/p?q=1#f").unwrap();
    center.read_url(&parsed).await.unwrap();
    assert_eq!(
        recorder.seen.lock().unwrap().last().map(String::as_str),
        Some("rec://h/p?q=1#f")
    );
    let err = center.read("nope://x").await.unwrap_err();
    assert_eq!(err.kind(), ResourceErrorKind::UnknownScheme);
    let err = center.read("not a url").await.unwrap_err();
    assert_eq!(err.kind(), ResourceErrorKind::InvalidUrl);
}

#[tokio::test]
async fn res2_handlers_are_registered_and_replaced_at_run_time() {
    let center = ResourceCenter::new();
    let clone = center.clone();
    assert!(center.schemes().is_empty());
    assert_eq!(
        center.read("rec://x").await.unwrap_err().kind(),
        ResourceErrorKind::UnknownScheme
    );
    // Registering through a clone is seen by the original: they share the registry.
    clone.register(Arc::new(Recorder {
        answer: "first",
        ..Recorder::default()
    }));
    assert_eq!(text(center.read("rec://x").await.unwrap()).0, "first");
    center.register(Arc::new(Recorder {
        answer: "second",
        ..Recorder::default()
    }));
    assert_eq!(text(clone.read("rec://x").await.unwrap()).0, "second");
    center.register_file_scheme(Arc::new(Memory {
        scheme: "mem",
        bytes: b"m".to_vec(),
    }));
    assert_eq!(center.schemes(), vec!["mem".to_owned(), "rec".to_owned()]);
    assert!(center.handler("MEM").is_some());
    assert!(center.handler("other").is_none());
}

fn source(url: &str, offset: u64, total: u64) -> Option<ReadSource> {
    Some(ReadSource {
        url: url.to_owned(),
        offset,
        total,
        snapshot: false,
    })
}

#[tokio::test]
async fn res3_offset_lines_and_view_parameters() {
    let sandbox = Sandbox::new();
    let c = &sandbox.center;
    let base = "workspace:///home/workspace/notes.txt";
    let all = "TODO: a\nplain\nTODO: b\n";
    assert_eq!(
        text(c.read(base).await.unwrap()),
        (all.to_owned(), source(base, 0, 22))
    );
    assert_eq!(
        text(c.read(&format!("{base}?lines=2-3")).await.unwrap()),
        (
            "plain\nTODO: b\n".to_owned(),
            source(&format!("{base}?lines=2-3"), 0, 14)
        )
    );
    assert_eq!(
        text(
            c.read(&format!("{base}?view=numbered&lines=2-2"))
                .await
                .unwrap()
        ),
        (
            "     2\tplain\n".to_owned(),
            source(&format!("{base}?view=numbered&lines=2-2"), 0, 13)
        )
    );
    // The offset is dropped from the source URL; the fragment too.
    assert_eq!(
        text(c.read(&format!("{base}?offset=8#top")).await.unwrap()),
        ("plain\nTODO: b\n".to_owned(), source(base, 8, 22))
    );
    assert_eq!(
        text(c.read(&format!("{base}?offset=22")).await.unwrap()),
        (String::new(), source(base, 22, 22))
    );
    // Reads through `local://` behave the same, with its own URL in the source.
    let local = "local://named/home/workspace/notes.txt?lines=1-1";
    assert_eq!(
        text(c.read(local).await.unwrap()),
        ("TODO: a\n".to_owned(), source(local, 0, 8))
    );
    for (query, needle) in [
        ("?question=what", "unknown parameter `question`"),
        ("?offset=1&offset=2", "`offset` is given more than once"),
        ("?offset=-1", "parameter `offset` must be a byte offset"),
        ("?offset=23", "past the end of the text (22 bytes)"),
        ("?lines=0-2", "parameter `lines` must be `A-B`"),
        ("?lines=3-2", "parameter `lines` must be `A-B`"),
        ("?lines=x", "parameter `lines` must be `A-B`"),
        (
            "?view=fancy",
            "parameter `view` must be `numbered` or `plain`",
        ),
    ] {
        let err = c.read(&format!("{base}{query}")).await.unwrap_err();
        assert_eq!(err.kind(), ResourceErrorKind::InvalidParameter, "{query}");
        assert!(err.message().contains(needle), "{query}: {err}");
    }
}

#[tokio::test]
async fn res3_offsets_never_split_a_character() {
    let center = ResourceCenter::new();
    center.register_file_scheme(Arc::new(Memory {
        scheme: "mem",
        bytes: "é€".as_bytes().to_vec(),
    }));
    assert_eq!(text(center.read("mem:///x?offset=2").await.unwrap()).0, "€");
    let err = center.read("mem:///x?offset=1").await.unwrap_err();
    assert_eq!(err.kind(), ResourceErrorKind::InvalidParameter);
    assert!(err.message().contains("inside a UTF-8 character"), "{err}");
}

/// Reads `url` page by page, showing at most `page` bytes (at least one character) of each
/// read, carrying the source through JSON as a caller storing it would.
async fn read_in_pages(center: &ResourceCenter, url: &str, page: usize) -> String {
    let (first, source) = text(center.read(url).await.unwrap());
    let mut out = String::new();
    let mut chunk = first;
    let mut source = source.unwrap();
    loop {
        if chunk.is_empty() {
            return out;
        }
        let mut take = page.min(chunk.len());
        while !chunk.is_char_boundary(take) {
            take += 1;
        }
        out.push_str(&chunk[..take]);
        let stored = serde_json::to_string(&source).unwrap();
        let restored: ReadSource = serde_json::from_str(&stored).unwrap();
        assert_eq!(restored, source);
        let next = restored.continue_url(take as u64);
        let (text_next, source_next) = text(center.read(&next).await.unwrap());
        let source_next = source_next.unwrap();
        assert_eq!(
            source_next.url, source.url,
            "the source URL keeps range and view"
        );
        assert_eq!(source_next.total, source.total);
        chunk = text_next;
        source = source_next;
    }
}

#[tokio::test]
async fn res3_continuations_reproduce_the_whole_view() {
    let center = ResourceCenter::new();
    let body = "línea uno\n第二行\n\nthird 🦀 line\nlast without newline";
    center.register_file_scheme(Arc::new(Memory {
        scheme: "mem",
        bytes: body.as_bytes().to_vec(),
    }));
    for (query, expected) in [
        ("", body.to_owned()),
        ("?lines=2-4", "第二行\n\nthird 🦀 line\n".to_owned()),
        (
            "?view=numbered",
            "     1\tlínea uno\n     2\t第二行\n     3\t\n     4\tthird 🦀 line\n     5\tlast without newline"
                .to_owned(),
        ),
    ] {
        for page in [1, 2, 3, 7, 64, 1000] {
            let url = format!("mem:///doc.txt{query}#frag");
            assert_eq!(read_in_pages(&center, &url, page).await, expected, "{query} {page}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn res3_any_text_any_page_size_round_trips(
        body in "[a-c\n é🦀]{0,80}",
        page in 1usize..20,
        lines in proptest::option::of((1u64..6, 0u64..4)),
        numbered in any::<bool>(),
    ) {
        let center = ResourceCenter::new();
        center.register_file_scheme(Arc::new(Memory { scheme: "mem", bytes: body.clone().into_bytes() }));
        let mut params = Vec::new();
        if let Some((a, extra)) = lines {
            params.push(format!("lines={a}-{}", a + extra));
        }
        if numbered {
            params.push("view=numbered".to_owned());
        }
        let url = if params.is_empty() {
            "mem:///f".to_owned()
        } else {
            format!("mem:///f?{}", params.join("&"))
        };
        let rt = runtime();
        let whole = text(rt.block_on(center.read(&url)).unwrap()).0;
        let paged = rt.block_on(read_in_pages(&center, &url, page));
        prop_assert_eq!(paged, whole);
    }
}

#[tokio::test]
async fn res8_plain_urls_show_the_current_state_artifacts_a_snapshot() {
    let sandbox = Sandbox::new();
    let dir = tempfile::tempdir().unwrap();
    let artifacts = Arc::new(DiskArtifactStore::open(dir.path()).unwrap());
    sandbox.center.register_file_scheme(artifacts.clone());
    let url = sandbox
        .workspace
        .write("/home/workspace/state.txt", b"version 1")
        .unwrap();
    assert_eq!(url, "workspace:///home/workspace/state.txt");
    let (v1, source) = text(sandbox.center.read(&url).await.unwrap());
    assert_eq!(v1, "version 1");
    assert!(!source.unwrap().snapshot);
    let saved = artifacts
        .put("codemode", v1.as_bytes(), "txt")
        .await
        .unwrap();

    sandbox.workspace.write(&url, b"version 2").unwrap();
    let (v2, _) = text(sandbox.center.read(&url).await.unwrap());
    assert_eq!(v2, "version 2", "a plain URL re-read shows the new state");

    let (snap, source) = text(sandbox.center.read(&saved).await.unwrap());
    assert_eq!(snap, "version 1", "the artifact keeps the saved state");
    assert!(source.unwrap().snapshot);
    let newer = artifacts
        .put("codemode", v2.as_bytes(), "txt")
        .await
        .unwrap();
    assert_ne!(newer, saved);
    assert_eq!(
        text(sandbox.center.read(&saved).await.unwrap()).0,
        "version 1"
    );
}

#[cfg(unix)]
#[test]
fn a_workspace_write_keeps_the_replaced_mode_and_refuses_a_read_only_file() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Sandbox::new();
    let dir = sandbox.root.join("home/workspace");
    let mode_of = |name: &str| {
        std::fs::metadata(dir.join(name))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    for (name, mode) in [
        ("secret.env", 0o600),
        ("run.sh", 0o755),
        ("notes.txt", 0o640),
    ] {
        std::fs::write(dir.join(name), b"old").unwrap();
        std::fs::set_permissions(dir.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
        sandbox
            .workspace
            .write(&format!("/home/workspace/{name}"), b"new")
            .unwrap();
        assert_eq!(std::fs::read(dir.join(name)).unwrap(), b"new");
        assert_eq!(mode_of(name), mode, "{name} lost its mode");
    }
    // A file nobody may write is not replaced, even by a writer allowed to replace entries.
    std::fs::write(dir.join("frozen.txt"), b"old").unwrap();
    std::fs::set_permissions(
        dir.join("frozen.txt"),
        std::fs::Permissions::from_mode(0o444),
    )
    .unwrap();
    let error = sandbox
        .workspace
        .write("workspace:///home/workspace/frozen.txt", b"new")
        .unwrap_err();
    assert_eq!(error.kind(), ResourceErrorKind::NotAllowed);
    insta::assert_snapshot!(error.to_string());
    assert_eq!(std::fs::read(dir.join("frozen.txt")).unwrap(), b"old");
    assert_eq!(mode_of("frozen.txt"), 0o444);
}

/// `gen://any/N`: a FileScheme that makes `N` bytes and does not override `load_limited`.
#[derive(Debug)]
struct Generated;

#[async_trait]
impl ishiki_resources::FileScheme for Generated {
    fn scheme(&self) -> &str {
        "gen"
    }

    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError> {
        let n = url.path().trim_start_matches('/').parse().unwrap_or(0);
        Ok(vec![b'a'; n])
    }
}

/// Records the limit the center passes with a read.
#[derive(Debug, Default)]
struct LimitSeen {
    seen: Mutex<Vec<u64>>,
}

#[async_trait]
impl SchemeHandler for LimitSeen {
    fn scheme(&self) -> &str {
        "seen"
    }

    async fn read(&self, _url: &Url) -> Result<ReadResult, ResourceError> {
        Err(ResourceError::new(
            ResourceErrorKind::NotFound,
            "the center calls read_limited",
        ))
    }

    async fn read_limited(
        &self,
        url: &Url,
        limit: ishiki_resources::ReadLimit,
    ) -> Result<ReadResult, ResourceError> {
        self.seen.lock().unwrap().push(limit.max_bytes());
        limit.check(url, 5)?;
        Ok(ReadResult::Text {
            text: "seen!".to_owned(),
            source: None,
        })
    }
}

#[tokio::test]
async fn every_handler_gets_the_centers_read_limit_and_a_result_past_it_is_refused() {
    let center = ResourceCenter::new().with_read_limit(ishiki_resources::ReadLimit::new(1000));
    let seen = Arc::new(LimitSeen::default());
    center.register(seen.clone());
    center.register_file_scheme(Arc::new(Generated));
    assert!(center.read("seen://x").await.is_ok());
    assert_eq!(*seen.seen.lock().unwrap(), [1000]);
    assert!(center.read("gen://any/1000").await.is_ok());
    let over = center.read("gen://any/1001").await.expect_err("over");
    assert_eq!(over.kind(), ResourceErrorKind::TooLarge);
    assert_eq!(
        over.to_string(),
        "`gen://any/1001` would be about 1001 bytes, over the read limit of 1000 bytes: ask for less"
    );
}

/// Issue 24: the center's read limit reached only some handlers, so a smaller limit set by the
/// embedder did not stop `workspace://` and `local://` reads, which read up to their own
/// (larger) bound. Both take the smaller of the two, and refuse from the file's size before
/// reading it.
#[tokio::test]
async fn workspace_and_local_reads_stop_at_the_centers_read_limit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fits.txt"), "a".repeat(1000)).unwrap();
    std::fs::write(dir.path().join("big.txt"), "a".repeat(1001)).unwrap();
    let center = ResourceCenter::new().with_read_limit(ishiki_resources::ReadLimit::new(1000));
    center.register_file_scheme(Arc::new(
        ishiki_resources::WorkspaceScheme::new(dir.path()).unwrap(),
    ));
    center.register_file_scheme(Arc::new(ishiki_resources::LocalScheme::new(vec![(
        "docs".to_owned(),
        dir.path().to_path_buf(),
    )])));
    for base in ["workspace:///", "local://docs/"] {
        let fits = center.read(&format!("{base}fits.txt")).await.unwrap();
        assert!(matches!(fits, ReadResult::Text { ref text, .. } if text.len() == 1000));
        let over = center
            .read(&format!("{base}big.txt"))
            .await
            .map(|_| format!("{base}big.txt was read past the limit"))
            .expect_err("past the limit");
        assert_eq!(over.kind(), ResourceErrorKind::TooLarge);
        assert_eq!(
            over.to_string(),
            format!("`{base}big.txt` is 1001 bytes, more than the read limit of 1000 bytes")
        );
    }
}
