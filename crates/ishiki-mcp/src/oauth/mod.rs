//! OAuth 2.1 for remote servers (feature `oauth`), on rmcp's authorization support.
//!
//! The client reacts to the server: a request answered 401 runs discovery from the
//! challenge's `resource_metadata` (falling back to the well-known locations and, for servers
//! of the 2025-03-26 era, the server's own origin), obtains a token and is sent again once; a
//! rejected token is refreshed first. A 403 `insufficient_scope` asks for the union of the
//! granted and the required scopes (at most three times per server), then sends the request
//! again once. One authorization runs at a time per server; requests that were refused
//! meanwhile use the token it got.
//!
//! Everything an authorization server sends is bounded by rmcp's OAuth client (30 s per
//! request, bodies capped, redirects to other origins refused, discovered hosts checked
//! against the server's address class); the token endpoint of a `private_key_jwt` client is
//! read here under the same limits. Tokens live in memory for the server's lifetime, or in
//! the embedder's token directory (`store.rs`), and appear in no error.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    AuthorizationRequest, AuthorizationSession, ClientCredentialsConfig, CredentialStore,
    OAuthTokenResponse, StoredCredentials,
};
use rmcp::transport::streamable_http_client::{
    InsufficientScopeError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

use crate::auth::{Authorizer, ClientCredential, OAuthConfig};

mod authorizers;
mod jwt;
mod store;

pub use authorizers::{HeadlessAuthorizer, LoopbackAuthorizer, ShowUrl};
use jwt::{jwt_token_request, sign_assertion};
use store::Store;

/// The name a registering client gives itself.
const CLIENT_NAME: &str = "Ishiki";
/// The most of a token endpoint's answer read (a `private_key_jwt` exchange).
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;
/// The limit for one request to an authorization server made here.
pub(crate) const TOKEN_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The OAuth state of one remote server, kept across its connections.
pub(crate) struct Session {
    server: String,
    url: String,
    config: OAuthConfig,
    authorizer: Option<Arc<dyn Authorizer>>,
    manager: tokio::sync::Mutex<AuthorizationManager>,
    store: Store,
    /// Held while an authorization runs, so that one runs at a time.
    gate: tokio::sync::Mutex<()>,
    /// The tokens sent so far, so that no error repeats one ([`Session::redact`]).
    sent: std::sync::Mutex<Vec<String>>,
    /// Why the last authorization failed or was refused, for the error of the request it
    /// broke (rmcp's worker closes the connection on such a failure).
    failure: std::sync::Mutex<Option<String>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

pub(crate) fn failed(why: impl Into<String>) -> AuthError {
    AuthError::AuthorizationFailed(why.into())
}

impl Session {
    pub(crate) async fn new(
        server: &str,
        url: &str,
        config: OAuthConfig,
        authorizer: Option<Arc<dyn Authorizer>>,
        token_dir: Option<&std::path::Path>,
    ) -> Result<Session, AuthError> {
        let store = Store::new(token_dir, server, url);
        let mut manager = AuthorizationManager::new(url).await?;
        manager.set_credential_store(store.clone());
        if token_dir.is_some() {
            // Kept credentials configure the client again (discovery runs once); any failure
            // here only means a sign-in when the server asks.
            let _ = manager.initialize_from_store().await;
        }
        Ok(Session {
            server: server.to_owned(),
            url: url.to_owned(),
            config,
            authorizer,
            manager: tokio::sync::Mutex::new(manager),
            store,
            gate: tokio::sync::Mutex::new(()),
            sent: std::sync::Mutex::new(Vec::new()),
            failure: std::sync::Mutex::new(None),
        })
    }

    /// How much longer than its timeout a request may take because a person approves it.
    pub(crate) fn approval_time(&self) -> Duration {
        match (&self.config, &self.authorizer) {
            (OAuthConfig::AuthorizationCode { .. }, Some(a)) => a.approval_time(),
            _ => Duration::ZERO,
        }
    }

    /// The token to send, if there is one (an expiring one is refreshed first).
    async fn token(&self) -> Option<String> {
        let token = self.manager.lock().await.get_access_token().await.ok()?;
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        if !sent.contains(&token) {
            // Bounded: a server that makes the client refresh without end keeps the last few.
            if sent.len() >= 8 {
                sent.remove(0);
            }
            sent.push(token.clone());
        }
        Some(token)
    }

    /// Why the last authorization failed, taken.
    pub(crate) fn take_failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    fn fail(&self, why: String) {
        let why = self.redact(&why);
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
    }

    /// `text` with every token sent to the server replaced by `…` (a careless server may
    /// repeat the header it got).
    pub(crate) fn redact(&self, text: &str) -> String {
        let sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = text.to_owned();
        for token in sent.iter().filter(|t| t.len() >= 4) {
            text = text.replace(token.as_str(), "…");
        }
        text
    }

    /// Obtains a token after `sent` (or no token) was refused with `challenge`.
    async fn authorize(&self, challenge: &str, sent: Option<&str>) -> Result<(), AuthError> {
        let _one = self.gate.lock().await;
        let current = self.token().await;
        if current.is_some() && current.as_deref() != sent {
            // Another request authorized while this one waited.
            return Ok(());
        }
        let mut manager = self.manager.lock().await;
        if sent.is_some() && manager.refresh_token().await.is_ok() {
            return Ok(());
        }
        let metadata = match manager
            .resolve_metadata_from_challenge(Some(challenge))
            .await
        {
            Ok(resolution) => resolution.metadata,
            Err(AuthError::AuthorizationServerMismatch {
                expected_issuer,
                received_issuer,
            }) => legacy_metadata(&self.url, &expected_issuer, &received_issuer).await?,
            Err(e) => return Err(e),
        };
        manager.set_metadata(metadata.clone());
        match &self.config {
            OAuthConfig::AuthorizationCode {
                client_id,
                client_secret,
                client_metadata_url,
                scopes,
            } => {
                let authorizer = self.authorizer.clone().ok_or_else(|| {
                    failed(
                        "the server asks for OAuth sign-in and this client has nobody to approve it \
                         (no authorizer)",
                    )
                })?;
                let mut request = AuthorizationRequest::new(authorizer.redirect_uri())
                    .with_client_name(CLIENT_NAME)
                    .with_challenge(challenge)
                    .with_initial_scope_selection()
                    .with_scopes(scopes.iter().cloned());
                if let Some(id) = client_id {
                    request = request.with_preregistered_client(id);
                }
                if let Some(secret) = client_secret {
                    request = request.with_client_secret(secret.read().map_err(failed)?);
                }
                if let Some(url) = client_metadata_url {
                    request = request.with_client_metadata_url(url);
                }
                let mut placeholder = AuthorizationManager::new(self.url.as_str()).await?;
                placeholder.set_credential_store(self.store.clone());
                let taken = std::mem::replace(&mut *manager, placeholder);
                let session = match AuthorizationSession::new(taken, request).await {
                    Ok(session) => session,
                    Err((taken, e)) => {
                        *manager = taken;
                        return Err(e);
                    }
                };
                let outcome = self
                    .approve(&*authorizer, session.get_authorization_url())
                    .await;
                let outcome = match outcome {
                    Ok(callback) => session.handle_callback_url(&callback).await.map(|_| ()),
                    Err(e) => Err(e),
                };
                *manager = session.auth_manager;
                outcome
            }
            OAuthConfig::ClientCredentials {
                client_id,
                credential,
                scopes,
            } => match credential {
                ClientCredential::Secret(secret) => {
                    let config = ClientCredentialsConfig::ClientSecret {
                        client_id: client_id.clone(),
                        client_secret: secret.read().map_err(failed)?,
                        scopes: scopes.clone(),
                        resource: Some(self.url.clone()),
                    };
                    manager.validate_client_credentials_metadata(&config)?;
                    manager.configure_client_credentials(&config)?;
                    manager.exchange_client_credentials(&config).await?;
                    Ok(())
                }
                ClientCredential::PrivateKey { key, algorithm } => {
                    let audience = metadata
                        .issuer
                        .clone()
                        .unwrap_or_else(|| metadata.token_endpoint.clone());
                    let pem = key.read().map_err(failed)?;
                    let assertion = sign_assertion(&pem, *algorithm, client_id, &audience)?;
                    let token =
                        jwt_token_request(&metadata.token_endpoint, &assertion, &self.url, scopes)
                            .await?;
                    let now = now_secs();
                    self.store
                        .save(StoredCredentials::new(
                            client_id.clone(),
                            Some(token),
                            scopes.clone(),
                            Some(now),
                        ))
                        .await
                }
            },
            OAuthConfig::EnterpriseManaged {
                id_token,
                idp_issuer,
                idp_token_endpoint,
                idp_client_id,
                idp_client_secret,
                client_id,
                client_secret,
                scopes,
            } => {
                use rmcp::transport::auth::default_oauth_http_client;
                use rmcp::transport::auth::enterprise::{
                    EmaAuthorizationServer, EmaClientAuthentication, EmaExchangeRequest,
                };
                let basic = |secret: &Option<crate::auth::Secret>| -> Result<_, AuthError> {
                    Ok(match secret {
                        None => EmaClientAuthentication::None,
                        Some(s) => EmaClientAuthentication::ClientSecretBasic(
                            oauth2::ClientSecret::new(s.read().map_err(failed)?),
                        ),
                    })
                };
                let idp = EmaAuthorizationServer::new(
                    idp_issuer.as_str(),
                    idp_token_endpoint.as_str(),
                    idp_client_id.as_str(),
                )
                .with_client_authentication(basic(idp_client_secret)?);
                let issuer = metadata
                    .issuer
                    .clone()
                    .ok_or_else(|| failed("the authorization server's metadata names no issuer"))?;
                let resource_as = EmaAuthorizationServer::new(
                    issuer,
                    metadata.token_endpoint.as_str(),
                    client_id.as_str(),
                )
                .with_client_authentication(basic(client_secret)?);
                let id_token = id_token.read().map_err(failed)?;
                let http = default_oauth_http_client()?;
                let token =
                    EmaExchangeRequest::new_with_id_token(idp, resource_as, &self.url, &id_token)
                        .with_scopes(scopes.iter().cloned())
                        .exchange(&http, &http)
                        .await
                        .map_err(|e| {
                            failed(format!("the enterprise-managed exchange failed: {e}"))
                        })?;
                let mut response = serde_json::json!({
                    "access_token": token.access_token.secret(),
                    "token_type": "Bearer",
                });
                if let Some(expires) = token.expires_in {
                    response["expires_in"] = expires.as_secs().into();
                }
                let response: OAuthTokenResponse = serde_json::from_value(response)
                    .map_err(|e| failed(format!("the exchanged token cannot be kept: {e}")))?;
                let granted = token.scopes.into_iter().collect();
                self.store
                    .save(StoredCredentials::new(
                        client_id.clone(),
                        Some(response),
                        granted,
                        Some(now_secs()),
                    ))
                    .await
            }
        }
    }

    /// Asks for more scope after `refused`.
    async fn step_up(&self, refused: &InsufficientScopeError) -> Result<(), AuthError> {
        let _one = self.gate.lock().await;
        let Some(required) = refused.get_required_scope() else {
            return Err(failed(
                "the server refused the token for want of a scope it does not name",
            ));
        };
        let OAuthConfig::AuthorizationCode { .. } = &self.config else {
            return Err(failed(format!(
                "the server wants the scope `{required}`, which only a person's sign-in \
                 (`oauth`) can add"
            )));
        };
        let authorizer = self
            .authorizer
            .clone()
            .ok_or_else(|| failed("more scope needs approval and there is no authorizer"))?;
        let manager = self.manager.lock().await;
        let url = manager.request_scope_upgrade(required).await?;
        let callback = self.approve(&*authorizer, &url).await?;
        let callback = AuthorizationCallback::from_redirect_url(&callback)?;
        manager
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await?;
        Ok(())
    }

    /// The authorizer's answer to `url`, within its approval time.
    async fn approve(&self, authorizer: &dyn Authorizer, url: &str) -> Result<String, AuthError> {
        let time = authorizer.approval_time();
        match tokio::time::timeout(time, authorizer.authorize(&self.server, url)).await {
            Ok(Ok(callback)) => Ok(callback),
            Ok(Err(why)) => Err(failed(format!("the sign-in was not approved: {why}"))),
            Err(_) => Err(failed(format!(
                "the sign-in was not approved within {} s",
                time.as_secs()
            ))),
        }
    }
}

/// The authorization server metadata at the origin of `server_url`, for a server of the
/// 2025-03-26 era (no protected resource metadata) whose metadata names an issuer other than
/// the origin it is served from (RFC 8414 asks them to be the same). The document is taken
/// only when it is the origin's own (`expected` is the origin) and its issuer is on that
/// origin too: it cannot name a foreign authorization server.
async fn legacy_metadata(
    server_url: &str,
    expected: &str,
    received: &str,
) -> Result<AuthorizationMetadata, AuthError> {
    let mismatch = || AuthError::AuthorizationServerMismatch {
        expected_issuer: expected.to_owned(),
        received_issuer: received.to_owned(),
    };
    let Ok(server) = url::Url::parse(server_url) else {
        return Err(mismatch());
    };
    if !legacy_issuer_acceptable(&server, expected, received) {
        return Err(mismatch());
    }
    let origin = server.origin();
    let same_origin = |text: &str| url::Url::parse(text).is_ok_and(|u| u.origin() == origin);
    let mut at = server.clone();
    at.set_path("/.well-known/oauth-authorization-server");
    at.set_query(None);
    at.set_fragment(None);
    let body = bounded_get(at.as_str()).await?;
    let metadata: AuthorizationMetadata = serde_json::from_slice(&body).map_err(|e| {
        failed(format!(
            "the authorization server's metadata is unreadable: {e}"
        ))
    })?;
    let endpoints_here = same_origin(&metadata.authorization_endpoint)
        && same_origin(&metadata.token_endpoint)
        && metadata
            .registration_endpoint
            .as_deref()
            .is_none_or(same_origin);
    if metadata.issuer.as_deref() != Some(received) || !endpoints_here {
        return Err(mismatch());
    }
    Ok(metadata)
}

/// Whether metadata fetched from the origin of `server` (`expected` is that origin) whose
/// issuer is `received` may stand for the server's own authorization server: only when
/// `received` is on the same origin.
fn legacy_issuer_acceptable(server: &url::Url, expected: &str, received: &str) -> bool {
    let origin = server.origin();
    let expected_is_origin = url::Url::parse(expected)
        .is_ok_and(|u| u.origin() == origin && matches!(u.path(), "" | "/"));
    let received_here = url::Url::parse(received).is_ok_and(|u| u.origin() == origin);
    expected_is_origin && received_here
}

/// The body of a GET to `url`, within the token request's limits.
async fn bounded_get(url: &str) -> Result<Vec<u8>, AuthError> {
    let client = reqwest::Client::builder()
        .timeout(TOKEN_REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| failed(format!("cannot build an HTTP client: {e}")))?;
    let mut response = client
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| failed(format!("{url} could not be fetched: {e}")))?;
    if !response.status().is_success() {
        return Err(failed(format!("{url} answered {}", response.status())));
    }
    read_bounded(&mut response).await
}

/// A response body, at most [`MAX_TOKEN_RESPONSE_BYTES`].
pub(crate) async fn read_bounded(response: &mut reqwest::Response) -> Result<Vec<u8>, AuthError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| failed(format!("the answer broke off: {e}")))?
    {
        if body.len() + chunk.len() > MAX_TOKEN_RESPONSE_BYTES {
            return Err(failed(format!(
                "the answer is longer than {MAX_TOKEN_RESPONSE_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// rmcp's reqwest client with OAuth: every request carries the server's token, a 401 runs
/// the authorization and a 403 `insufficient_scope` the step-up, each followed by one retry.
#[derive(Clone)]
pub(crate) struct OAuthHttp {
    pub(crate) inner: reqwest::Client,
    pub(crate) session: Arc<Session>,
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

impl OAuthHttp {
    async fn with_auth<T, F, Fut>(&self, call: F) -> HttpResult<T>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = HttpResult<T>>,
    {
        let session = &self.session;
        let token = session.token().await;
        let authorized = match call(token.clone()).await {
            Err(StreamableHttpError::AuthRequired(refused)) => {
                session
                    .authorize(&refused.www_authenticate_header, token.as_deref())
                    .await
            }
            Err(StreamableHttpError::InsufficientScope(refused)) => session.step_up(&refused).await,
            other => return other,
        };
        if let Err(e) = authorized {
            session.fail(e.to_string());
            return Err(e.into());
        }
        let again = call(session.token().await).await;
        match &again {
            Err(StreamableHttpError::AuthRequired(_)) => {
                session.fail("the server refused the token it had just granted".to_owned());
            }
            Err(StreamableHttpError::InsufficientScope(refused)) => session.fail(format!(
                "the server still wants more scope{}",
                refused
                    .get_required_scope()
                    .map(|s| format!(" (`{s}`)"))
                    .unwrap_or_default()
            )),
            _ => {}
        }
        again
    }
}

impl StreamableHttpClient for OAuthHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.with_auth(|token| {
            self.inner.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.with_auth(|token| {
            self.inner.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.with_auth(|token| {
            self.inner.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        self.with_auth(|token| {
            self.inner.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<Sse, SseError>>> {
        self.with_auth(|token| {
            self.inner.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_metadata_may_name_an_issuer_only_on_the_servers_own_origin() {
        let server = url::Url::parse("http://localhost:4000/mcp").unwrap();
        let ok = |e: &str, r: &str| legacy_issuer_acceptable(&server, e, r);
        assert!(ok("http://localhost:4000/", "http://localhost:4000/oauth"));
        assert!(!ok(
            "http://localhost:4000/",
            "https://evil.example.com/oauth"
        ));
        assert!(!ok("http://localhost:4000/", "http://localhost:4001/oauth"));
        // A mismatch found elsewhere (an authorization server the metadata named) stays one.
        assert!(!ok(
            "http://localhost:4000/tenant",
            "http://localhost:4000/oauth"
        ));
        assert!(!ok("https://as.example.com/", "https://as.example.com/x"));
    }

    #[test]
    fn a_secret_value_never_shows_in_debug_output() {
        let config = OAuthConfig::ClientCredentials {
            client_id: "c".into(),
            credential: ClientCredential::Secret(crate::Secret::Value("hunter22".into())),
            scopes: Vec::new(),
        };
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("hunter22") && shown.contains("Value(…)"),
            "{shown}"
        );
        assert_eq!(config.secret_values(), ["hunter22"]);
    }
}
