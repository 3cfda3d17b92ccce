//! `asset://<UUID v7>` — inbound media with creation time and retention cleanup (RES-6, RES-9).
//!
//! On disk an asset is two files under the store's root: `<id>.data` (the bytes) and
//! `<id>.json` (its [`AssetMeta`]). Both are written through a temporary file and a hard link,
//! bytes first: a link never replaces a file, so an asset never changes once written, and the
//! metadata file existing means the bytes are complete. Cleanup removes the metadata first,
//! so a half-removed asset reads as gone.

#[cfg(feature = "disk")]
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use uuid::{Uuid, Variant, Version};

#[cfg(feature = "disk")]
use crate::url_text::show;
use crate::{ResourceError, ResourceErrorKind, sniff};

/// What the store knows about one asset; also its on-disk `<id>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssetMeta {
    /// The asset's id, a UUID v7 (its creation time in milliseconds leads, so ids sort by time).
    pub id: Uuid,
    /// `asset://<id>`.
    pub url: String,
    /// The media type sniffed from the bytes.
    pub media_type: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Width and height in pixels, for images whose header could be read.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "dimensions")]
    pub dimensions: Option<(u32, u32)>,
    /// When the asset was stored, to the millisecond; on the wire, Unix milliseconds.
    #[serde(with = "unix_ms")]
    pub created_at: SystemTime,
}

/// Where inbound media is kept (RES-6, RES-9). Assets never change once written: storing other
/// bytes under an existing id is refused. [`DiskAssetStore`] is the default; other backends
/// (object storage) implement the same contract. Register one with the center through
/// `AssetScheme` (feature `center`).
#[async_trait]
pub trait AssetStore: Send + Sync + std::fmt::Debug {
    /// Stores `bytes` under a given UUID v7 and creation time (deterministic runs).
    ///
    /// Storing the same bytes under an existing id again returns the existing metadata; other
    /// bytes under an existing id are refused, since an asset never changes.
    async fn put_with_id(
        &self,
        id: Uuid,
        bytes: &[u8],
        created_at: SystemTime,
    ) -> Result<AssetMeta, ResourceError>;

    /// The metadata of an asset, by `asset://` URL or bare id.
    async fn meta(&self, url_or_id: &str) -> Result<AssetMeta, ResourceError>;

    /// The bytes of an asset, by `asset://` URL or bare id.
    async fn get(&self, url_or_id: &str) -> Result<Vec<u8>, ResourceError>;

    /// Deletes exactly the assets created more than `retention` before `now` and returns their
    /// URLs in creation order (RES-9).
    async fn cleanup(
        &self,
        now: SystemTime,
        retention: Duration,
    ) -> Result<Vec<String>, ResourceError>;

    /// Stores `bytes` as a new asset with a fresh UUID v7 and the current time.
    async fn put(&self, bytes: &[u8]) -> Result<AssetMeta, ResourceError> {
        self.put_with_id(Uuid::now_v7(), bytes, SystemTime::now())
            .await
    }
}

#[cfg(feature = "disk")]
/// The asset store on disk.
#[derive(Debug, Clone)]
pub struct DiskAssetStore {
    root: PathBuf,
}

/// A valid UUID v7 built from a Unix time in milliseconds and a counter, for deterministic
/// runs: ids sort by time, then by counter. Times past the 48-bit field (year 10889) clamp.
pub fn uuid_v7_at(unix_ms: u64, counter: u64) -> Uuid {
    const MS_MAX: u64 = (1 << 48) - 1;
    const RAND_B_MASK: u64 = (1 << 62) - 1;
    let ms = u128::from(unix_ms.min(MS_MAX));
    // Layout: 48 bits time | 4 version | 12 rand_a | 2 variant | 62 rand_b. The counter's low
    // 62 bits go to rand_b and its top 2 bits to the bottom of rand_a, keeping counter order.
    let rand_a = u128::from(counter >> 62);
    let rand_b = u128::from(counter & RAND_B_MASK);
    let value = (ms << 80) | (rand_a << 64) | rand_b;
    uuid::Builder::from_u128(value)
        .with_version(Version::SortRand)
        .with_variant(Variant::RFC4122)
        .into_uuid()
}

fn is_v7(id: &Uuid) -> bool {
    id.get_version() == Some(Version::SortRand) && id.get_variant() == Variant::RFC4122
}

fn version_name(id: &Uuid) -> String {
    if id.is_nil() {
        "the nil UUID".to_owned()
    } else if id.is_max() {
        "the max UUID".to_owned()
    } else {
        format!("a UUID v{}", id.get_version_num())
    }
}

