//! `local://` — host files under configured, named roots, read only (RES-4, SEC-2).

use std::path::PathBuf;

use async_trait::async_trait;
use percent_encoding::percent_decode_str;
use url::Url;

use crate::path_safety::{self, show};
use crate::workspace::DEFAULT_MAX_READ_BYTES;
use crate::{FileScheme, ResourceError, ResourceErrorKind};

/// Host files under named roots: `local:///docs/a.txt` reads below the root named `""`,
/// `local://name/docs/a.txt` below the root named `name`. Never writes.
///
/// Roots are opened at each read, so a root may be created after the scheme; the path below
/// a root is then resolved beneath that directory handle, so a swapped-in symlink cannot lead
/// a read outside (SEC-2). A root is host configuration, not something the model names.
#[derive(Debug, Clone)]
pub struct LocalScheme {
    roots: Vec<(String, PathBuf)>,
    max_read_bytes: u64,
}

impl LocalScheme {
    /// A scheme serving `roots`: pairs of a root name (the URL host; `""` for `local:///…`)
    /// and a host directory. A later pair with the same name replaces an earlier one.
    pub fn new(roots: Vec<(String, PathBuf)>) -> Self {
        let mut unique: Vec<(String, PathBuf)> = Vec::with_capacity(roots.len());
        for (name, dir) in roots {
            unique.retain(|(n, _)| *n != name);
            unique.push((name, dir));
        }
        Self {
            roots: unique,
            max_read_bytes: DEFAULT_MAX_READ_BYTES,
        }
    }

    /// The same scheme refusing reads of files larger than `max` bytes.
    pub fn with_max_read_bytes(mut self, max: u64) -> Self {
        self.max_read_bytes = max;
        self
    }

    /// The canonical host path of an existing file or directory named by a `local://` URL,
    /// after all path-safety checks (the URL text is checked before parsing).
    ///
    /// The answer is true when it is given; opening the path later by name is not protected
    /// against a concurrent swap. Read through the scheme for that.
    pub fn resolve(&self, url: &str) -> Result<PathBuf, ResourceError> {
        path_safety::check_url_text(url)?;
        let parsed = crate::parse_url(url)?;
        let (root, segments) = self.locate(&parsed, url)?;
        root.resolve(&segments, url)
    }

    /// The opened root and the checked segments of a parsed URL.
    fn locate(
        &self,
        url: &Url,
        shown: &str,
    ) -> Result<(path_safety::Root, Vec<String>), ResourceError> {
        if url.scheme() != "local"
            || url.cannot_be_a_base()
            || !url.username().is_empty()
            || url.password().is_some()
            || url.port().is_some()
        {
            return Err(ResourceError::new(
                ResourceErrorKind::InvalidUrl,
                format!(
                    "`{}` is not a local URL: use local:///<path> or local://<root name>/<path>",
                    show(shown)
                ),
            ));
        }
        let name = percent_decode_str(url.host_str().unwrap_or("")).decode_utf8_lossy();
        let Some((_, dir)) = self.roots.iter().find(|(n, _)| *n == name) else {
            let known: Vec<String> = self.roots.iter().map(|(n, _)| format!("`{n}`")).collect();
            return Err(ResourceError::new(
                ResourceErrorKind::NotFound,
                format!(
                    "`{}` names no configured local root `{}` (configured: {})",
                    show(shown),
                    show(&name),
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        };
        let segments = path_safety::url_segments(url, shown)?;
        let root = path_safety::Root::open(dir).map_err(|_| {
            ResourceError::new(
                ResourceErrorKind::NotFound,
                format!(
                    "`{}`: the local root `{}` does not exist",
                    show(shown),
                    show(&name)
                ),
            )
        })?;
        Ok((root, segments))
    }
}

#[async_trait]
impl FileScheme for LocalScheme {
    fn scheme(&self) -> &str {
        "local"
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
        let (root, segments) = { self.locate(url, &shown)? };
        let max = self.max_read_bytes.min(limit.max_bytes());
        crate::blocking(move || root.read_file(&segments, &shown, max)).await
    }
}
