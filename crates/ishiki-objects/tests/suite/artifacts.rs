//! Artifacts on object storage: content-addressed, write-once, one object for concurrent
//! writers, readable through the resource center (RES-5, RES-8).

use std::sync::Arc;

use tokio::sync::Barrier;

use ishiki_objects::Objects;
use ishiki_resources::{
    ArtifactScheme, ArtifactStore, DiskArtifactStore, ReadResult, ResourceCenter, ResourceErrorKind,
};

use super::backends;

#[tokio::test]
async fn res8_same_bytes_same_url_as_the_disk_store() {
    let disk_dir = tempfile::tempdir().expect("tempdir");
    let disk = DiskArtifactStore::open(disk_dir.path()).expect("disk store");
    for backend in backends() {
        let store = backend.objects.artifacts();
        let url = store.put("codemode", b"hello", "txt").await.expect("put");
        assert_eq!(
            url,
            disk.put("codemode", b"hello", "txt")
                .await
                .expect("disk put")
        );
        assert_eq!(
            store.put("codemode", b"hello", "txt").await.expect("again"),
            url
        );
        assert_ne!(
            store
                .put("codemode", b"hello!", "txt")
                .await
                .expect("other"),
            url
        );
        assert_eq!(
            store.get(&url).await.expect("get"),
            b"hello",
            "{}",
            backend.name
        );
        assert_eq!(
            store
                .get(&format!("{url}?offset=2#x"))
                .await
                .expect("query ignored"),
            b"hello"
        );
        let tool_url = store
            .put("windows-mcp/Screenshot", b"hello", "txt")
            .await
            .expect("put");
        assert!(
            tool_url.starts_with("artifact://windows-mcp-Screenshot/"),
            "{tool_url}"
        );
        assert_eq!(
            backend.keys("artifacts").await.len(),
            3,
            "{}: {:?}",
            backend.name,
            backend.keys("artifacts").await
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_concurrent_writers_of_one_artifact_leave_one_object_with_the_right_bytes() {
    for backend in backends() {
        let store = Arc::new(backend.objects.artifacts());
        let bytes: Vec<u8> = (0..256 * 1024u32).map(|i| (i % 251) as u8).collect();
        let barrier = Arc::new(Barrier::new(16));
        let writers: Vec<_> = (0..16)
            .map(|_| {
                let (store, bytes, barrier) = (store.clone(), bytes.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    store.put("tool", &bytes, "bin").await
                })
            })
            .collect();
        let mut urls = Vec::new();
        for w in writers {
            urls.push(w.await.expect("writer task").expect("put"));
        }
        assert!(
            urls.iter().all(|u| *u == urls[0]),
            "{}: {urls:?}",
            backend.name
        );
        let keys = backend.keys("artifacts").await;
        assert_eq!(keys.len(), 1, "{}: {keys:?}", backend.name);
        assert_eq!(
            store.get(&urls[0]).await.expect("get"),
            bytes,
            "{}",
            backend.name
        );
    }
}

#[tokio::test]
async fn res8_an_existing_object_with_other_bytes_is_never_handed_out() {
    for backend in backends() {
        let store = backend.objects.artifacts();
        let url = store.put("t", b"first", "txt").await.expect("put");
        let name = url.trim_start_matches("artifact://t/");
        // Someone else's bytes under the name "first" hashes to (a prefix collision).
        backend
            .put_raw(&format!("artifacts/t/{name}"), b"forged")
            .await;
        let err = store
            .put("t", b"first", "txt")
            .await
            .expect_err("collision");
        assert_eq!(
            err.kind(),
            ResourceErrorKind::InvalidData,
            "{}",
            backend.name
        );
        assert_eq!(
            err.message(),
            format!("`{url}` already holds other bytes (hash prefix collision)")
        );
    }
}

#[tokio::test]
async fn res5_bad_and_missing_artifact_urls_are_clear_errors() {
    for backend in backends() {
        let store = backend.objects.artifacts();
        let missing = store
            .get("artifact://t/0123456789abcdef.txt")
            .await
            .expect_err("missing");
        assert_eq!(
            missing.kind(),
            ResourceErrorKind::NotFound,
            "{}",
            backend.name
        );
        assert_eq!(
            missing.message(),
            "no artifact at `artifact://t/0123456789abcdef.txt`"
        );
        for bad in [
            "asset://x",
            "artifact://t",
            "artifact://../x",
            "artifact://t/a%2Fb",
        ] {
            let err = store.get(bad).await.expect_err(bad);
            assert_eq!(err.kind(), ResourceErrorKind::InvalidUrl, "{bad}: {err}");
        }
    }
}

#[tokio::test]
async fn res3_artifacts_page_through_the_resource_center() {
    for backend in backends() {
        let store: Arc<dyn ArtifactStore> = Arc::new(backend.objects.artifacts());
        let url = store
            .put("read", b"one\ntwo\nthree\n", "txt")
            .await
            .expect("put");
        let center = ResourceCenter::new();
        center.register_file_scheme(Arc::new(ArtifactScheme(store)));
        let read = center
            .read(&format!("{url}?lines=2-3"))
            .await
            .expect("read");
        let ReadResult::Text { text, source } = read else {
            panic!("{}: text expected, got {read:?}", backend.name);
        };
        assert_eq!(text, "two\nthree\n");
        assert!(source.expect("source").snapshot, "artifacts are snapshots");
    }
}

#[test]
fn unsupported_locations_are_refused_with_the_reason() {
    let err = Objects::open("gs://bucket/x").expect_err("gs");
    assert_eq!(
        err.message(),
        "`gs:` object stores are not supported: use s3://bucket/prefix or file:///path"
    );
    let err = Objects::open_with("s3://bucket/x", [("no_such_option", "1")]).expect_err("option");
    assert!(
        err.message()
            .starts_with("unknown S3 option `no_such_option`"),
        "{err}"
    );
}

/// An `https://` S3 endpoint gets a TLS client: the crypto provider is in place (ring, the
/// workspace's one backend), so a request fails as a connection error that says so, never
/// as a panic for want of a provider.
#[tokio::test]
async fn an_https_endpoint_fails_as_a_connection_error_not_for_want_of_a_crypto_provider() {
    let objects = Objects::open_with(
        "s3://bucket/prefix",
        [
            ("aws_endpoint", "https://127.0.0.1:9"),
            ("aws_access_key_id", "test"),
            ("aws_secret_access_key", "test"),
            ("aws_region", "us-east-1"),
        ],
    )
    .expect("the store opens");
    let error = objects
        .artifacts()
        .get("artifact://codemode/0000000000000000000000000000000000000000000000000000000000000000.txt")
        .await.expect_err("nothing listens there");
    assert_eq!(error.kind(), ResourceErrorKind::Io, "{error}");
}
