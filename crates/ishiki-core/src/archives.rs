//! The `artifact:` scheme as one conversation reads it: every artifact reads back, except the
//! context engine's archives (`artifact://folded/…`, `artifact://compacted/…`), which read
//! back only in the conversation that made them. A store shared by many conversations (one
//! PostgreSQL + S3 deployment) holds them all; the older turns of one are not another's to
//! read, even by a URL it learned.

use std::collections::HashSet;
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;
use ishiki_resources::{
    ArtifactScheme, ArtifactStore, FileScheme, ReadLimit, ResourceError, ResourceErrorKind,
};
use url::Url;

/// The kinds of artifact only their conversation reads.
const SCOPED: [&str; 2] = ["folded", "compacted"];

/// The archives one conversation made (shared by its runtime and its `artifact:` scheme).
#[derive(Debug, Default)]
pub(crate) struct OwnArchives(RwLock<HashSet<String>>);

impl OwnArchives {
    pub(crate) fn insert(&self, url: &str) {
        self.0
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(url.to_owned());
    }

    fn contains(&self, url: &str) -> bool {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(url)
    }
}

/// [`ArtifactScheme`] with the context engine's archives scoped to one conversation.
#[derive(Debug)]
pub(crate) struct ConversationArtifacts {
    inner: ArtifactScheme,
    own: Arc<OwnArchives>,
}

impl ConversationArtifacts {
    pub(crate) fn new(store: Arc<dyn ArtifactStore>, own: Arc<OwnArchives>) -> Self {
        Self {
            inner: ArtifactScheme(store),
            own,
        }
    }

    fn check(&self, url: &Url) -> Result<(), ResourceError> {
        let scoped = url.host_str().is_some_and(|kind| SCOPED.contains(&kind));
        let mut bare = url.clone();
        bare.set_query(None);
        bare.set_fragment(None);
        if scoped && !self.own.contains(bare.as_str()) {
            return Err(ResourceError::new(
                ResourceErrorKind::NotFound,
                format!(
                    "{bare} is not an archive of this conversation: folded results and compacted turns read back only in the conversation that made them"
                ),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl FileScheme for ConversationArtifacts {
    fn scheme(&self) -> &str {
        self.inner.scheme()
    }

    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError> {
        self.check(url)?;
        self.inner.load(url).await
    }

    async fn load_limited(&self, url: &Url, limit: ReadLimit) -> Result<Vec<u8>, ResourceError> {
        self.check(url)?;
        self.inner.load_limited(url, limit).await
    }

    fn is_snapshot(&self) -> bool {
        self.inner.is_snapshot()
    }
}
