//! Connecting a remote server (Streamable HTTP, with OAuth when it is configured for it, or
//! the older HTTP+SSE), and what its errors may say.

#[cfg(feature = "http")]
use std::sync::Arc;
#[cfg(feature = "http")]
use std::sync::atomic::{AtomicU16, Ordering};

#[cfg(feature = "http")]
use super::millis;
use super::{Connection, McpServer, TimedOut};
#[cfg(feature = "http")]
use crate::client::Client;
use crate::error::{McpError, McpErrorKind};
use crate::http;
#[cfg(feature = "http")]
use crate::transport::Broken;

impl McpServer {
    /// The connection of a remote session that started: no child, so no stderr to read.
    #[cfg(feature = "http")]
    fn remote_session(
        &self,
        service: rmcp::service::RunningService<rmcp::RoleClient, Client>,
        modern: bool,
        broken: Broken,
    ) -> Connection {
        self.on_started(&service, modern);
        let (_, done) = tokio::sync::watch::channel(true);
        Connection {
            service,
            stderr: Arc::default(),
            stderr_done: done,
            broken,
        }
    }

    /// Without the `http` feature there is no remote transport: a server declared with a URL
    /// fails to connect, saying so.
    #[cfg(not(feature = "http"))]
    pub(super) async fn connect_http(&self, url: &str) -> Result<Connection, McpError> {
        let name = self.name();
        Err(McpError::new(
            McpErrorKind::Start,
            name,
            format!(
                "mcp server `{name}` at {} cannot be connected: this build of ishiki-mcp has no \
                 remote transport (its `http` feature is off)",
                http::shown_url(url)
            ),
        ))
    }

    /// A session with the remote server at `url`: rmcp's Streamable HTTP client on a reqwest
    /// client with a connect deadline, every reply bounded (see [`crate::http`]), OAuth when
    /// the server is configured for it.
    ///
    /// A server configured for the older HTTP+SSE transport is reached over it; with
    /// [`crate::McpTransport::Auto`], so is one whose `initialize` POST is answered 400, 404
    /// or 405 without a JSON-RPC error (the spec's backwards compatibility).
    #[cfg(feature = "http")]
    pub(super) async fn connect_http(&self, url: &str) -> Result<Connection, McpError> {
        use crate::config::McpTransport;
        // As for a child: a server that refuses `initialize` may be asked `server/discover`
        // on a new connection.
        if self.config.transport == McpTransport::Sse {
            return self
                .in_revision(|mode| self.connect_sse_once(url, mode))
                .await;
        }
        // A server found by the fallback before is reconnected over SSE at once; when that
        // fails, the next attempt probes again (it may speak Streamable HTTP by now).
        if self.legacy_sse.load(Ordering::Relaxed) {
            let result = self
                .in_revision(|mode| self.connect_sse_once(url, mode))
                .await;
            if result.is_err() {
                self.legacy_sse.store(false, Ordering::Relaxed);
            }
            return result;
        }
        let legacy = AtomicU16::new(0);
        let result = self
            .in_revision(|mode| self.connect_http_once(url, mode, &legacy))
            .await;
        let status = legacy.load(Ordering::Relaxed);
        match result {
            Err(_) if status != 0 && self.config.transport == McpTransport::Auto => self
                .in_revision(|mode| self.connect_sse_once(url, mode))
                .await
                .inspect(|_| self.legacy_sse.store(true, Ordering::Relaxed))
                .map_err(|e| {
                    let message = format!(
                        "{} (tried over HTTP+SSE after the `initialize` POST was answered \
                         HTTP {status})",
                        e.message()
                    );
                    McpError::new(e.kind(), self.name(), message)
                }),
            other => other,
        }
    }

