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
//! Everything an authorization server sends is bounded: rmcp's OAuth client (30 s per
//! request, bodies capped, redirects to other origins refused, discovered hosts checked
//! against the server's address class) for discovery, registration and the code exchange; the
//! requests made here (a `private_key_jwt` or enterprise token exchange, legacy metadata) take
//! 30 s and 64 KiB at most and go only to endpoints [`endpoint_allowed`] accepts. The person is
//! asked at most [`MAX_STEP_UPS`] times for more scope per server; a request waiting for a
//! person's approval has the approval's time on top of its timeout, other requests do not
//! (`McpServer::bounded`). Tokens live in memory for the server's lifetime, or in the
//! embedder's token directory (`store.rs`), where a kept refresh token is only used once
//! discovery from the server's own challenge names the issuer that granted it. They appear in
//! no error.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, ClientCredentialsConfig,
    CredentialStore, OAuthClientConfig, OAuthTokenResponse, StoredCredentials,
};
use rmcp::transport::streamable_http_client::{
    InsufficientScopeError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Error as SseError, Sse};

use crate::auth::{Authorizer, ClientCredential, OAuthConfig};

mod authorizers;
mod endpoints;
mod jwt;
mod store;

pub use authorizers::{HeadlessAuthorizer, LoopbackAuthorizer, ShowUrl};
pub(crate) use endpoints::read_bounded;
use endpoints::{endpoint_allowed, legacy_metadata};
use jwt::{jwt_token_request, sign_assertion};
use store::Store;

/// The name a registering client gives itself.
const CLIENT_NAME: &str = "Ishiki";
/// The most of a token endpoint's answer read (a `private_key_jwt` exchange).
pub(crate) const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;
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
    /// How many times the server asked for more scope ([`MAX_STEP_UPS`]).
    step_ups: std::sync::atomic::AtomicU32,
    /// How many grants there have been ([`Session::grants`]).
    grants: std::sync::atomic::AtomicU64,
    /// While a person is asked to approve: when the approval time ends.
    approving: std::sync::Mutex<Option<tokio::time::Instant>>,
}

/// The most of an authorization failure's text an error shows.
const MAX_FAILURE_CHARS: usize = 600;

