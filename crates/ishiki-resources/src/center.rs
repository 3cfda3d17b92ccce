//! [`ResourceCenter`]: routes a full URL to the handler registered for its scheme (RES-1, RES-2).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use url::Url;

use crate::file_view::FileView;
use crate::{
    FileScheme, ReadLimit, ReadResult, ReadSource, ResourceError, ResourceErrorKind, SchemeHandler,
    parse_url,
};

/// Routes resource URLs to scheme handlers registered at run time.
///
/// Cheap to clone: clones share the same registry.
#[derive(Debug, Clone, Default)]
pub struct ResourceCenter {
    handlers: Arc<RwLock<BTreeMap<String, Arc<dyn SchemeHandler>>>>,
    /// Passed to every handler with every read.
    limit: ReadLimit,
}

impl ResourceCenter {
    /// An empty center: no scheme is readable until a handler is registered.
    pub fn new() -> Self {
        Self::default()
    }

    /// This center with `limit` for every read ([`ReadLimit::DEFAULT`] otherwise). Clones made
    /// before share the handlers but keep their own limit.
    pub fn with_read_limit(mut self, limit: ReadLimit) -> Self {
        self.limit = limit;
        self
    }

    /// The limit every handler gets with a read.
    pub fn read_limit(&self) -> ReadLimit {
        self.limit
    }

    /// Registers (or replaces) the handler for its scheme.
    pub fn register(&self, handler: Arc<dyn SchemeHandler>) {
        let scheme = handler.scheme().to_ascii_lowercase();
        let mut map = self
            .handlers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.insert(scheme, handler);
    }

    /// Registers a [`FileScheme`]: the center adds the built-in `offset`, `lines` and `view`
    /// parameters, media sniffing and the read source (RES-3).
    pub fn register_file_scheme(&self, scheme: Arc<dyn FileScheme>) {
        self.register(Arc::new(FileSchemeHandler { inner: scheme }));
    }

    /// The schemes that have a handler, sorted.
    pub fn schemes(&self) -> Vec<String> {
        let map = self
            .handlers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.keys().cloned().collect()
    }

    /// The handler for a scheme, if one is registered.
    pub fn handler(&self, scheme: &str) -> Option<Arc<dyn SchemeHandler>> {
        let map = self
            .handlers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(&scheme.to_ascii_lowercase()).cloned()
    }

    /// Parses `url` and reads it through its scheme's handler. The full URL, query and fragment
    /// included, reaches the handler (RES-1).
    pub async fn read(&self, url: &str) -> Result<ReadResult, ResourceError> {
        let parsed = parse_url(url)?;
        let handler = self.route(&parsed)?;
        handler.check_url_text(url)?;
        handler.read_limited(&parsed, self.limit).await
    }

    /// Like [`ResourceCenter::read`], for an already parsed URL.
    pub async fn read_url(&self, url: &Url) -> Result<ReadResult, ResourceError> {
        self.route(url)?.read_limited(url, self.limit).await
    }

    fn route(&self, url: &Url) -> Result<Arc<dyn SchemeHandler>, ResourceError> {
        self.handler(url.scheme()).ok_or_else(|| {
            ResourceError::new(
                ResourceErrorKind::UnknownScheme,
                format!(
                    "no handler for scheme `{}:` (known: {})",
                    url.scheme(),
                    self.schemes()
                        .iter()
                        .map(|s| format!("{s}:"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })
    }
}

/// Adapts a [`FileScheme`] to [`SchemeHandler`]: parameters, views, sniffing, read source.
#[derive(Debug)]
struct FileSchemeHandler {
    inner: Arc<dyn FileScheme>,
}

#[async_trait]
impl SchemeHandler for FileSchemeHandler {
    fn scheme(&self) -> &str {
        self.inner.scheme()
    }

    async fn read(&self, url: &Url) -> Result<ReadResult, ResourceError> {
        self.read_limited(url, ReadLimit::DEFAULT).await
    }

    async fn read_limited(&self, url: &Url, limit: ReadLimit) -> Result<ReadResult, ResourceError> {
        let view = FileView::from_url(url)?;
        let bytes = self.inner.load_limited(url, limit).await?;
        view.apply(url, bytes, self.inner.is_snapshot())
    }

    fn check_url_text(&self, text: &str) -> Result<(), ResourceError> {
        crate::path_safety::check_url_text(text)
    }
}

/// Whether what a read returned can change after the read (RES-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// The source's current state: reading it again may return other text.
    Current,
    /// An immutable snapshot (`artifact://`): reading it again returns the same bytes.
    Snapshot,
}

/// The read source of a whole-text read, for handlers that build [`ReadResult`]s themselves.
pub fn whole_text_source(url: &Url, text: &str, freshness: Freshness) -> ReadSource {
    ReadSource {
        url: url.to_string(),
        offset: 0,
        total: text.len() as u64,
        snapshot: freshness == Freshness::Snapshot,
    }
}