    /// One connection in `mode`; the error says whether the server refused `initialize`, and
    /// `legacy` receives the status of an answer that means the older transport.
    #[cfg(feature = "http")]
    async fn connect_http_once(
        &self,
        url: &str,
        mode: rmcp::ClientLifecycleMode,
        legacy: &AtomicU16,
    ) -> Result<Connection, (McpError, bool)> {
        use rmcp::ClientServiceExt;
        use rmcp::transport::StreamableHttpClientTransport;

        let modern = matches!(mode, rmcp::ClientLifecycleMode::Discover { .. });
        let name = self.name();
        let config = &self.config;
        let shown = http::shown_url(url);
        let cannot = |why: String| {
            let error = McpError::new(
                McpErrorKind::Start,
                name,
                format!("mcp server `{name}` at {shown} cannot be connected: {why}"),
            );
            (error, false)
        };
        let transport_config = http::transport_config(config, url).map_err(cannot)?;
        let client = http::http_client(config).map_err(cannot)?;
        self.starts.fetch_add(1, Ordering::Relaxed);
        let handler = self.handler();
        let limit = self.config.timeout;
        let started = match self.oauth_session(url).await.map_err(cannot)? {
            None => {
                let transport =
                    StreamableHttpClientTransport::with_client(client, transport_config);
                self.bounded(handler.serve_with_lifecycle(transport, mode))
                    .await
            }
            #[cfg(feature = "oauth")]
            Some(session) => {
                let client = crate::oauth::OAuthHttp {
                    inner: client,
                    session,
                };
                let transport =
                    StreamableHttpClientTransport::with_client(client, transport_config);
                self.bounded(handler.serve_with_lifecycle(transport, mode))
                    .await
            }
        };
        let mut refused = false;
        let cause = match started {
            Ok(Ok(service)) => return Ok(self.remote_session(service, modern, Broken::default())),
            Ok(Err(e)) => {
                refused = crate::client::refused_initialize(&e);
                let text = e.to_string();
                let plain = http::plain(&text);
                if let Some(status) = crate::sse_transport::legacy_status(plain) {
                    legacy.store(status, Ordering::Relaxed);
                }
                let hint = if plain.contains("Auth required")
                    && config.oauth.is_none()
                    && config.token_env.is_none()
                {
                    " (the server asks for authorization: give it `auth: { oauth: {} }` or a \
                     token in the profile)"
                } else {
                    ""
                };
                match self.auth_failure().await {
                    Some(why) => format!("the server refused the client's authorization ({why})"),
                    None => format!(
                        "the initialize handshake failed: {}{hint}",
                        http::redact(plain, config)
                    ),
                }
            }
            Err(_) => format!("no answer to initialize within {}", millis(limit)),
        };
        let cause = self.redact_tokens(cause).await;
        let error = McpError::new(
            McpErrorKind::Start,
            name,
            format!("mcp server `{name}` at {shown} could not be reached: {cause}"),
        );
        Err((error, refused))
    }

    /// One connection over the older HTTP+SSE transport (`sse_transport.rs`) in `mode`; the
    /// error says whether the server refused `initialize`. OAuth is not offered over it.
    #[cfg(feature = "http")]
    async fn connect_sse_once(
        &self,
        url: &str,
        mode: rmcp::ClientLifecycleMode,
    ) -> Result<Connection, (McpError, bool)> {
        use rmcp::ClientServiceExt;

        let modern = matches!(mode, rmcp::ClientLifecycleMode::Discover { .. });
        let name = self.name();
        let config = &self.config;
        let shown = http::shown_url(url);
        let failed = |verb: &str, why: String| {
            let why = http::redact(&why, config);
            let error = McpError::new(
                McpErrorKind::Start,
                name,
                format!("mcp server `{name}` at {shown} {verb} (HTTP+SSE): {why}"),
            );
            (error, false)
        };
        if config.oauth.is_some() {
            return Err(failed(
                "cannot be connected",
                "it is configured for OAuth, which Ishiki does not offer over the older \
                 HTTP+SSE transport (give it a token with `auth: { tokenEnv: … }` or a header)"
                    .to_owned(),
            ));
        }
        let client = http::http_client(config).map_err(|why| failed("cannot be connected", why))?;
        self.starts.fetch_add(1, Ordering::Relaxed);
        let broken = Broken::default();
        let transport = crate::sse_transport::connect(client, config, url, broken.clone())
            .await
            .map_err(|why| failed("could not be reached", why))?;
        let handler = self.handler();
        let started = self
            .bounded(handler.serve_with_lifecycle(transport, mode))
            .await;
        let broke = || broken.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (cause, refused) = match started {
            Ok(Ok(service)) => return Ok(self.remote_session(service, modern, broken)),
            Ok(Err(e)) => {
                let text = e.to_string();
                let cause = match broke() {
                    Some(reason) => format!("it {reason}"),
                    None => format!("the initialize handshake failed: {}", http::plain(&text)),
                };
                (cause, crate::client::refused_initialize(&e))
            }
            Err(_) => (
                format!("no answer to initialize within {}", millis(config.timeout)),
                false,
            ),
        };
        let (error, _) = failed("could not be reached", cause);
        Err((error, refused))
    }