/// The most scope step-ups one server may ask of the person in a process: a server that keeps
/// asking would otherwise prompt on every call.
pub(crate) const MAX_STEP_UPS: u32 = 3;

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
        // Kept credentials are used as they are until the server refuses them; only then,
        // once discovery from its challenge has named the authorization server, is a kept
        // refresh token sent, and only to the server that granted it (`authorize`).
        manager.set_credential_store(store.clone());
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
            step_ups: std::sync::atomic::AtomicU32::new(0),
            grants: std::sync::atomic::AtomicU64::new(0),
            approving: std::sync::Mutex::new(None),
        })
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

    /// Records why an authorization failed, as errors may show it: without tokens or the
    /// client's secrets (an authorization server's answer may repeat them), control
    /// characters or more than [`MAX_FAILURE_CHARS`] characters of what it said.
    fn fail(&self, why: String) {
        let mut why = self.redact(&why);
        for secret in self.config.secret_values() {
            if secret.len() >= 4 {
                why = why.replace(secret.as_str(), "…");
            }
        }
        let mut shown: String = why
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(MAX_FAILURE_CHARS)
            .collect();
        if why.chars().count() > MAX_FAILURE_CHARS {
            shown.push('…');
        }
        *self.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(shown);
    }

    /// `text` with every token sent to the server replaced by `…` (a careless server may
    /// repeat the header it got).
    pub(crate) fn redact(&self, text: &str) -> String {
        let sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        // A self-registered client's secret, as its store holds it.
        let registered = self.store.held_secret();
        let mut text = text.to_owned();
        for token in sent
            .iter()
            .chain(registered.iter())
            .filter(|t| t.len() >= 4)
        {
            text = text.replace(token.as_str(), "…");
        }
        text
    }

    /// How many grants (sign-ins, refreshes after a refusal, step-ups) there have been: a
    /// request refused before the latest one just goes again with its token.
    fn grants(&self) -> u64 {
        self.grants.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn granted(&self) {
        self.grants
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Obtains a token after `sent` (or no token) was refused with `challenge`; `seen` is
    /// [`Session::grants`] when it was sent.
    async fn authorize(
        &self,
        challenge: &str,
        sent: Option<&str>,
        seen: u64,
    ) -> Result<(), AuthError> {
        let _one = self.gate.lock().await;
        if self.grants() != seen {
            // Another request authorized while this one waited.
            return Ok(());
        }
        let outcome = self.authorize_now(challenge, sent).await;
        if outcome.is_ok() {
            self.granted();
        }
        outcome
    }

    async fn authorize_now(&self, challenge: &str, sent: Option<&str>) -> Result<(), AuthError> {
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
        // From here on only this issuer's credentials are given out, to rmcp's refresh too.
        self.store.bind_issuer(metadata.issuer.clone());
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
                let secret = match client_secret {
                    Some(secret) => Some(secret.read().map_err(failed)?),
                    None => None,
                };
                let redirect = authorizer.redirect_uri();
                // Kept credentials of this authorization server: a refresh, not a sign-in.
                if let Some(kept) = self.store.load_bound().await
                    && kept.token_response.is_some()
                {
                    let mut config = OAuthClientConfig::new(kept.client_id.clone(), &redirect)
                        .with_scopes(kept.granted_scopes.clone());
                    if client_id.as_deref() == Some(kept.client_id.as_str())
                        && let Some(secret) = &secret
                    {
                        config = config.with_client_secret(secret.clone());
                    } else if let Some(registered) = self.store.registered_secret(&kept.client_id) {
                        // A client registered by an earlier sign-in, with the secret the
                        // authorization server gave it: a confidential client refreshes
                        // with it instead of signing in again.
                        config = config.with_client_secret(registered);
                    }
                    if manager.configure_client(config).is_ok()
                        && manager.refresh_token().await.is_ok()
                    {
                        return Ok(());
                    }
                }
                let mut wanted: Vec<String> = if scopes.is_empty() {
                    manager.select_initial_scopes(&[]).await
                } else {
                    scopes.clone()
                };
                let offered = metadata.scopes_supported.as_deref().unwrap_or_default();
                if !wanted.is_empty()
                    && !wanted.iter().any(|s| s == "offline_access")
                    && offered.iter().any(|s| s == "offline_access")
                {
                    wanted.push("offline_access".to_owned());
                }
                let refs: Vec<&str> = wanted.iter().map(String::as_str).collect();
                // The client: pre-registered, else named by its metadata document where the
                // authorization server takes one, else registered now (the spec's order).
                let by_url = metadata
                    .additional_fields
                    .get("client_id_metadata_document_supported")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false);
                let config = match (client_id, client_metadata_url) {
                    (Some(id), _) => {
                        let config = OAuthClientConfig::new(id.clone(), &redirect)
                            .with_scopes(wanted.clone());
                        match secret {
                            Some(secret) => config.with_client_secret(secret),
                            None => config,
                        }
                    }
                    (None, Some(url)) if by_url => OAuthClientConfig::new(url.clone(), &redirect)
                        .with_scopes(wanted.clone())
                        .with_application_type("native"),
                    _ => {
                        let registered = manager
                            .register_client(CLIENT_NAME, &redirect, &refs)
                            .await
                            .map_err(|e| failed(format!("the client could not register: {e}")))?;
                        if let Some(secret) = &registered.client_secret {
                            self.store.registered(store::Registered {
                                client_id: registered.client_id.clone(),
                                secret: secret.clone(),
                            });
                        }
                        registered
                    }
                };
                manager.configure_client(config)?;
                let url = manager.get_authorization_url(&refs).await?;
                self.approve_and_exchange(&manager, &*authorizer, &url)
                    .await
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
                    self.check_token_endpoint(&metadata.token_endpoint)?;
                    let audience = metadata
                        .issuer
                        .clone()
                        .unwrap_or_else(|| metadata.token_endpoint.clone());
                    let pem = key.read().map_err(failed)?;
                    let assertion = sign_assertion(&pem, *algorithm, client_id, &audience)?;
                    let token =
                        jwt_token_request(&metadata.token_endpoint, &assertion, &self.url, scopes)
                            .await?;
                    self.keep(client_id, token, scopes.clone()).await
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
                self.check_token_endpoint(&metadata.token_endpoint)?;
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
                self.keep(client_id, response, granted).await
            }
        }
    }

    /// Asks for more scope after `sent` was refused for want of it.
    async fn step_up(&self, refused: &InsufficientScopeError, seen: u64) -> Result<(), AuthError> {
        let _one = self.gate.lock().await;
        if self.grants() != seen {
            // Another request stepped up while this one waited.
            return Ok(());
        }
        let outcome = self.step_up_now(refused).await;
        if outcome.is_ok() {
            self.granted();
        }
        outcome
    }

    async fn step_up_now(&self, refused: &InsufficientScopeError) -> Result<(), AuthError> {
        let asked = self
            .step_ups
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if asked >= MAX_STEP_UPS {
            return Err(failed(format!(
                "the server asked for more scope {MAX_STEP_UPS} times already; no more sign-ins \
                 are started for it in this process"
            )));
        }
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
        self.approve_and_exchange(&manager, &*authorizer, &url)
            .await
    }

    /// Has `url` approved and exchanges the code its redirect carries for a token.
    async fn approve_and_exchange(
        &self,
        manager: &AuthorizationManager,
        authorizer: &dyn Authorizer,
        url: &str,
    ) -> Result<(), AuthError> {
        let callback = self.approve(authorizer, url).await?;
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

    /// Refuses a token endpoint, named by the server's metadata, that this client does not
    /// send credentials to ([`endpoint_allowed`]).
    fn check_token_endpoint(&self, endpoint: &str) -> Result<(), AuthError> {
        if endpoint_allowed(&self.url, endpoint) {
            return Ok(());
        }
        Err(failed(format!(
            "the authorization server's token endpoint {} is not one this client sends its \
             credentials to (not https, or on a private network the MCP server is not on)",
            crate::http::shown_url(endpoint)
        )))
    }

    /// Keeps a token obtained here rather than by rmcp as the server's credentials.
    async fn keep(
        &self,
        client_id: &str,
        token: OAuthTokenResponse,
        scopes: Vec<String>,
    ) -> Result<(), AuthError> {
        self.store
            .save(StoredCredentials::new(
                client_id.to_owned(),
                Some(token),
                scopes,
                Some(now_secs()),
            ))
            .await
    }

    /// When the approval running now ends, if one runs: requests wait for it
    /// (`McpServer::bounded`).
    pub(crate) fn approval_ends(&self) -> Option<tokio::time::Instant> {
        *self.approving.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The authorizer's answer to `url`, within its approval time.
    async fn approve(&self, authorizer: &dyn Authorizer, url: &str) -> Result<String, AuthError> {
        // The page is named by the server's metadata: held to the same rule as the endpoints
        // this client calls (an authorizer that fetches it itself must not be aimed at this
        // machine or a private network the server is not on, nor over cleartext).
        if !endpoint_allowed(&self.url, url) {
            return Err(failed(format!(
                "the authorization server's authorization page {} is not one this client opens \
                 (not https, or on a private network the MCP server is not on)",
                crate::http::shown_url(url)
            )));
        }
        struct Approving<'a>(&'a std::sync::Mutex<Option<tokio::time::Instant>>);
        impl Drop for Approving<'_> {
            fn drop(&mut self) {
                *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
        }
        let time = authorizer.approval_time();
        *self.approving.lock().unwrap_or_else(|e| e.into_inner()) =
            Some(tokio::time::Instant::now() + time);
        let _approving = Approving(&self.approving);
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
        let seen = session.grants();
        let token = session.token().await;
        let authorized = match call(token.clone()).await {
            Err(StreamableHttpError::AuthRequired(refused)) => {
                session
                    .authorize(&refused.www_authenticate_header, token.as_deref(), seen)
                    .await
            }
            Err(StreamableHttpError::InsufficientScope(refused)) => {
                session.step_up(&refused, seen).await
            }
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
        // Ending a session never starts a sign-in: a refusal just ends it.
        let token = self.session.token().await;
        self.inner
            .delete_session(uri, session_id, token, custom_headers)
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

    /// Counts the pages it was asked to have approved.
    #[derive(Debug, Default)]
    struct Counting(std::sync::atomic::AtomicUsize);

    #[async_trait::async_trait]
    impl Authorizer for Counting {
        fn redirect_uri(&self) -> String {
            "http://127.0.0.1:1/callback".into()
        }

        fn approval_time(&self) -> std::time::Duration {
            std::time::Duration::from_secs(1)
        }

        async fn authorize(&self, _server: &str, _url: &str) -> Result<String, String> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err("not approved".into())
        }
    }

    #[tokio::test]
    async fn an_authorization_page_on_a_network_the_server_is_not_on_is_never_opened() {
        let config = OAuthConfig::AuthorizationCode {
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            scopes: Vec::new(),
        };
        let authorizer = Arc::new(Counting::default());
        let session = Session::new(
            "s",
            "https://mcp.example.com/mcp",
            config,
            Some(authorizer.clone()),
            None,
        )
        .await
        .unwrap();
        for page in [
            "http://169.254.169.254/latest/meta-data/?state=x",
            "https://10.0.0.5/admin",
            "http://as.example.com/authorize",
        ] {
            let error = session.approve(&*authorizer, page).await.unwrap_err();
            assert!(
                error.to_string().contains("is not one this client opens"),
                "{error}"
            );
        }
        assert_eq!(authorizer.0.load(std::sync::atomic::Ordering::SeqCst), 0);
        // A public https page goes to the authorizer.
        let error = session
            .approve(&*authorizer, "https://as.example.com/authorize")
            .await
            .unwrap_err();
        assert!(error.to_string().contains("not approved"), "{error}");
        assert_eq!(authorizer.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
