//! `artifact://<tool>/<name>`: an immutable, content-addressed snapshot store (RES-5, RES-8).
//!
//! A name is the first 16 hex digits of the bytes' SHA-256 plus an extension, so the same bytes
//! from the same tool get the same URL. Files are written to a temporary file and then
//! hard-linked into place: a link never replaces an existing file, so once an artifact exists
//! its bytes never change, and concurrent writers of the same bytes leave one intact file.
//! Temporary files a killed writer left are removed when a store opens, once they are older
//! than any write takes.

#[cfg(feature = "disk")]
use std::path::{Path, PathBuf};
#[cfg(feature = "disk")]
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use sha2::{Digest, Sha256};
#[cfg(feature = "disk")]
use url::Url;

use crate::ResourceError;
#[cfg(feature = "disk")]
use crate::ResourceErrorKind;

/// Where immutable snapshots are kept. The outlet archives media and over-long text here.
///
/// The methods are async: a store on the network (object storage) awaits its requests on the
/// caller's runtime, and a store on disk runs its file work on tokio's blocking pool, so no
/// implementation holds an async worker for an i/o round trip.
#[async_trait]
pub trait ArtifactStore: Send + Sync + std::fmt::Debug {
    /// Stores `bytes` produced by `tool` and returns their `artifact://` URL. Storing the same
    /// bytes again returns the same URL and leaves the stored file untouched.
    async fn put(&self, tool: &str, bytes: &[u8], extension: &str)
    -> Result<String, ResourceError>;

    /// The bytes behind an `artifact://` URL (query and fragment ignored).
    async fn get(&self, url: &str) -> Result<Vec<u8>, ResourceError>;
}

#[cfg(feature = "disk")]
/// The artifact store on disk: `<root>/<tool>/<name>`.
#[derive(Debug, Clone)]
pub struct DiskArtifactStore {
    root: PathBuf,
}

#[cfg(feature = "disk")]
impl DiskArtifactStore {
    /// Opens (creating if needed) a store rooted at `root`.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, ResourceError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::Io,
                format!("cannot open the artifact store {}: {e}", root.display()),
            )
        })?;
        remove_stale_temps(&root, SystemTime::now());
        Ok(Self { root })
    }

    /// The directory this store writes under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn locate(&self, url: &Url) -> Result<PathBuf, ResourceError> {
        let (tool, name) = artifact_key(url)?;
        Ok(self.root.join(tool).join(name))
    }
}

#[cfg(feature = "disk")]
/// A write finishes in far less than this; a temporary file older than it was left by a writer
/// that was killed (SIGKILL, power loss), not one that is still writing to a shared store.
pub(crate) const STALE_TEMP: Duration = Duration::from_secs(3600);

#[cfg(feature = "disk")]
/// Removes the temporary files killed writers left in the tool directories under `root`
/// (`<root>/<tool>/.ishiki-tmp-*` older than [`STALE_TEMP`]); best effort, at open.
fn remove_stale_temps(root: &Path, now: SystemTime) {
    let Ok(tools) = std::fs::read_dir(root) else {
        return;
    };
    for tool in tools.flatten() {
        if !tool.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(files) = std::fs::read_dir(tool.path()) else {
            continue;
        };
        for file in files.flatten() {
            let name = file.file_name();
            if !name
                .to_str()
                .is_some_and(|n| n.starts_with(crate::TEMP_PREFIX))
            {
                continue;
            }
            let stale = file
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).is_ok_and(|age| age > STALE_TEMP));
            if stale {
                let _ = std::fs::remove_file(file.path());
            }
        }
    }
}

/// Letters, digits, `_`, `-`, `.`; not empty, not `.` or `..`.
fn is_safe_component(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A tool name as an artifact URL host: characters outside `[A-Za-z0-9_.-]` become `-`.
pub fn artifact_tool_component(tool: &str) -> String {
    let s: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if is_safe_component(&s) {
        s
    } else {
        "tool".to_owned()
    }
}

/// The content-addressed name of `bytes`: 16 hex digits of SHA-256, then `.extension`.
pub fn artifact_name(bytes: &[u8], extension: &str) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(16);
    for b in &digest[..8] {
        hex.push_str(&format!("{b:02x}"));
    }
    let ext: String = extension
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    if ext.is_empty() {
        hex
    } else {
        format!("{hex}.{ext}")
    }
}

