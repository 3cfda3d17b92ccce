//! The stores as schemes of the resource center: `artifact://` and `asset://` over the disk
//! stores or any [`ArtifactStore`] / [`AssetStore`], and the asset retention task (feature
//! `center`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use url::Url;

use crate::asset::asset_id;
use crate::{
    ArtifactStore, AssetStore, DiskArtifactStore, DiskAssetStore, FileScheme, ResourceError,
};

#[async_trait]
impl FileScheme for DiskArtifactStore {
    fn scheme(&self) -> &str {
        "artifact"
    }

    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError> {
        let mut bare = url.clone();
        bare.set_query(None);
        bare.set_fragment(None);
        ArtifactStore::get(self, bare.as_str()).await
    }

    fn is_snapshot(&self) -> bool {
        true
    }
}

/// `artifact://` as a [`FileScheme`] over any [`ArtifactStore`], for
/// [`ResourceCenter::register_file_scheme`](crate::ResourceCenter::register_file_scheme).
#[derive(Debug, Clone)]
pub struct ArtifactScheme(pub Arc<dyn ArtifactStore>);

#[async_trait]
impl FileScheme for ArtifactScheme {
    fn scheme(&self) -> &str {
        "artifact"
    }

    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError> {
        let mut bare = url.clone();
        bare.set_query(None);
        bare.set_fragment(None);
        self.0.get(bare.as_str()).await
    }

    fn is_snapshot(&self) -> bool {
        true
    }
}

/// Runs [`AssetStore::cleanup`] every `interval` (the first run at once) with the wall clock,
/// until the returned task is aborted. For `assets.cleanup.enabled` (RES-9).
///
/// Errors are retried at the next tick. An interval of zero counts as one millisecond.
///
/// # Panics
///
/// When called outside a tokio runtime.
pub fn spawn_asset_cleanup(
    store: Arc<dyn AssetStore>,
    retention: Duration,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    let interval = interval.max(Duration::from_millis(1));
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let _ = store.cleanup(SystemTime::now(), retention).await;
        }
    })
}

/// `asset://` as a [`FileScheme`] over any [`AssetStore`], for
/// [`ResourceCenter::register_file_scheme`](crate::ResourceCenter::register_file_scheme).
#[derive(Debug, Clone)]
pub struct AssetScheme(pub Arc<dyn AssetStore>);

#[async_trait]
impl FileScheme for AssetScheme {
    fn scheme(&self) -> &str {
        "asset"
    }

    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError> {
        let id = asset_id(url.as_str())?;
        self.0.get(&id.to_string()).await
    }

    fn is_snapshot(&self) -> bool {
        true
    }
}

#[async_trait]
impl FileScheme for DiskAssetStore {
    fn scheme(&self) -> &str {
        "asset"
    }

    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError> {
        let id = asset_id(url.as_str())?;
        let store = self.clone();
        crate::blocking(move || store.read_data(&id)).await
    }

    fn is_snapshot(&self) -> bool {
        true
    }
}