#[cfg(feature = "disk")]
/// The id of an asset URL or bare id, refusing anything that is not a UUID v7 (RES-6).
pub fn asset_id(url_or_id: &str) -> Result<Uuid, ResourceError> {
    let shown = show(url_or_id);
    let invalid = |why: String| ResourceError::new(ResourceErrorKind::InvalidUrl, why);
    let (text, is_url) = if url_or_id.contains(':') {
        let url = crate::parse_url(url_or_id)?;
        if url.scheme() != "asset"
            || url.cannot_be_a_base()
            || !matches!(url.path(), "" | "/")
            || !url.username().is_empty()
            || url.password().is_some()
            || url.port().is_some()
        {
            return Err(invalid(format!(
                "`{shown}` is not an asset URL: use asset://<UUID v7> with nothing after the id"
            )));
        }
        (url.host_str().unwrap_or("").to_owned(), true)
    } else {
        (url_or_id.to_owned(), false)
    };
    let what = if is_url {
        "an asset URL"
    } else {
        "an asset id"
    };
    let id = Uuid::try_parse(&text).map_err(|_| {
        invalid(format!(
            "`{shown}` is not {what}: `{}` is not a UUID (assets are asset://<UUID v7>)",
            show(&text)
        ))
    })?;
    if !is_v7(&id) {
        return Err(invalid(format!(
            "`{shown}` is not {what}: `{}` is {}, assets use UUID v7",
            show(&text),
            version_name(&id)
        )));
    }
    Ok(id)
}

/// `asset://<id>`.
pub fn asset_url(id: &Uuid) -> String {
    format!("asset://{}", id.hyphenated())
}

fn unix_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Checks that `id` is a UUID v7 and describes `bytes` stored under it at `created_at`
/// (truncated to the millisecond): what every [`AssetStore`] writes as the asset's metadata.
pub fn new_asset_meta(
    id: Uuid,
    bytes: &[u8],
    created_at: SystemTime,
) -> Result<AssetMeta, ResourceError> {
    if !is_v7(&id) {
        return Err(ResourceError::new(
            ResourceErrorKind::InvalidParameter,
            format!(
                "asset id `{id}` is {}, assets use UUID v7",
                version_name(&id)
            ),
        ));
    }
    let info = sniff(bytes);
    Ok(AssetMeta {
        id,
        url: asset_url(&id),
        media_type: info.media_type,
        bytes: bytes.len() as u64,
        dimensions: info.dimensions,
        created_at: UNIX_EPOCH + Duration::from_millis(unix_millis(created_at)),
    })
}

/// The error for storing other bytes under an existing asset id.
pub fn asset_changed(url: &str) -> ResourceError {
    ResourceError::new(
        ResourceErrorKind::NotAllowed,
        format!("asset `{url}` already exists with other bytes; assets never change"),
    )
}

/// The error for an asset that is not (or no longer) there.
pub fn asset_not_found(url: &str) -> ResourceError {
    ResourceError::new(
        ResourceErrorKind::NotFound,
        format!("no asset at `{url}` (it may have been deleted after its retention period)"),
    )
}

#[cfg(feature = "disk")]
impl DiskAssetStore {
    /// Opens (creating if needed) a store rooted at `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, ResourceError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::Io,
                format!("cannot open the asset store {}: {e}", root.display()),
            )
        })?;
        Ok(Self { root })
    }

    /// The directory this store writes under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn data_path(&self, id: &Uuid) -> PathBuf {
        self.root.join(format!("{}.data", id.hyphenated()))
    }

    fn meta_path(&self, id: &Uuid) -> PathBuf {
        self.root.join(format!("{}.json", id.hyphenated()))
    }

    fn store(
        &self,
        id: Uuid,
        bytes: &[u8],
        created_at: SystemTime,
    ) -> Result<AssetMeta, ResourceError> {
        let meta = new_asset_meta(id, bytes, created_at)?;
        let url = meta.url.clone();
        let store_error = |e: std::io::Error| {
            ResourceError::new(
                ResourceErrorKind::Io,
                format!("cannot store asset `{url}`: {e}"),
            )
        };
        let data_path = self.data_path(&id);
        if !crate::link_new_file(&self.root, &data_path, bytes).map_err(store_error)? {
            let existing = std::fs::read(&data_path).map_err(store_error)?;
            if existing != bytes {
                return Err(asset_changed(&url));
            }
        }
        let json = serde_json::to_vec_pretty(&meta).map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::InvalidData,
                format!("cannot encode metadata of `{url}`: {e}"),
            )
        })?;
        if crate::link_new_file(&self.root, &self.meta_path(&id), &json).map_err(store_error)? {
            Ok(meta)
        } else {
            self.read_meta(&id)
        }
    }

    fn read_meta(&self, id: &Uuid) -> Result<AssetMeta, ResourceError> {
        let url = asset_url(id);
        let path = self.meta_path(id);
        let text = std::fs::read(&path).map_err(|e| self.read_error(&url, &e))?;
        serde_json::from_slice(&text).map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::InvalidData,
                format!("the metadata of `{url}` is unreadable: {e}"),
            )
        })
    }

    fn read_error(&self, url: &str, e: &std::io::Error) -> ResourceError {
        if e.kind() == std::io::ErrorKind::NotFound {
            asset_not_found(url)
        } else {
            ResourceError::new(
                ResourceErrorKind::Io,
                format!("cannot read asset `{url}`: {e}"),
            )
        }
    }

    pub(crate) fn read_data(&self, id: &Uuid) -> Result<Vec<u8>, ResourceError> {
        let url = asset_url(id);
        // The metadata is linked last: without it the asset is not (or no longer) there.
        if !self.meta_path(id).exists() {
            return Err(self.read_error(&url, &std::io::ErrorKind::NotFound.into()));
        }
        std::fs::read(self.data_path(id)).map_err(|e| self.read_error(&url, &e))
    }

    /// Unreadable metadata is left alone; leftovers of interrupted writes older than
    /// `retention` are removed silently.
    fn remove_expired(
        &self,
        now: SystemTime,
        retention: Duration,
    ) -> Result<Vec<String>, ResourceError> {
        let expired =
            |created: SystemTime| now.duration_since(created).is_ok_and(|age| age > retention);
        let entries = std::fs::read_dir(&self.root).map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::Io,
                format!("cannot list the asset store {}: {e}", self.root.display()),
            )
        })?;
        let mut deleted = Vec::new();
        let mut orphans = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(stem) = name.strip_suffix(".json") {
                let Ok(id) = Uuid::try_parse(stem) else {
                    continue;
                };
                let Ok(meta) = self.read_meta(&id) else {
                    continue;
                };
                if expired(meta.created_at) {
                    // Metadata first: from here on the asset reads as gone.
                    if std::fs::remove_file(entry.path()).is_ok() {
                        let _ = std::fs::remove_file(self.data_path(&id));
                        deleted.push(meta.id);
                    }
                }
            } else if let Some(stem) = name.strip_suffix(".data") {
                orphans.push(stem.to_owned());
            } else if name.starts_with(crate::TEMP_PREFIX) {
                let stale = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(expired);
                if stale {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        for stem in orphans {
            let Ok(id) = Uuid::try_parse(&stem) else {
                continue;
            };
            if self.meta_path(&id).exists() {
                continue;
            }
            // The id's own timestamp dates a data file whose metadata was never written.
            let born = id
                .get_timestamp()
                .map(|t| {
                    let (secs, nanos) = t.to_unix();
                    UNIX_EPOCH + Duration::new(secs, nanos)
                })
                .unwrap_or(now);
            if expired(born) {
                let _ = std::fs::remove_file(self.data_path(&id));
            }
        }
        deleted.sort();
        Ok(deleted.iter().map(asset_url).collect())
    }
}

