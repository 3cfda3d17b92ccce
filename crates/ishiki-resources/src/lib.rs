//! `ishiki-resources`: the resource center of the Ishiki tool-call pipeline.
//!
//! A *resource URL* says where data is read (RES-1). The [`ResourceCenter`] routes a full URL —
//! query and fragment included — to the [`SchemeHandler`] registered for its scheme; handlers
//! are registered at run time (RES-2). A [`FileScheme`] is a handler whose text has a directly
//! readable source: the center wraps it so that the built-in parameters `?offset=N`,
//! `?lines=A-B` and `?view=numbered` work the same for every file scheme, and each text read
//! returns a serializable [`ReadSource`] from which the next page can be read later (RES-3).
//!
//! Built in:
//! - [`WorkspaceScheme`], `workspace://` — the sandbox's files, read and write, never outside
//!   its root (RES-4);
//! - [`LocalScheme`], `local://` — host files under configured roots, read only (RES-4);
//! - [`DiskArtifactStore`], `artifact://<tool>/<name>` — an immutable, content-addressed
//!   snapshot store (RES-5, RES-8);
//! - [`DiskAssetStore`], `asset://<UUID v7>` — inbound media with creation time and retention
//!   cleanup (RES-6, RES-9).
//!
//! [`ArtifactStore`] and [`AssetStore`] are traits: other backends (object storage, the
//! `ishiki-objects` crate) keep the same contract, and [`ArtifactScheme`] / [`AssetScheme`]
//! register any of them with the center.
//!
//! A read returns a [`ReadResult`] in exactly the wire shape of RES-7:
//! `{ "type": "text", "text", "source"? }` or
//! `{ "type": "file", "url", "mediaType", "data" /* base64 */, "source"? }`.
//!
//! Path safety (SEC-2): `workspace://` and `local://` refuse dot segments in any encoding,
//! encoded or double-encoded separators, backslashes, NUL and control characters, Unicode
//! look-alikes of `.` `/` `\` `%`, and symlinks whose target leaves the root, loops or is
//! absolute, with an [`ResourceErrorKind::Escape`] error naming the URL. Every path is opened beneath a
//! directory handle of its root, so a symlink swapped in concurrently cannot lead outside.
//!
//! This crate knows nothing about models, tools, budgets or lifetimes.
//!
//! # Example
//!
//! A custom handler registered at run time, next to a FileScheme that gets the built-in
//! parameters for free:
//!
//! ```
//! use std::sync::Arc;
//!
//! use async_trait::async_trait;
//! use ishiki_resources::{ResourceError, FileScheme, ReadResult, ResourceCenter, SchemeHandler};
//! use url::Url;
//!
//! /// Answers with the query it was given: the center passes the full URL through.
//! #[derive(Debug)]
//! struct Echo;
//!
//! #[async_trait]
//! impl SchemeHandler for Echo {
//!     fn scheme(&self) -> &str {
//!         "echo"
//!     }
//!     async fn read(&self, url: &Url) -> Result<ReadResult, ResourceError> {
//!         let text = url.query().unwrap_or_default().to_owned();
//!         Ok(ReadResult::Text { text, source: None })
//!     }
//! }
//!
//! /// A fixed text as a file.
//! #[derive(Debug)]
//! struct Poem;
//!
//! #[async_trait]
//! impl FileScheme for Poem {
//!     fn scheme(&self) -> &str {
//!         "poem"
//!     }
//!     async fn load(&self, _url: &Url) -> Result<Vec<u8>, ResourceError> {
//!         Ok(b"one\ntwo\nthree\n".to_vec())
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let center = ResourceCenter::new();
//! center.register(Arc::new(Echo));
//! center.register_file_scheme(Arc::new(Poem));
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! runtime.block_on(async {
//!     let echoed = center.read("echo://x/y?a=1&b=2#frag").await?;
//!     assert_eq!(echoed, ReadResult::Text { text: "a=1&b=2".into(), source: None });
//!
//!     let ReadResult::Text { text, source: Some(source) } =
//!         center.read("poem:///p?lines=2-3&view=numbered").await?
//!     else {
//!         panic!("a FileScheme's text has a source");
//!     };
//!     assert_eq!(text, "     2\ttwo\n     3\tthree\n");
//!     // The next page starts where the caller stopped showing text.
//!     assert_eq!(
//!         source.continue_url(7),
//!         "poem:///p?lines=2-3&view=numbered&offset=7"
//!     );
//!     Ok::<_, ResourceError>(())
//! })?;
//! # Ok(())
//! # }
//! ```
//!
//! # Crate features
//!
//! - `center` and `image` (on by default): the resource center with its handlers, and image
//!   decoding under limits (`check_image`).
//! - `disk` (part of `center`): the stores on disk, whose file work runs on tokio's blocking
//!   pool, and parsing resource URLs (`url`). Without `center` and `disk` the crate is its
//!   core without a runtime — the (async) store traits, media sniffing, read results — which
//!   `ishiki-outlet` takes on serde, sha2, uuid and async-trait alone.
//! - `http` (off by default): `HttpScheme`, a handler for `http://` and `https://` with a
//!   size limit, a timeout and a destination policy (`AddressPolicy`, public addresses only
//!   by default, checked after DNS resolution and for every redirect hop; reqwest with
//!   rustls).

mod artifact;
mod asset;
#[cfg(feature = "center")]
mod center;
mod error;
#[cfg(feature = "center")]
mod file_view;
#[cfg(feature = "center")]
mod handler;
#[cfg(feature = "http")]
mod http;
#[cfg(feature = "center")]
mod local;
mod media;
#[cfg(feature = "center")]
mod path_safety;
mod read;
#[cfg(feature = "center")]
mod schemes;
#[cfg(feature = "disk")]
mod url_text;
#[cfg(feature = "center")]
mod workspace;

pub use artifact::ArtifactStore;
#[cfg(feature = "disk")]
pub use artifact::DiskArtifactStore;
#[cfg(feature = "disk")]
pub use asset::DiskAssetStore;
pub use asset::{AssetMeta, AssetStore, asset_url, uuid_v7_at};

/// For whoever implements [`ArtifactStore`] or [`AssetStore`] on another backend (the
/// `ishiki-objects` crate does): the names, keys, metadata and errors every store must give
/// alike, so that a URL means the same in all of them.
pub mod store {
    #[cfg(feature = "disk")]
    pub use crate::artifact::artifact_key;
    pub use crate::artifact::{artifact_name, artifact_tool_component};
    #[cfg(feature = "disk")]
    pub use crate::asset::asset_id;
    pub use crate::asset::{asset_changed, asset_not_found, new_asset_meta};
}
#[cfg(feature = "center")]
pub use center::{Freshness, ResourceCenter, whole_text_source};
pub use error::{ResourceError, ResourceErrorKind};
#[cfg(feature = "center")]
pub use handler::{FileScheme, ReadLimit, SchemeHandler};
#[cfg(feature = "http")]
pub use http::{AddressPolicy, HttpOptions, HttpScheme, PublicAddresses, is_public};
#[cfg(feature = "center")]
pub use local::LocalScheme;
#[cfg(feature = "image")]
pub use media::check_image;
pub use media::{
    MediaInfo, UTF16BE, UTF16LE, extension_for, image_dimensions, media_type_of, sniff,
};
pub use read::{ReadResult, ReadSource};
#[cfg(feature = "center")]
pub use schemes::{ArtifactScheme, AssetScheme, spawn_asset_cleanup};
#[cfg(feature = "disk")]
pub use url_text::parse_url;
#[cfg(feature = "center")]
pub use workspace::{DEFAULT_MAX_READ_BYTES, WorkspaceScheme};

#[cfg(feature = "disk")]
use std::path::Path;
#[cfg(feature = "disk")]
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(feature = "disk")]
/// Temporary files of interrupted writes start with this, so cleanup can recognise them.
pub(crate) const TEMP_PREFIX: &str = ".ishiki-tmp-";

#[cfg(feature = "disk")]
/// A file name no other *running* writer uses. A killed process may have left a file under a
/// name that a later process with its (reused) pid produces again: create with [`create_temp`].
pub(crate) fn temp_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "{TEMP_PREFIX}{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(feature = "disk")]
/// How many fresh names [`create_temp`] tries before giving up.
const TEMP_ATTEMPTS: usize = 64;

#[cfg(feature = "disk")]
/// Creates a new temporary file through `create` (which must refuse an existing name), trying
/// fresh names while a name is taken by a file a killed writer left behind. Returns the name
/// used and what `create` made.
pub(crate) fn create_temp<F>(
    mut create: impl FnMut(&str) -> std::io::Result<F>,
) -> std::io::Result<(String, F)> {
    let mut taken = None;
    for _ in 0..TEMP_ATTEMPTS {
        let name = temp_name();
        match create(&name) {
            Ok(made) => return Ok((name, made)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => taken = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(taken.unwrap_or_else(|| std::io::Error::other("no temporary file name was free")))
}

#[cfg(feature = "disk")]
/// Writes `bytes` to a temporary file in `dir` and hard-links it to `target`: the file appears
/// complete or not at all, and an existing `target` is never replaced. `Ok(false)` when
/// `target` already existed.
pub(crate) fn link_new_file(dir: &Path, target: &Path, bytes: &[u8]) -> std::io::Result<bool> {
    use std::io::Write as _;
    let (temp, mut file) = create_temp(|name| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(name))
    })?;
    let temp = dir.join(temp);
    let result = (|| {
        file.write_all(bytes)?;
        file.sync_all()?;
        match std::fs::hard_link(&temp, target) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    })();
    let _ = std::fs::remove_file(&temp);
    result
}

/// How many disk-store writes may be on the blocking pool at once, per process. Each syncs its
/// file, and syncs on one file system wait for each other: more writers at once only add
/// threads (the scale bench at 64 conversations: 80-114 threads and lower throughput with
/// every write on a thread of its own).
#[cfg(feature = "disk")]
const DISK_WRITERS: usize = 4;

/// [`blocking`] for a disk store's write, at most [`DISK_WRITERS`] at once; the others wait
/// their turn without a thread. A write whose caller stopped waiting finishes on its thread
/// after giving its turn back, so the bound is on waiting callers, not on threads exactly.
#[cfg(feature = "disk")]
pub(crate) async fn blocking_write<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ResourceError> + Send + 'static,
) -> Result<T, ResourceError> {
    static TURNS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(DISK_WRITERS);
    // The semaphore is never closed.
    let _turn = TURNS.acquire().await.map_err(|e| {
        ResourceError::new(
            ResourceErrorKind::Io,
            format!("a disk write could not wait its turn: {e}"),
        )
    })?;
    blocking(work).await
}

/// Runs blocking file-system work off the async worker threads when a tokio runtime is there,
/// inline otherwise.
#[cfg(feature = "disk")]
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ResourceError> + Send + 'static,
) -> Result<T, ResourceError> {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.spawn_blocking(work).await.map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::Io,
                format!("a file-system task failed to finish: {e}"),
            )
        })?,
        Err(_) => work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sixteen writers at once: never more than `DISK_WRITERS` on the blocking pool together,
    /// and every one of them runs.
    #[cfg(feature = "disk")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn disk_writes_take_turns() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NOW: AtomicUsize = AtomicUsize::new(0);
        static MOST: AtomicUsize = AtomicUsize::new(0);
        let writers: Vec<_> = (0..16)
            .map(|i| {
                tokio::spawn(blocking_write(move || {
                    let now = NOW.fetch_add(1, Ordering::SeqCst) + 1;
                    MOST.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    NOW.fetch_sub(1, Ordering::SeqCst);
                    Ok(i)
                }))
            })
            .collect();
        let mut done = Vec::new();
        for w in writers {
            done.push(w.await.expect("joined").expect("written"));
        }
        assert_eq!(done, (0..16).collect::<Vec<_>>());
        let most = MOST.load(Ordering::SeqCst);
        assert!((2..=DISK_WRITERS).contains(&most), "{most} writes at once");
    }

    /// A killed writer leaves `.ishiki-tmp-<pid>-<n>`; a later process given the same pid
    /// produces that name again. Found by `cargo xtask stress`: the write failed.
    #[test]
    fn a_temporary_name_left_by_a_killed_writer_is_skipped() {
        let mut tried = Vec::new();
        let made = create_temp(|name| {
            tried.push(name.to_owned());
            if tried.len() <= 3 {
                Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists))
            } else {
                Ok(name.len())
            }
        });
        let (name, _) = made.expect("a fourth name is free");
        assert_eq!(tried.len(), 4);
        assert_eq!(tried.last(), Some(&name));
        let unique: std::collections::BTreeSet<&String> = tried.iter().collect();
        assert_eq!(unique.len(), 4, "each attempt is a fresh name: {tried:?}");
        // Other failures are not retried; a name that is never free ends in an error.
        let mut calls = 0;
        let denied = create_temp(|_| -> std::io::Result<()> {
            calls += 1;
            Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied))
        });
        assert_eq!(
            (denied.map_err(|e| e.kind()), calls),
            (Err(std::io::ErrorKind::PermissionDenied), 1)
        );
        let taken = create_temp(|_| -> std::io::Result<()> {
            Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists))
        });
        assert_eq!(
            taken.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::AlreadyExists)
        );
    }
}
