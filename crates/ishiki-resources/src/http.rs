//! `http://` and `https://` (cargo feature `http`): network content for `read` (RES-2).
//!
//! A plain [`SchemeHandler`]: the body's magic bytes decide text or media (never the
//! `Content-Type` alone); text comes back without a read source, since a web page is not a
//! file that can be paged by offset later. Bodies are capped in size and requests in time.

use std::time::Duration;

use async_trait::async_trait;
use url::Url;

use crate::path_safety::show;
use crate::{ReadResult, ResourceError, ResourceErrorKind, SchemeHandler, sniff};

/// Limits and client settings of an [`HttpScheme`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// Bodies larger than this are refused (default 16 MiB).
    pub max_bytes: u64,
    /// The whole request, body included, must finish within this (default 30 s).
    pub timeout: Duration,
    /// Whether to honour `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY` from the environment (default
    /// true).
    pub use_env_proxy: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            max_bytes: 16 << 20,
            timeout: Duration::from_secs(30),
            use_env_proxy: true,
        }
    }
}

/// Reads `http://` or `https://` URLs with a GET. Register one per scheme.
#[derive(Debug, Clone)]
pub struct HttpScheme {
    scheme: &'static str,
    client: reqwest::Client,
    options: HttpOptions,
}

impl HttpScheme {
    /// A handler for `scheme` (`"http"` or `"https"`).
    pub fn new(scheme: &str, options: HttpOptions) -> Result<Self, ResourceError> {
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => "http",
            "https" => "https",
            other => {
                return Err(ResourceError::new(
                    ResourceErrorKind::InvalidParameter,
                    format!(
                        "the http handler serves `http` or `https`, not `{}`",
                        show(other)
                    ),
                ));
            }
        };
        let mut builder = reqwest::Client::builder().timeout(options.timeout);
        if !options.use_env_proxy {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::Io,
                format!("cannot start the {scheme} client: {e}"),
            )
        })?;
        Ok(Self {
            scheme,
            client,
            options,
        })
    }

    async fn fetch(&self, url: &Url, shown: &str) -> Result<Vec<u8>, ResourceError> {
        let failed = |e: reqwest::Error| {
            if e.is_timeout() {
                ResourceError::new(
                    ResourceErrorKind::Io,
                    format!(
                        "`{shown}` timed out after {} ms",
                        self.options.timeout.as_millis()
                    ),
                )
            } else {
                // reqwest's top-level message ("error sending request") hides the cause.
                let mut causes = Vec::new();
                let mut cause = std::error::Error::source(&e);
                while let Some(inner) = cause {
                    causes.push(inner.to_string());
                    cause = inner.source();
                }
                let mut why = e.without_url().to_string();
                for c in causes {
                    why.push_str(": ");
                    why.push_str(&c);
                }
                ResourceError::new(
                    ResourceErrorKind::Io,
                    format!("cannot fetch `{shown}`: {why}"),
                )
            }
        };
        let mut response = self.client.get(url.clone()).send().await.map_err(failed)?;
        let status = response.status();
        if !status.is_success() {
            let kind = if matches!(status.as_u16(), 404 | 410) {
                ResourceErrorKind::NotFound
            } else {
                ResourceErrorKind::Io
            };
            return Err(ResourceError::new(
                kind,
                format!("`{shown}` answered HTTP {status}"),
            ));
        }
        let max = self.options.max_bytes;
        let too_large = || {
            ResourceError::new(
                ResourceErrorKind::TooLarge,
                format!("`{shown}` is larger than the limit of {max} bytes"),
            )
        };
        if response.content_length().is_some_and(|n| n > max) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if (body.len() + chunk.len()) as u64 > max {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

#[async_trait]
impl SchemeHandler for HttpScheme {
    fn scheme(&self) -> &str {
        self.scheme
    }

    async fn read(&self, url: &Url) -> Result<ReadResult, ResourceError> {
        let mut bare = url.clone();
        bare.set_fragment(None);
        let shown = show(bare.as_str());
        let body = self.fetch(&bare, &shown).await?;
        let info = sniff(&body);
        if info.media_type.starts_with("text/") {
            // sniff says text only for valid UTF-8, so this conversion cannot fail.
            let text = String::from_utf8(body).map_err(|_| {
                ResourceError::new(
                    ResourceErrorKind::InvalidData,
                    format!("`{shown}` is not UTF-8 text"),
                )
            })?;
            return Ok(ReadResult::Text { text, source: None });
        }
        Ok(ReadResult::File {
            url: bare.into(),
            media_type: info.media_type,
            data: body,
            source: None,
        })
    }
}
