//! The handler traits: [`SchemeHandler`] for any scheme, [`FileScheme`] for schemes whose text
//! has a directly readable source (RES-2, RES-3).

use async_trait::async_trait;
use url::Url;

use crate::{ReadResult, ResourceError, ResourceErrorKind};

/// The most bytes one read may produce. The [`ResourceCenter`](crate::ResourceCenter) passes
/// its limit to every handler ([`SchemeHandler::read_limited`], [`FileScheme::load_limited`]);
/// a handler that makes or fetches bytes itself checks it *while* reading and stops once past
/// it, so a URL such as `example://large.text?lines=18446744073709551615` ends with an error
/// naming the limit instead of an allocation the size of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadLimit {
    max_bytes: u64,
}

impl ReadLimit {
    /// The center's default: 64 MiB per read.
    pub const DEFAULT: Self = Self::new(64 << 20);

    /// At most `max_bytes` per read.
    pub const fn new(max_bytes: u64) -> Self {
        Self { max_bytes }
    }

    /// The limit in bytes.
    pub fn max_bytes(self) -> u64 {
        self.max_bytes
    }

    /// Refuses `size` bytes (read or about to be made) for `url` when they pass the limit.
    pub fn check(self, url: &Url, size: u64) -> Result<(), ResourceError> {
        if size > self.max_bytes {
            return Err(ResourceError::new(
                ResourceErrorKind::TooLarge,
                format!(
                    "`{url}` would be about {size} bytes, over the read limit of {} bytes: ask for less",
                    self.max_bytes
                ),
            ));
        }
        Ok(())
    }

    /// [`ReadLimit::check`] on a finished read result.
    pub fn check_result(self, url: &Url, result: &ReadResult) -> Result<(), ResourceError> {
        let size = match result {
            ReadResult::Text { text, .. } => text.len(),
            ReadResult::File { data, .. } => data.len(),
        };
        self.check(url, size as u64)
    }
}

impl Default for ReadLimit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A handler for one URL scheme. It owns its access policy, URL parsing and resource
/// lifecycle (RES-2); the center only routes the full URL to it (RES-1).
#[async_trait]
pub trait SchemeHandler: Send + Sync + std::fmt::Debug {
    /// The scheme served, without `:` (e.g. `"example"`).
    fn scheme(&self) -> &str;

    /// Reads the resource named by the full URL (query and fragment included).
    async fn read(&self, url: &Url) -> Result<ReadResult, ResourceError>;

    /// [`SchemeHandler::read`] within `limit`; the center always calls this one. The default
    /// reads, then refuses a result over the limit. A handler whose size the URL decides
    /// (generated text, a remote body) overrides it and stops before or while it produces the
    /// bytes, with [`ReadLimit::check`].
    async fn read_limited(&self, url: &Url, limit: ReadLimit) -> Result<ReadResult, ResourceError> {
        let result = self.read(url).await?;
        limit.check_result(url, &result)?;
        Ok(result)
    }

    /// Checks the URL text as given, before [`ResourceCenter::read`](crate::ResourceCenter::read)
    /// hands over the parsed URL: parsing silently normalises some text (it removes dot
    /// segments and tabs), which a handler may want to refuse instead. Accepts by default.
    fn check_url_text(&self, text: &str) -> Result<(), ResourceError> {
        let _ = text;
        Ok(())
    }
}

/// A scheme whose content is a file-like byte string that can be read again (RES-3).
///
/// Implement [`FileScheme::load`]; register with
/// [`ResourceCenter::register_file_scheme`](crate::ResourceCenter::register_file_scheme) and the
/// center interprets `?offset=N`, `?lines=A-B` and `?view=numbered` for you, sniffs media, and
/// returns a [`ReadSource`](crate::ReadSource) with every text read. The center also refuses
/// URL text with dot segments (`..`, `%2e%2e`) or control characters for every FileScheme,
/// before parsing could normalise them away.
#[async_trait]
pub trait FileScheme: Send + Sync + std::fmt::Debug {
    /// The scheme served, without `:`.
    fn scheme(&self) -> &str;

    /// The whole content behind the URL; its query and fragment are to be ignored here.
    async fn load(&self, url: &Url) -> Result<Vec<u8>, ResourceError>;

    /// [`FileScheme::load`] within `limit`; the center always calls this one. The default
    /// loads, then refuses more bytes than the limit; a scheme that can know or bound the size
    /// before reading overrides it and never reads past the limit.
    async fn load_limited(&self, url: &Url, limit: ReadLimit) -> Result<Vec<u8>, ResourceError> {
        let bytes = self.load(url).await?;
        limit.check(url, bytes.len() as u64)?;
        Ok(bytes)
    }

    /// True when the bytes behind a URL never change (artifacts), so a continuation promises
    /// consistency (OUT-8).
    fn is_snapshot(&self) -> bool {
        false
    }
}
