//! Connecting a remote server (Streamable HTTP, with OAuth when it is configured for it), and
//! what its errors may say.

#[cfg(feature = "http")]
use std::sync::Arc;
#[cfg(feature = "http")]
use std::sync::atomic::Ordering;

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
    #[cfg(feature = "http")]
    pub(super) async fn connect_http(&self, url: &str) -> Result<Connection, McpError> {
        // As for a child: a server that refuses `initialize` may be asked `server/discover`
        // on a new connection.
        self.in_revision(|mode| self.connect_http_once(url, mode))
            .await
    }

    /// One connection in `mode`; the error says whether the server refused `initialize`.
    #[cfg(feature = "http")]
    async fn connect_http_once(
        &self,
        url: &str,
        mode: rmcp::ClientLifecycleMode,
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
        let handler = Client {
            changes: self.changes.clone(),
            server: self.config.name.clone(),
            elicitor: self.elicitor.clone(),
        };
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
            Ok(Ok(service)) => {
                self.on_started(&service, modern);
                let (_, done) = tokio::sync::watch::channel(true);
                return Ok(Connection {
                    service,
                    stderr: Arc::default(),
                    stderr_done: done,
                    broken: Broken::default(),
                });
            }
            Ok(Err(e)) => {
                refused = crate::client::refused_initialize(&e);
                let text = e.to_string();
                let plain = http::plain(&text);
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