#[cfg(feature = "disk")]
/// Every method runs its file work on the blocking pool (a write syncs its file).
#[async_trait]
impl AssetStore for DiskAssetStore {
    async fn put_with_id(
        &self,
        id: Uuid,
        bytes: &[u8],
        created_at: SystemTime,
    ) -> Result<AssetMeta, ResourceError> {
        let store = self.clone();
        let bytes = bytes.to_vec();
        crate::blocking_write(move || store.store(id, &bytes, created_at)).await
    }

    /// Query and fragment of a URL are ignored.
    async fn meta(&self, url_or_id: &str) -> Result<AssetMeta, ResourceError> {
        let id = asset_id(url_or_id)?;
        let store = self.clone();
        crate::blocking(move || store.read_meta(&id)).await
    }

    async fn get(&self, url_or_id: &str) -> Result<Vec<u8>, ResourceError> {
        let id = asset_id(url_or_id)?;
        let store = self.clone();
        crate::blocking(move || store.read_data(&id)).await
    }

    async fn cleanup(
        &self,
        now: SystemTime,
        retention: Duration,
    ) -> Result<Vec<String>, ResourceError> {
        let store = self.clone();
        crate::blocking(move || store.remove_expired(now, retention)).await
    }
}

mod dimensions {
    //! `Option<(u32, u32)>` as `{ "width", "height" }`.
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Dimensions {
        width: u32,
        height: u32,
    }

    pub(crate) fn serialize<S: Serializer>(
        v: &Option<(u32, u32)>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        v.map(|(width, height)| Dimensions { width, height })
            .serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<(u32, u32)>, D::Error> {
        Ok(Option::<Dimensions>::deserialize(d)?.map(|x| (x.width, x.height)))
    }
}

mod unix_ms {
    //! `SystemTime` as Unix milliseconds.
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(super::unix_millis(*t))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        Ok(UNIX_EPOCH + Duration::from_millis(u64::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn res6_uuid_v7_at_is_v7_and_ordered() {
        let ids = [
            uuid_v7_at(1, 0),
            uuid_v7_at(1, 1),
            uuid_v7_at(1, (1 << 62) - 1),
            uuid_v7_at(1, 1 << 62),
            uuid_v7_at(1, u64::MAX),
            uuid_v7_at(2, 0),
            uuid_v7_at(u64::MAX, 0),
        ];
        for id in ids {
            assert!(is_v7(&id), "{id}");
        }
        let mut sorted = ids;
        sorted.sort();
        assert_eq!(sorted, ids);
        assert_eq!(
            uuid_v7_at(0x0190_f9f3_3ff8, 1).to_string(),
            "0190f9f3-3ff8-7000-8000-000000000001"
        );
    }
}
