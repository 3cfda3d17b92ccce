//! The handler traits: [`SchemeHandler`] for any scheme, [`FileScheme`] for schemes whose text
//! has a directly readable source (RES-2, RES-3).

use async_trait::async_trait;
use url::Url;

use crate::{ReadResult, ResourceError};

/// A handler for one URL scheme. It owns its access policy, URL parsing and resource
/// lifecycle (RES-2); the center only routes the full URL to it (RES-1).
#[async_trait]
pub trait SchemeHandler: Send + Sync + std::fmt::Debug {
    /// The scheme served, without `:` (e.g. `"example"`).
    fn scheme(&self) -> &str;

    /// Reads the resource named by the full URL (query and fragment included).
    async fn read(&self, url: &Url) -> Result<ReadResult, ResourceError>;

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

    /// True when the bytes behind a URL never change (artifacts), so a continuation promises
    /// consistency (OUT-8).
    fn is_snapshot(&self) -> bool {
        false
    }
}
