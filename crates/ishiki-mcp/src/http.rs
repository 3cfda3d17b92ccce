//! The Streamable HTTP transport to a remote server: rmcp's own client worker on a reqwest
//! client, with every limit set by Ishiki rather than left at a default.
//!
//! What a remote server sends is bounded like what a child writes: one JSON reply and one SSE
//! event at most `MAX_MESSAGE_BYTES` (rmcp counts the raw bytes before parsing, so a line
//! without end or an event that never ends fails its request instead of growing the host), an
//! error page at most `MAX_ERROR_BYTES`, connecting at most the server's timeout, every
//! request under the server's timeout (`server.rs`), a dropped SSE stream resumed at most
//! `SSE_RETRIES` times. Redirects are not followed, so a header or token is only ever sent
//! to the configured origin.
//!
//! Secrets: header values may name environment variables (`${NAME}`) and the bearer token is
//! read from one; both are read at each connect and never appear in an error ([`redact`]).
//!
//! The older HTTP+SSE transport (`sse_transport.rs`) takes its client, headers and token
//! from here too ([`http_client`], [`headers`], [`bearer`]) and keeps the same limits.
//!
//! The transport itself needs the `http` feature; the secret handling below serves every
//! server's errors.

/// The OAuth requests made here build their own clients (`oauth/endpoints.rs`).
#[cfg(feature = "oauth")]
pub(crate) use remote::crypto_provider;
#[cfg(feature = "http")]
pub(crate) use remote::{MAX_ERROR_BYTES, bearer, headers, http_client, transport_config};

use crate::config::McpServerConfig;

#[cfg(feature = "http")]
mod remote {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use http::{HeaderName, HeaderValue};
    use rmcp::transport::common::client_side_sse::ExponentialBackoff;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    use super::expand;
    use crate::config::McpServerConfig;
    use crate::transport::MAX_MESSAGE_BYTES;

    /// The most of an HTTP error body kept for a diagnostic.
    pub(crate) const MAX_ERROR_BYTES: usize = 16 * 1024;
    /// How many times a dropped SSE stream is resumed before its requests fail.
    const SSE_RETRIES: usize = 3;

    /// The headers `config` names, their environment variables resolved and their values
    /// marked sensitive. `Err` names a variable or header, never a value.
    pub(crate) fn headers(
        config: &McpServerConfig,
    ) -> Result<HashMap<HeaderName, HeaderValue>, String> {
        let mut headers = HashMap::new();
        for (name, value) in &config.headers {
            let value = expand(value).map_err(|var| {
                format!("the environment variable `{var}` named in its header `{name}` is not set")
            })?;
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("`{name}` is not a valid HTTP header name"))?;
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                format!("the value of its header `{name}` is not a valid HTTP header value")
            })?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        Ok(headers)
    }

    /// The bearer token `config` names (`token_env`), read now; `Err` names the variable.
    pub(crate) fn bearer(config: &McpServerConfig) -> Result<Option<String>, String> {
        let Some(var) = &config.token_env else {
            return Ok(None);
        };
        std::env::var(var)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .map(|t| Some(t.trim().to_owned()))
            .ok_or_else(|| {
                format!("the environment variable `{var}` (its bearer token) is not set")
            })
    }

    /// The transport's settings for `url` as `config` says: its headers (environment variables
    /// resolved) and bearer token. `Err` says what is missing, naming variables, never values.
    pub(crate) fn transport_config(
        config: &McpServerConfig,
        url: &str,
    ) -> Result<StreamableHttpClientTransportConfig, String> {
        let headers = headers(config)?;
        let mut retry = ExponentialBackoff::default();
        retry.max_times = Some(SSE_RETRIES);
        retry.base_duration = Duration::from_millis(500);
        retry.max_delay = Some(Duration::from_secs(5));
        let mut transport_config = StreamableHttpClientTransportConfig::with_uri(url)
            .custom_headers(headers)
            .max_sse_event_size(MAX_MESSAGE_BYTES)
            .max_json_response_size(MAX_MESSAGE_BYTES)
            .max_error_response_size(MAX_ERROR_BYTES)
            .control_request_timeout(config.timeout)
            .session_recovery_timeout(config.timeout)
            .reinit_on_expired_session(true);
        transport_config.retry_config = Arc::new(retry);
        if let Some(token) = bearer(config)? {
            transport_config = transport_config.auth_header(token);
        }
        Ok(transport_config)
    }

    /// Makes ring the process's crypto provider unless the embedder set one: reqwest takes
    /// the process's default, and panics building a client when there is none. Called before
    /// every client this crate builds.
    pub(crate) fn crypto_provider() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }

    /// The HTTP client for `config`'s server: its connect deadline, no pooled idle
    /// connections, no redirects.
    pub(crate) fn http_client(config: &McpServerConfig) -> Result<reqwest::Client, String> {
        crypto_provider();
        reqwest::Client::builder()
            .connect_timeout(config.timeout)
            .pool_max_idle_per_host(0)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build an HTTP client: {e}"))
    }
}

