//! `workspace://` — the sandbox's files, read and write, never outside its root (RES-4, SEC-2).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use url::Url;

use crate::path_safety::{self, show};
use crate::{FileScheme, ResourceError, ResourceErrorKind};

/// Reads larger than this are refused unless the limit is changed (64 MiB).
pub const DEFAULT_MAX_READ_BYTES: u64 = 64 << 20;

/// The sandbox's file system as `workspace:///<absolute sandbox path>`.
///
/// The sandbox file system is rooted at a host directory: `workspace:///home/workspace/a.txt`
/// is `<root>/home/workspace/a.txt`. Dot segments, encoded separators, look-alikes and symlinks
/// leaving the root are refused with an [`ResourceErrorKind::Escape`] error naming the URL.
///
/// The root directory is opened once, here, and every read and write resolves its path beneath
/// that handle, so another process swapping a checked file or directory for a symlink cannot
/// lead it outside (SEC-2). Relative symlinks that stay inside are followed; absolute ones are
/// refused.
#[derive(Debug, Clone)]
pub struct WorkspaceScheme {
    root: Arc<path_safety::Root>,
    max_read_bytes: u64,
}

impl WorkspaceScheme {
    /// A workspace whose sandbox root is the host directory `root` (created if missing).
    pub fn new(root: impl Into<PathBuf>) -> Result<Self, ResourceError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(|e| root_error(&root, &e))?;
        let root = path_safety::Root::open(&root).map_err(|e| root_error(&root, &e))?;
        Ok(Self {
            root: Arc::new(root),
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
        })
    }

    /// The same workspace refusing reads of files larger than `max` bytes.
    pub fn with_max_read_bytes(mut self, max: u64) -> Self {
        self.max_read_bytes = max;
        self
    }

    /// The canonical host directory that is the sandbox's `/`.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The canonical host path of an existing file or directory named by a `workspace://` URL,
    /// after all path-safety checks (the URL text is checked before parsing).
    ///
    /// The answer is true when it is given; opening the path later by name is not protected
    /// against a concurrent swap. Read and write through the scheme for that.
    pub fn resolve(&self, url: &str) -> Result<PathBuf, ResourceError> {
        path_safety::check_url_text(url)?;
        let parsed = crate::parse_url(url)?;
        let segments = self.segments(&parsed, url)?;
        self.root.resolve(&segments, url)
    }

    /// Writes `bytes` to an absolute sandbox path (`/home/workspace/tasks.txt`) or a
    /// `workspace://` URL, creating parent directories, and returns the file's URL.
    ///
    /// The write is atomic (temporary file, then rename). Symlinked parents or targets are
    /// followed only while they stay inside the root.
    pub fn write(&self, path_or_url: &str, bytes: &[u8]) -> Result<String, ResourceError> {
        let is_url = path_or_url
            .get(..10)
            .is_some_and(|p| p.eq_ignore_ascii_case("workspace:"));
        let segments = if path_or_url.starts_with('/') {
            path_safety::path_segments(path_or_url)?
        } else if !is_url {
            return Err(ResourceError::new(
                ResourceErrorKind::InvalidUrl,
                format!(
                    "`{}` is not an absolute sandbox path (like /home/workspace/notes.txt) or a workspace:// URL",
                    show(path_or_url)
                ),
            ));
        } else {
            path_safety::check_url_text(path_or_url)?;
            let parsed = crate::parse_url(path_or_url)?;
            if parsed.query().is_some() || parsed.fragment().is_some() {
                return Err(ResourceError::new(
                    ResourceErrorKind::InvalidParameter,
                    format!(
                        "`{}`: a URL to write takes no query or fragment",
                        show(path_or_url)
                    ),
                ));
            }
            self.segments(&parsed, path_or_url)?
        };
        let url = workspace_url(&segments)?;
        self.root.write_file(&segments, &url, bytes)?;
        Ok(url)
    }

    fn segments(&self, url: &Url, shown: &str) -> Result<Vec<String>, ResourceError> {
        if url.scheme() != "workspace"
            || url.cannot_be_a_base()
            || url.host_str().is_some_and(|h| !h.is_empty())
            || !url.username().is_empty()
            || url.password().is_some()
            || url.port().is_some()
        {
            return Err(ResourceError::new(
                ResourceErrorKind::InvalidUrl,
                format!(
                    "`{}` is not a workspace URL: use workspace:///<absolute sandbox path>",
                    show(shown)
                ),
            ));
        }
        path_safety::url_segments(url, shown)
    }
}

fn root_error(root: &Path, e: &std::io::Error) -> ResourceError {
    ResourceError::new(
        ResourceErrorKind::Io,
        format!("cannot open the workspace root {}: {e}", root.display()),
    )
}

/// `workspace:///` plus the segments, percent-encoded where a URL needs it.
fn workspace_url(segments: &[String]) -> Result<String, ResourceError> {
    let mut url = crate::parse_url("workspace:///")?;
    {
        let mut path = url.path_segments_mut().map_err(|()| {
            // `workspace:///` has a hierarchical path, so this is unreachable.
            ResourceError::new(ResourceErrorKind::InvalidUrl, "workspace:/// has no path")
        })?;
        path.clear().extend(segments);
    }
    Ok(url.into())
}

#[async_trait]
impl FileScheme for WorkspaceScheme {
    fn scheme(&self) -> &str {
        "workspace"
    }

    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError> {
        self.load_limited(url, crate::ReadLimit::new(u64::MAX))
            .await
    }

    /// The file's size is checked against the smaller limit before anything is read.
    async fn load_limited(
        &self,
        url: &Url,
        limit: crate::ReadLimit,
    ) -> Result<Vec<u8>, ResourceError> {
        let shown = url.as_str().to_owned();
        let (root, segments) = {
            let segments = self.segments(url, &shown)?;
            (self.root.clone(), segments)
        };
        let max = self.max_read_bytes.min(limit.max_bytes());
        crate::blocking(move || root.read_file(&segments, &shown, max)).await
    }
}
