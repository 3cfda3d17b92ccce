//! The artifact store (RES-5): content-addressed, write-once, safe with concurrent writers,
//! readable after reopening.

use std::sync::Arc;

use ishiki_resources::store::{artifact_name, artifact_tool_component};
use ishiki_resources::{
    ArtifactStore, DiskArtifactStore, ReadResult, ResourceCenter, ResourceErrorKind,
};

#[tokio::test]
async fn res5_same_bytes_get_the_same_url() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskArtifactStore::open(dir.path()).unwrap();
    let a = store.put("codemode", b"hello", "txt").await.unwrap();
    let b = store.put("codemode", b"hello", "txt").await.unwrap();
    assert_eq!(a, b);
    assert_eq!(
        a,
        format!("artifact://codemode/{}", artifact_name(b"hello", "txt"))
    );
    assert_eq!(a, "artifact://codemode/2cf24dba5fb0a30e.txt");
    assert_ne!(store.put("codemode", b"hello!", "txt").await.unwrap(), a);
    assert_eq!(
        store
            .put("windows-mcp/Screenshot", b"hello", "txt")
            .await
            .unwrap(),
        "artifact://windows-mcp-Screenshot/2cf24dba5fb0a30e.txt"
    );
    assert_eq!(artifact_tool_component(".."), "tool");
    assert_eq!(artifact_tool_component(""), "tool");
    assert_eq!(artifact_name(b"", ".p/n g"), "e3b0c44298fc1c14.png");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn res5_concurrent_writers_of_the_same_bytes_leave_one_intact_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskArtifactStore::open(dir.path()).unwrap());
    let bytes: Arc<Vec<u8>> = Arc::new((0..1_000_000u32).map(|i| (i % 251) as u8).collect());
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let store = Arc::clone(&store);
            let bytes = Arc::clone(&bytes);
            tokio::spawn(async move { store.put("tool", &bytes, "bin").await.unwrap() })
        })
        .collect();
    let mut urls = Vec::new();
    for t in threads {
        urls.push(t.await.unwrap());
    }
    assert!(urls.iter().all(|u| *u == urls[0]), "{urls:?}");
    let files: Vec<_> = std::fs::read_dir(dir.path().join("tool"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        files,
        vec![artifact_name(&bytes, "bin")],
        "no temporary files left"
    );
    assert_eq!(store.get(&urls[0]).await.unwrap(), *bytes);
}

#[tokio::test]
async fn res5_an_artifacts_bytes_never_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskArtifactStore::open(dir.path()).unwrap();
    let url = store.put("t", b"first", "txt").await.unwrap();
    // A forged file under another content's name: putting that content must not hand out a
    // URL whose bytes differ from what was stored.
    let forged_name = artifact_name(b"second", "txt");
    std::fs::write(dir.path().join("t").join(&forged_name), b"not second").unwrap();
    let err = store.put("t", b"second", "txt").await.unwrap_err();
    assert_eq!(err.kind(), ResourceErrorKind::InvalidData);
    assert_eq!(
        std::fs::read(dir.path().join("t").join(&forged_name)).unwrap(),
        b"not second"
    );
    for _ in 0..3 {
        assert_eq!(store.put("t", b"first", "txt").await.unwrap(), url);
        assert_eq!(store.get(&url).await.unwrap(), b"first");
    }
}

#[tokio::test]
async fn res5_everything_is_readable_after_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let png = {
        let mut out = std::io::Cursor::new(Vec::new());
        image::RgbImage::new(3, 2)
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap();
        out.into_inner()
    };
    let (text_url, png_url) = {
        let store = DiskArtifactStore::open(dir.path()).unwrap();
        (
            store.put("codemode", b"kept", "txt").await.unwrap(),
            store.put("codemode", &png, "png").await.unwrap(),
        )
    };
    let store = Arc::new(DiskArtifactStore::open(dir.path()).unwrap());
    assert_eq!(store.get(&text_url).await.unwrap(), b"kept");
    let center = ResourceCenter::new();
    center.register_file_scheme(store);
    let ReadResult::Text {
        text,
        source: Some(source),
    } = center.read(&text_url).await.unwrap()
    else {
        panic!("text artifact reads as text with a source");
    };
    assert_eq!(text, "kept");
    assert!(source.snapshot);
    assert_eq!(
        center.read(&format!("{png_url}#f")).await.unwrap(),
        ReadResult::File {
            url: png_url.clone(),
            media_type: "image/png".into(),
            data: png,
            source: None,
        }
    );
    let missing = center
        .read("artifact://codemode/0000000000000000.txt")
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), ResourceErrorKind::NotFound);
}

#[tokio::test]
async fn an_artifact_write_failure_names_the_url_not_the_host_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = DiskArtifactStore::open(dir.path()).expect("store");
    // A file where the tool's directory should be: the write cannot happen.
    std::fs::write(dir.path().join("shot"), b"in the way").expect("blocker");
    let error = store
        .put("shot", b"bytes", "txt")
        .await
        .expect_err("the directory cannot be created");
    let host = dir.path().display().to_string();
    assert!(!error.message().contains(&host), "{}", error.message());
    assert!(
        error
            .message()
            .starts_with("cannot store or read `artifact://shot/"),
        "{}",
        error.message()
    );
}

/// A SIGKILL during a write leaves `.ishiki-tmp-*` beside the artifacts; the next open removes
/// the ones older than any write takes, and leaves a fresh one (a live writer of a shared
/// store) alone.
#[tokio::test]
async fn a_store_removes_temporary_files_a_killed_writer_left_when_it_opens() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskArtifactStore::open(dir.path()).unwrap();
    store.put("codemode", b"kept", "txt").await.unwrap();
    let old = dir.path().join("codemode/.ishiki-tmp-4242-0");
    let fresh = dir.path().join("codemode/.ishiki-tmp-4242-1");
    std::fs::write(&old, b"half a write").unwrap();
    std::fs::write(&fresh, b"a write in progress").unwrap();
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options()
        .write(true)
        .open(&old)
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();
    let reopened = DiskArtifactStore::open(dir.path()).unwrap();
    assert!(!old.exists(), "the stale temporary file is removed");
    assert!(fresh.exists(), "a fresh one may belong to a live writer");
    let url = format!("artifact://codemode/{}", artifact_name(b"kept", "txt"));
    assert_eq!(reopened.get(&url).await.unwrap(), b"kept");
}

/// The state directory moved away mid-run: the store must not recreate its directory under
/// the old path and write there (the moved history's Continue anchors would not resolve).
#[tokio::test]
async fn a_store_whose_directory_was_moved_refuses_to_write_under_the_old_path() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("state/artifacts");
    let store = DiskArtifactStore::open(&root).unwrap();
    store.put("codemode", b"before", "txt").await.unwrap();
    std::fs::rename(dir.path().join("state"), dir.path().join("moved")).unwrap();
    let err = store.put("outlet", b"after", "txt").await.unwrap_err();
    assert_eq!(err.kind(), ResourceErrorKind::Io);
    assert_eq!(
        err.message(),
        format!(
            "cannot store `artifact://outlet/{}`: the artifact store's directory was moved or deleted while in use",
            artifact_name(b"after", "txt")
        )
    );
    assert!(!root.exists(), "nothing was created under the old path");
}
