//! `asset://<UUID v7>` on an object store: `<prefix>/assets/<id>.data` (the bytes) and
//! `<id>.json` (its [`AssetMeta`]), bytes first; cleanup deletes metadata first.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use ishiki_resources::store::{asset_changed, asset_id, asset_not_found, new_asset_meta};
use ishiki_resources::{
    AssetMeta, AssetStore, FileScheme, ResourceError, ResourceErrorKind, asset_url,
};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt as _};
use url::Url;
use uuid::Uuid;

use crate::{Put, put_once, store_error};

/// The asset store on an object store (see the crate docs for its guarantees).
#[derive(Debug, Clone)]
pub struct ObjectAssetStore {
    store: Arc<dyn ObjectStore>,
    root: Path,
}

fn data_key(root: &Path, id: &Uuid) -> Path {
    root.clone().join(format!("{}.data", id.hyphenated()))
}

fn meta_key(root: &Path, id: &Uuid) -> Path {
    root.clone().join(format!("{}.json", id.hyphenated()))
}

fn decode_meta(url: &str, bytes: &[u8]) -> Result<AssetMeta, ResourceError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ResourceError::new(
            ResourceErrorKind::InvalidData,
            format!("the metadata of `{url}` is unreadable: {e}"),
        )
    })
}

async fn read(
    store: &dyn ObjectStore,
    path: &Path,
    url: &str,
) -> Result<bytes::Bytes, ResourceError> {
    let read = async { store.get(path).await?.bytes().await };
    match read.await {
        Ok(bytes) => Ok(bytes),
        Err(object_store::Error::NotFound { .. }) => Err(asset_not_found(url)),
        Err(e) => Err(store_error(&format!("reading `{url}`"), &e)),
    }
}

async fn read_meta(
    store: &dyn ObjectStore,
    root: &Path,
    id: &Uuid,
) -> Result<AssetMeta, ResourceError> {
    let url = asset_url(id);
    let bytes = read(store, &meta_key(root, id), &url).await?;
    decode_meta(&url, &bytes)
}

async fn read_data(
    store: &dyn ObjectStore,
    root: &Path,
    id: &Uuid,
) -> Result<Vec<u8>, ResourceError> {
    let url = asset_url(id);
    // The metadata is written last: without it the asset is not (or no longer) there.
    match store.head(&meta_key(root, id)).await {
        Ok(_) => {}
        Err(object_store::Error::NotFound { .. }) => return Err(asset_not_found(&url)),
        Err(e) => return Err(store_error(&format!("reading `{url}`"), &e)),
    }
    Ok(read(store, &data_key(root, id), &url).await?.to_vec())
}

impl ObjectAssetStore {
    pub(crate) fn new(store: Arc<dyn ObjectStore>, root: Path) -> Self {
        Self { store, root }
    }

    /// The key prefix this store writes under.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

#[async_trait]
impl AssetStore for ObjectAssetStore {
    async fn put_with_id(
        &self,
        id: Uuid,
        bytes: &[u8],
        created_at: SystemTime,
    ) -> Result<AssetMeta, ResourceError> {
        let meta = new_asset_meta(id, bytes, created_at)?;
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::InvalidData,
                format!("cannot encode metadata of `{}`: {e}", meta.url),
            )
        })?;
        let (store, root) = (&*self.store, &self.root);
        let bytes = bytes::Bytes::copy_from_slice(bytes);
        let url = meta.url.clone();
        let failed = |e: object_store::Error| store_error(&format!("storing `{url}`"), &e);
        // Dropped between the two writes, the bytes stay without metadata: the asset reads as
        // absent, and cleanup removes such bytes once their id's time is past the retention.
        match put_once(store, &data_key(root, &id), bytes.clone()).await {
            Ok(Put::Created) => {}
            Ok(Put::Existed(existing)) if existing == bytes => {}
            Ok(Put::Existed(_)) => return Err(asset_changed(&url)),
            Err(e) => return Err(failed(e)),
        }
        match put_once(store, &meta_key(root, &id), json.into()).await {
            Ok(Put::Created) => Ok(meta),
            // Same bytes stored again: the first writer's metadata stands.
            Ok(Put::Existed(existing)) => decode_meta(&url, &existing),
            Err(e) => Err(failed(e)),
        }
    }

    async fn meta(&self, url_or_id: &str) -> Result<AssetMeta, ResourceError> {
        let id = asset_id(url_or_id)?;
        read_meta(&*self.store, &self.root, &id).await
    }

    async fn get(&self, url_or_id: &str) -> Result<Vec<u8>, ResourceError> {
        let id = asset_id(url_or_id)?;
        read_data(&*self.store, &self.root, &id).await
    }

    /// Lists the bucket under the store's prefix and deletes exactly the assets created more
    /// than `retention` before `now` (by their metadata), metadata first. Unreadable metadata
    /// is left alone; bytes whose metadata was never written are removed once their id's own
    /// time is past the retention.
    async fn cleanup(
        &self,
        now: SystemTime,
        retention: Duration,
    ) -> Result<Vec<String>, ResourceError> {
        remove_expired(&*self.store, &self.root, now, retention).await
    }
}

async fn remove_expired(
    store: &dyn ObjectStore,
    root: &Path,
    now: SystemTime,
    retention: Duration,
) -> Result<Vec<String>, ResourceError> {
    let expired =
        |created: SystemTime| now.duration_since(created).is_ok_and(|age| age > retention);
    let listing = store
        .list_with_delimiter(Some(root))
        .await
        .map_err(|e| store_error("listing the assets", &e))?;
    let mut metas = std::collections::BTreeSet::new();
    let mut datas = Vec::new();
    for object in &listing.objects {
        let Some(name) = object.location.filename() else {
            continue;
        };
        if let Some(stem) = name.strip_suffix(".json")
            && let Ok(id) = Uuid::try_parse(stem)
        {
            metas.insert(id);
        } else if let Some(stem) = name.strip_suffix(".data")
            && let Ok(id) = Uuid::try_parse(stem)
        {
            datas.push(id);
        }
    }
    let mut deleted = Vec::new();
    for id in &metas {
        let Ok(meta) = read_meta(store, root, id).await else {
            continue;
        };
        if !expired(meta.created_at) {
            continue;
        }
        // Metadata first: from here on the asset reads as gone.
        match store.delete(&meta_key(root, id)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(store_error(&format!("deleting `{}`", meta.url), &e)),
        }
        let _ = store.delete(&data_key(root, id)).await;
        deleted.push(*id);
    }
    for id in datas.iter().filter(|id| !metas.contains(id)) {
        // The id's own timestamp dates bytes whose metadata was never written.
        let born = id
            .get_timestamp()
            .map(|t| {
                let (secs, nanos) = t.to_unix();
                UNIX_EPOCH + Duration::new(secs, nanos)
            })
            .unwrap_or(now);
        if expired(born) {
            let _ = store.delete(&data_key(root, id)).await;
        }
    }
    deleted.sort();
    Ok(deleted.iter().map(asset_url).collect())
}

#[async_trait]
impl FileScheme for ObjectAssetStore {
    fn scheme(&self) -> &str {
        "asset"
    }

    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError> {
        let id = asset_id(url.as_str())?;
        read_data(&*self.store, &self.root, &id).await
    }

    fn is_snapshot(&self) -> bool {
        true
    }
}