    /// The server's OAuth state, made on first use; `None` when it does not use OAuth.
    #[cfg(feature = "oauth")]
    async fn oauth_session(&self, url: &str) -> Result<Option<Arc<crate::oauth::Session>>, String> {
        let Some(oauth) = &self.config.oauth else {
            return Ok(None);
        };
        let mut slot = self.oauth.lock().await;
        if let Some(session) = slot.as_ref() {
            return Ok(Some(session.clone()));
        }
        let session = crate::oauth::Session::new(
            self.name(),
            url,
            oauth.clone(),
            self.authorizer.clone(),
            self.config.token_dir.as_deref(),
        )
        .await
        .map_err(|e| format!("its OAuth client cannot be set up: {e}"))?;
        let session = Arc::new(session);
        *slot = Some(session.clone());
        Ok(Some(session))
    }

    /// Without the `oauth` feature a server configured for OAuth cannot be connected.
    #[cfg(all(feature = "http", not(feature = "oauth")))]
    async fn oauth_session(&self, _url: &str) -> Result<Option<std::convert::Infallible>, String> {
        match &self.config.oauth {
            None => Ok(None),
            Some(_) => Err(
                "it is configured for OAuth and this build of ishiki-mcp has no OAuth client \
                 (its `oauth` feature is off)"
                    .to_owned(),
            ),
        }
    }

    /// `work` under the server's timeout, whose deadline waits out a sign-in the person is
    /// approving meanwhile (the timeout runs again from the approval's end): only a request
    /// that waits for a person gets the person's time.
    pub(super) async fn bounded<F: Future>(&self, work: F) -> Result<F::Output, TimedOut> {
        let mut work = std::pin::pin!(work);
        let mut deadline = tokio::time::Instant::now() + self.config.timeout;
        loop {
            match tokio::time::timeout_at(deadline, work.as_mut()).await {
                Ok(done) => return Ok(done),
                Err(_) => match self.approval_ends().await {
                    Some(end) if end + self.config.timeout > deadline => {
                        deadline = end + self.config.timeout;
                    }
                    _ => return Err(TimedOut),
                },
            }
        }
    }

    /// When the sign-in being approved now ends, if one is.
    async fn approval_ends(&self) -> Option<tokio::time::Instant> {
        #[cfg(feature = "oauth")]
        if let Some(session) = self.oauth.lock().await.as_ref() {
            return session.approval_ends();
        }
        None
    }

    /// Why the server last refused the client's OAuth authorization, taken (so it explains
    /// one failure only).
    pub(super) async fn auth_failure(&self) -> Option<String> {
        #[cfg(feature = "oauth")]
        if let Some(session) = self.oauth.lock().await.as_ref() {
            return session.take_failure();
        }
        None
    }

    /// `text` without the OAuth tokens sent to the server.
    pub(super) async fn redact_tokens(&self, text: String) -> String {
        #[cfg(feature = "oauth")]
        if let Some(session) = self.oauth.lock().await.as_ref() {
            return session.redact(&text);
        }
        text
    }
}
