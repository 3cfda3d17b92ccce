//! Test harness: every test body runs against the local file-system backend and against a real
//! S3 server — moto's standalone server ([`TestServer`], feature `test-server`: installed into
//! `<repo>/.tools/venv` on demand and started on 127.0.0.1 by the tests themselves).

mod artifacts;
mod assets;

use ishiki_objects::Objects;
use ishiki_objects::testing::TestServer;

/// One backend a test body runs against; holds what must outlive the test.
pub(crate) struct Backend {
    pub(crate) name: &'static str,
    pub(crate) objects: Objects,
    _dir: Option<tempfile::TempDir>,
}

impl Backend {
    /// Every key under `<prefix>/<under>`, relative to the prefix, sorted.
    pub(crate) async fn keys(&self, under: &str) -> Vec<String> {
        let (store, prefix) = (self.objects.store(), self.objects.prefix());
        {
            let mut out = Vec::new();
            let mut pending = vec![prefix.clone().join(under)];
            while let Some(dir) = pending.pop() {
                let listing = store.list_with_delimiter(Some(&dir)).await.expect("list");
                for object in listing.objects {
                    let key = object.location.to_string();
                    let relative = key
                        .strip_prefix(&format!("{prefix}/"))
                        .unwrap_or(&key)
                        .to_owned();
                    out.push(relative);
                }
                pending.extend(listing.common_prefixes);
            }
            out.sort();
            out
        }
    }

    /// Writes `bytes` at `<prefix>/<key>` behind the stores' back (unconditionally).
    pub(crate) async fn put_raw(&self, key: &str, bytes: &[u8]) {
        let bytes = bytes.to_vec();
        let (store, prefix) = (self.objects.store(), self.objects.prefix());
        {
            let key = object_store::path::Path::parse(key).expect("key");
            let path: object_store::path::Path = prefix.parts().chain(key.parts()).collect();
            store
                .put_opts(&path, bytes.into(), object_store::PutOptions::default())
                .await
                .expect("raw put");
        }
    }
}

/// The local file-system backend and an S3 bucket of its own on moto.
pub(crate) fn backends() -> Vec<Backend> {
    let dir = tempfile::tempdir().expect("tempdir");
    let local_location = dir.path().display().to_string();
    let local = Objects::open(&local_location).expect("local objects");
    let moto = TestServer::shared().unwrap_or_else(|e| panic!("the S3 test server starts: {e}"));
    let bucket = moto
        .bucket()
        .unwrap_or_else(|e| panic!("a test bucket: {e}"));
    let location = format!("s3://{bucket}/conversations/a");
    let s3 = moto.open(&location).expect("s3 objects");
    vec![
        Backend {
            name: "local",
            objects: local,
            _dir: Some(dir),
        },
        Backend {
            name: "s3",
            objects: s3,
            _dir: None,
        },
    ]
}
