//! `artifact://<tool>/<name>` on an object store: `<prefix>/artifacts/<tool>/<name>`.

use std::sync::Arc;

use async_trait::async_trait;
use ishiki_resources::store::{artifact_key, artifact_name, artifact_tool_component};
use ishiki_resources::{ArtifactStore, FileScheme, ResourceError, ResourceErrorKind, parse_url};
use object_store::ObjectStore;
use object_store::path::Path;
use url::Url;

use crate::{Put, put_once, store_error};

/// The artifact store on an object store (see the crate docs for its guarantees).
#[derive(Debug, Clone)]
pub struct ObjectArtifactStore {
    store: Arc<dyn ObjectStore>,
    root: Path,
}

impl ObjectArtifactStore {
    pub(crate) fn new(store: Arc<dyn ObjectStore>, root: Path) -> Self {
        Self { store, root }
    }

    /// The key prefix this store writes under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn locate(&self, url: &Url) -> Result<Path, ResourceError> {
        let (tool, name) = artifact_key(url)?;
        Ok(self.root.clone().join(tool.as_str()).join(name.as_str()))
    }

    async fn load_key(&self, path: Path, url: &str) -> Result<Vec<u8>, ResourceError> {
        use object_store::ObjectStoreExt as _;
        let read = async { self.store.get(&path).await?.bytes().await };
        match read.await {
            Ok(bytes) => Ok(bytes.to_vec()),
            Err(object_store::Error::NotFound { .. }) => Err(ResourceError::new(
                ResourceErrorKind::NotFound,
                format!("no artifact at `{url}`"),
            )),
            Err(e) => Err(store_error(&format!("reading `{url}`"), &e)),
        }
    }
}

#[async_trait]
impl ArtifactStore for ObjectArtifactStore {
    async fn put(
        &self,
        tool: &str,
        bytes: &[u8],
        extension: &str,
    ) -> Result<String, ResourceError> {
        let tool = artifact_tool_component(tool);
        let name = artifact_name(bytes, extension);
        let url = format!("artifact://{tool}/{name}");
        let path = self.root.clone().join(tool.as_str()).join(name.as_str());
        let bytes = bytes::Bytes::copy_from_slice(bytes);
        match put_once(&*self.store, &path, bytes.clone()).await {
            Ok(Put::Created) => Ok(url),
            // An existing object normally holds the same bytes (same hash prefix); a prefix
            // collision must not hand out a URL whose bytes differ from what was stored.
            Ok(Put::Existed(existing)) if existing == bytes => Ok(url),
            Ok(Put::Existed(_)) => Err(ResourceError::new(
                ResourceErrorKind::InvalidData,
                format!("`{url}` already holds other bytes (hash prefix collision)"),
            )),
            Err(e) => Err(store_error(&format!("storing `{url}`"), &e)),
        }
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, ResourceError> {
        let parsed = parse_url(url)?;
        let path = self.locate(&parsed)?;
        self.load_key(path, url).await
    }
}

#[async_trait]
impl FileScheme for ObjectArtifactStore {
    fn scheme(&self) -> &str {
        "artifact"
    }

    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError> {
        let mut bare = url.clone();
        bare.set_query(None);
        bare.set_fragment(None);
        let path = self.locate(&bare)?;
        self.load_key(path, bare.as_str()).await
    }

    fn is_snapshot(&self) -> bool {
        true
    }
}