/// `value` with each `${NAME}` replaced by the environment variable `NAME`; `Err(NAME)` for
/// the first one that is not set. A `$` not followed by `{` stays as it is.
pub(crate) fn expand(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let var = &after[..end];
        match std::env::var(var) {
            Ok(v) => out.push_str(&v),
            Err(_) => return Err(var.to_owned()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The URL as errors show it: without user info, query or fragment, which may hold secrets.
pub(crate) fn shown_url(url: &str) -> String {
    let cut = url.find(['?', '#']).map_or(url, |i| &url[..i]);
    match (cut.find("://"), cut.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}{}", &cut[..scheme + 3], &cut[at + 1..])
        }
        _ => cut.to_owned(),
    }
}

/// rmcp's words for a transport failure without its type names: `Send message error
/// Transport [rmcp::…] error: Client error: X, when send initialize request` becomes `X`.
pub(crate) fn plain(text: &str) -> &str {
    let text = text.rsplit_once("] error: ").map_or(text, |(_, rest)| rest);
    let text = text.strip_prefix("Client error: ").unwrap_or(text);
    text.rsplit_once(", when send ")
        .map_or(text, |(head, _)| head)
}

/// `text` with every secret of `config` (the bearer token, each header value read from the
/// environment, the OAuth client's secrets) replaced by `…`, so an error from the HTTP stack never carries one.
pub(crate) fn redact(text: &str, config: &McpServerConfig) -> String {
    let mut secrets: Vec<String> = config
        .headers
        .values()
        .filter(|v| v.contains("${"))
        .filter_map(|v| expand(v).ok())
        .collect();
    if let Some(var) = &config.token_env
        && let Ok(token) = std::env::var(var)
    {
        secrets.push(token.trim().to_owned());
    }
    if let Some(oauth) = &config.oauth {
        secrets.extend(oauth.secret_values());
    }
    let mut text = text.to_owned();
    for secret in secrets.iter().filter(|s| s.len() >= 4) {
        text = text.replace(secret.as_str(), "…");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_secrets() {
        assert_eq!(
            shown_url("https://user:pw@example.com/mcp?key=s3cret#x"),
            "https://example.com/mcp"
        );
        assert_eq!(
            shown_url("http://127.0.0.1:3001/mcp"),
            "http://127.0.0.1:3001/mcp"
        );
    }

    #[test]
    fn header_values_name_environment_variables() {
        // PATH is set in any test environment; a made-up name is not.
        let path = std::env::var("PATH").unwrap_or_default();
        assert_eq!(
            expand("x ${PATH} y").as_deref(),
            Ok(format!("x {path} y").as_str())
        );
        assert_eq!(expand("cost: $5").as_deref(), Ok("cost: $5"));
        assert_eq!(
            expand("Bearer ${ISHIKI_SURELY_UNSET_VAR}"),
            Err("ISHIKI_SURELY_UNSET_VAR".to_owned())
        );
    }
}
