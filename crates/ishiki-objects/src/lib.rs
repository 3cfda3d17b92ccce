//! `ishiki-objects`: the artifact and asset stores of `ishiki-resources` on object storage.
//!
//! [`Objects`] opens a location — `s3://bucket/prefix` (any S3-compatible server) or a local
//! directory (`file:///path` or a plain path) — through the [`object_store`] crate, and hands
//! out an [`ObjectArtifactStore`] (`<prefix>/artifacts/<tool>/<name>`) and an
//! [`ObjectAssetStore`] (`<prefix>/assets/<id>.data` and `<id>.json`). Both keep the contract of
//! the disk stores exactly:
//!
//! - artifacts are content-addressed: the same bytes from the same tool get the same URL;
//! - every object is written once, with a conditional put (`PutMode::Create`): of concurrent
//!   writers of one key exactly one creates it, the others find it and compare its bytes with
//!   theirs (same bytes: same URL; other bytes: a hash-prefix collision or a changed asset,
//!   refused), so an object never changes once written;
//! - an asset's metadata is written after its bytes, so metadata present means bytes complete,
//!   and cleanup deletes metadata first, so a half-deleted asset reads as gone;
//! - asset retention cleanup lists the bucket and deletes exactly the assets older than the
//!   retention (RES-9).
//!
//! The store traits are async, and every request is awaited on the caller's tokio runtime
//! (which needs its i/o and time drivers, `Builder::enable_all`): no thread of this crate's
//! own, and no thread blocked while a request is out. The HTTP connection pool belongs to the
//! opened [`Objects`] and is shared by every store it hands out; requests are bounded by the
//! client's timeouts (`object_store`'s defaults: 5 s to connect, 30 s per request). A request
//! cancelled by dropping its future leaves no partial object (an S3 put is atomic); an asset
//! put dropped between its two writes leaves bytes without metadata, which read as absent and
//! which cleanup removes.
//!
//! Credentials and endpoint come from the environment (`AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`, `AWS_ENDPOINT`, `AWS_ALLOW_HTTP`), or from
//! explicit options with [`Objects::open_with`].

mod artifacts;
mod assets;
#[cfg(feature = "test-server")]
pub mod testing;

use std::sync::Arc;

use ishiki_resources::{ResourceError, ResourceErrorKind};
use object_store::ObjectStore;
use object_store::path::Path;
use url::Url;

pub use artifacts::ObjectArtifactStore;
pub use assets::ObjectAssetStore;

/// An opened object-store location: one bucket (or directory) and a key prefix.
#[derive(Debug, Clone)]
pub struct Objects {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    dir: Option<std::path::PathBuf>,
}

impl Objects {
    /// Opens `s3://bucket/prefix` (credentials and endpoint from the `AWS_*` environment),
    /// `file:///path` or a plain directory path (created if missing).
    pub fn open(location: &str) -> Result<Self, ResourceError> {
        Self::open_with(location, std::iter::empty::<(String, String)>())
    }

    /// Like [`Objects::open`], with S3 options (`aws_endpoint`, `aws_access_key_id`,
    /// `aws_secret_access_key`, `aws_region`, `aws_allow_http`, ...) over the environment's.
    pub fn open_with<K, V>(
        location: &str,
        options: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, ResourceError>
    where
        K: AsRef<str>,
        V: Into<String>,
    {
        let invalid = |why: String| ResourceError::new(ResourceErrorKind::InvalidUrl, why);
        if !location.contains("://") {
            return Self::local(std::path::Path::new(location));
        }
        let url = Url::parse(location)
            .map_err(|e| invalid(format!("`{location}` is not an object store URL: {e}")))?;
        match url.scheme() {
            "file" => {
                let dir = url
                    .to_file_path()
                    .map_err(|()| invalid(format!("`{location}` is not a local directory URL")))?;
                Self::local(&dir)
            }
            "s3" => {
                use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
                // The S3 client's TLS takes the process's default crypto provider: ring
                // (the workspace's one backend) unless the embedder set one.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let mut builder = AmazonS3Builder::from_env().with_url(location);
                for (key, value) in options {
                    let key = key.as_ref();
                    let parsed: AmazonS3ConfigKey = key
                        .parse()
                        .map_err(|e| invalid(format!("unknown S3 option `{key}`: {e}")))?;
                    builder = builder.with_config(parsed, value);
                }
                let store = builder
                    .build()
                    .map_err(|e| invalid(format!("cannot open `{location}`: {e}")))?;
                let prefix = Path::from_url_path(url.path())
                    .map_err(|e| invalid(format!("`{location}` has an invalid prefix: {e}")))?;
                Ok(Self::from_store(Arc::new(store), prefix))
            }
            other => Err(invalid(format!(
                "`{other}:` object stores are not supported: use s3://bucket/prefix or file:///path"
            ))),
        }
    }

    fn local(dir: &std::path::Path) -> Result<Self, ResourceError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::Io,
                format!("cannot create the object directory {}: {e}", dir.display()),
            )
        })?;
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir).map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::Io,
                format!("cannot open the object directory {}: {e}", dir.display()),
            )
        })?;
        Ok(Self {
            dir: Some(dir.to_path_buf()),
            ..Self::from_store(Arc::new(store), Path::default())
        })
    }

    /// Any object store, with keys under `prefix`.
    pub fn from_store(store: Arc<dyn ObjectStore>, prefix: Path) -> Self {
        Self {
            store,
            prefix,
            dir: None,
        }
    }

    /// The host directory a `file://` location keeps its objects in (`None` for a remote
    /// store): an embedder declares it to the runtime as a store location, so no root the
    /// model can reach lies inside it or around it.
    pub fn local_dir(&self) -> Option<&std::path::Path> {
        self.dir.as_deref()
    }

    /// The underlying object store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The key prefix every object is written under.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// The artifact store under `<prefix>/artifacts`.
    pub fn artifacts(&self) -> ObjectArtifactStore {
        ObjectArtifactStore::new(self.store.clone(), self.prefix.clone().join("artifacts"))
    }

    /// The asset store under `<prefix>/assets`.
    pub fn assets(&self) -> ObjectAssetStore {
        ObjectAssetStore::new(self.store.clone(), self.prefix.clone().join("assets"))
    }
}

/// An object-store failure as a resources error; `what` names the object.
pub(crate) fn store_error(what: &str, e: &object_store::Error) -> ResourceError {
    let kind = match e {
        object_store::Error::NotFound { .. } => ResourceErrorKind::NotFound,
        _ => ResourceErrorKind::Io,
    };
    ResourceError::new(kind, format!("object store, {what}: {e}"))
}

/// How a write-once put ended.
pub(crate) enum Put {
    /// This writer created the object.
    Created,
    /// The object existed already; these are its bytes.
    Existed(bytes::Bytes),
}

/// Creates `path` with `bytes` unless it exists (`PutMode::Create`, a conditional put): of
/// concurrent writers exactly one creates it; the others get the bytes that are there.
pub(crate) async fn put_once(
    store: &dyn ObjectStore,
    path: &Path,
    bytes: bytes::Bytes,
) -> Result<Put, object_store::Error> {
    use object_store::{ObjectStoreExt as _, PutMode};
    match store
        .put_opts(path, bytes.into(), PutMode::Create.into())
        .await
    {
        Ok(_) => Ok(Put::Created),
        Err(object_store::Error::AlreadyExists { .. }) => {
            Ok(Put::Existed(store.get(path).await?.bytes().await?))
        }
        Err(e) => Err(e),
    }
}
