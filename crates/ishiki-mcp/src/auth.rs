//! How a client proves who it is to a remote server: a static bearer token, or OAuth 2.1
//! (the MCP authorization spec: protected resource metadata, authorization server metadata,
//! a registered, pre-registered or URL-named client, PKCE, `resource` indicators, scope
//! step-up and refresh).
//!
//! The declarations here exist in every build, so a profile naming OAuth decodes anywhere;
//! running the flows takes the `oauth` feature (`oauth.rs`).

use std::fmt;
use std::time::Duration;

/// A secret: read from an environment variable when it is needed (profiles name variables,
/// never values), or held by an embedder that got it elsewhere. `Debug` never shows a value.
#[derive(Clone, PartialEq, Eq)]
pub enum Secret {
    /// The environment variable holding the secret.
    Env(String),
    /// The secret itself.
    Value(String),
}

impl Secret {
    /// The secret, or `Err` naming the variable that is not set (never a value).
    pub fn read(&self) -> Result<String, String> {
        match self {
            Secret::Value(value) => Ok(value.clone()),
            Secret::Env(var) => std::env::var(var)
                .ok()
                .filter(|v| !v.trim().is_empty())
                .map(|v| v.trim().to_owned())
                .ok_or_else(|| format!("the environment variable `{var}` is not set")),
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Secret::Env(var) => write!(f, "Env({var:?})"),
            Secret::Value(_) => f.write_str("Value(…)"),
        }
    }
}

/// The signing algorithm of a `private_key_jwt` client assertion (RFC 7523).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwtAlgorithm {
    /// ECDSA on P-256 with SHA-256; the key is a PKCS#8 PEM.
    Es256,
    /// RSASSA-PKCS1-v1_5 with SHA-256; the key is a PKCS#8 PEM.
    Rs256,
}

impl JwtAlgorithm {
    /// The algorithm's JOSE name (`ES256`, `RS256`).
    pub fn name(self) -> &'static str {
        match self {
            JwtAlgorithm::Es256 => "ES256",
            JwtAlgorithm::Rs256 => "RS256",
        }
    }

    /// The algorithm a JOSE name means; `None` for one Ishiki does not sign with.
    pub fn from_name(name: &str) -> Option<JwtAlgorithm> {
        match name {
            "ES256" => Some(JwtAlgorithm::Es256),
            "RS256" => Some(JwtAlgorithm::Rs256),
            _ => None,
        }
    }
}

/// How a client-credentials client authenticates at the token endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCredential {
    /// A client secret (`client_secret_basic`, or `client_secret_post` when the server
    /// offers it).
    Secret(Secret),
    /// A private key signing a JWT assertion (`private_key_jwt`).
    PrivateKey {
        /// The PKCS#8 PEM of the key.
        key: Secret,
        /// How it signs.
        algorithm: JwtAlgorithm,
    },
}

/// OAuth 2.1 for a remote server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthConfig {
    /// The authorization-code flow with PKCE: a person approves the client in a browser (the
    /// embedder's [`crate::Authorizer`]). The client is the pre-registered `client_id` when
    /// given; otherwise the `client_metadata_url` (a client ID metadata document) when the
    /// authorization server accepts one; otherwise it registers itself (RFC 7591).
    AuthorizationCode {
        /// A client ID the authorization server issued beforehand.
        client_id: Option<String>,
        /// Its secret, for a confidential pre-registered client.
        client_secret: Option<Secret>,
        /// The HTTPS URL of this client's metadata document, used as its client ID.
        client_metadata_url: Option<String>,
        /// The scopes to ask for; empty: those the server's challenge or metadata name.
        scopes: Vec<String>,
    },
    /// The client-credentials grant, for a client acting on its own behalf (no person).
    ClientCredentials {
        /// Its client ID.
        client_id: String,
        /// How it authenticates.
        credential: ClientCredential,
        /// The scopes to ask for; empty: none.
        scopes: Vec<String>,
    },
    /// Enterprise-managed authorization (cross-app access, ID-JAG): the person's sign-in at
    /// the enterprise identity provider (its ID token) is exchanged there for an identity
    /// assertion grant (RFC 8693), which the server's authorization server exchanges for a
    /// token (RFC 7523 `jwt-bearer`). No browser is involved.
    EnterpriseManaged {
        /// The ID token from the person's sign-in at the identity provider.
        id_token: Secret,
        /// The identity provider's issuer.
        idp_issuer: String,
        /// Its token endpoint.
        idp_token_endpoint: String,
        /// This client's ID at the identity provider.
        idp_client_id: String,
        /// Its secret there, if it is a confidential client (sent with HTTP Basic).
        idp_client_secret: Option<Secret>,
        /// This client's ID at the server's authorization server.
        client_id: String,
        /// Its secret there (sent with HTTP Basic).
        client_secret: Option<Secret>,
        /// The scopes to ask for; empty: none.
        scopes: Vec<String>,
    },
}

impl OAuthConfig {
    /// The values of every secret it names that can be read now, for redaction.
    pub(crate) fn secret_values(&self) -> Vec<String> {
        let secrets: Vec<&Secret> = match self {
            OAuthConfig::AuthorizationCode { client_secret, .. } => client_secret.iter().collect(),
            OAuthConfig::ClientCredentials { credential, .. } => match credential {
                ClientCredential::Secret(secret) => vec![secret],
                ClientCredential::PrivateKey { key, .. } => vec![key],
            },
            OAuthConfig::EnterpriseManaged {
                id_token,
                idp_client_secret,
                client_secret,
                ..
            } => std::iter::once(id_token)
                .chain(idp_client_secret)
                .chain(client_secret)
                .collect(),
        };
        secrets.into_iter().filter_map(|s| s.read().ok()).collect()
    }

    /// The authorization-code flow for a client that registers itself (or names itself by
    /// `client_metadata_url` where that is accepted).
    pub fn authorization_code() -> OAuthConfig {
        OAuthConfig::AuthorizationCode {
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            scopes: Vec::new(),
        }
    }
}

/// How long a person may take to approve a client in the browser, unless the
/// [`crate::Authorizer`] says otherwise.
pub const DEFAULT_APPROVAL_TIME: Duration = Duration::from_secs(300);

/// Who approves an authorization-code request: the CLI's chat prints the URL and receives the
/// redirect on 127.0.0.1 ([`crate::LoopbackAuthorizer`], feature `oauth`); a test or a
/// server that approves without a person follows the redirect itself
/// ([`crate::HeadlessAuthorizer`]). Without one, a server that asks for OAuth fails to
/// connect, saying that nobody can approve the client.
#[async_trait::async_trait]
pub trait Authorizer: Send + Sync + fmt::Debug {
    /// The redirect URI registered for the client and sent with each request.
    fn redirect_uri(&self) -> String;

    /// How long one approval may take before the request that needed it fails.
    fn approval_time(&self) -> Duration {
        DEFAULT_APPROVAL_TIME
    }

    /// Has `url` (the authorization server's page for `server`) approved and returns the URL
    /// the authorization server redirected to, holding `code` and `state`; `Err` says why
    /// not.
    async fn authorize(&self, server: &str, url: &str) -> Result<String, String>;
}