#[cfg(feature = "disk")]
/// An I/O failure named by the artifact URL: the message may reach the model, so it never
/// shows the host's path (issue 13).
fn io_error(url: &str, e: &std::io::Error) -> ResourceError {
    let reason = std::io::Error::from(e.kind());
    ResourceError::new(
        ResourceErrorKind::Io,
        format!("cannot store or read `{url}`: {reason}"),
    )
}

#[cfg(feature = "disk")]
#[async_trait]
impl ArtifactStore for DiskArtifactStore {
    /// The write (a temporary file synced, then linked) runs on the blocking pool, a few
    /// writes of the process at a time.
    async fn put(
        &self,
        tool: &str,
        bytes: &[u8],
        extension: &str,
    ) -> Result<String, ResourceError> {
        let store = self.clone();
        let (tool, bytes, extension) = (tool.to_owned(), bytes.to_vec(), extension.to_owned());
        crate::blocking_write(move || store.write(&tool, &bytes, &extension)).await
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, ResourceError> {
        let store = self.clone();
        let url = url.to_owned();
        crate::blocking(move || store.read(&url)).await
    }
}

#[cfg(feature = "disk")]
impl DiskArtifactStore {
    fn write(&self, tool: &str, bytes: &[u8], extension: &str) -> Result<String, ResourceError> {
        let tool = artifact_tool_component(tool);
        let name = artifact_name(bytes, extension);
        let dir = self.root.join(&tool);
        let path = dir.join(&name);
        let url = format!("artifact://{tool}/{name}");
        let created = if path.exists() {
            false
        } else {
            // Only the tool's directory is created, never the root: a store whose directory was
            // moved or deleted (with the state directory) fails instead of writing a new tree
            // under the old path.
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(ResourceError::new(
                        ResourceErrorKind::Io,
                        format!(
                            "cannot store `{url}`: the artifact store's directory was moved or deleted while in use"
                        ),
                    ));
                }
                Err(e) => return Err(io_error(&url, &e)),
            }
            crate::link_new_file(&dir, &path, bytes).map_err(|e| io_error(&url, &e))?
        };
        // An existing file normally holds the same bytes (same hash prefix); a prefix collision
        // must not hand out a URL whose bytes differ from what the caller stored.
        if !created && std::fs::read(&path).map_err(|e| io_error(&url, &e))? != bytes {
            return Err(ResourceError::new(
                ResourceErrorKind::InvalidData,
                format!("`{url}` already holds other bytes (hash prefix collision)"),
            ));
        }
        Ok(url)
    }

    /// The bytes of an artifact, read on the calling thread ([`ArtifactStore::get`] runs it on
    /// the blocking pool).
    fn read(&self, url: &str) -> Result<Vec<u8>, ResourceError> {
        let parsed = crate::parse_url(url)?;
        let path = self.locate(&parsed)?;
        std::fs::read(&path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ResourceError::new(
                    ResourceErrorKind::NotFound,
                    format!("no artifact at `{url}`"),
                )
            } else {
                io_error(url, &e)
            }
        })
    }
}

#[cfg(feature = "disk")]
/// Checks an `artifact://<tool>/<name>` URL and returns its tool and name, each a safe path
/// component (letters, digits, `_`, `-`, `.`; never `.` or `..`).
pub fn artifact_key(url: &Url) -> Result<(String, String), ResourceError> {
    if url.scheme() != "artifact" {
        return Err(ResourceError::new(
            ResourceErrorKind::InvalidUrl,
            format!("`{url}` is not an artifact:// URL"),
        ));
    }
    let tool = url.host_str().unwrap_or("");
    let name = url.path().strip_prefix('/').unwrap_or("");
    if !is_safe_component(tool) || !is_safe_component(name) {
        return Err(ResourceError::new(
            ResourceErrorKind::InvalidUrl,
            format!("`{url}` is not of the form artifact://<tool>/<name>"),
        ));
    }
    Ok((tool.to_owned(), name.to_owned()))
}
