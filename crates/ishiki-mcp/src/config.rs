//! How to start one server: from the profile's `mcp.servers` or built in code.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::auth::OAuthConfig;

#[cfg(feature = "profile")]
use ishiki_core::{Profile, profile::McpServerDecl};

/// The default limit, 30 s: the profile's `timeoutMs` default too
/// (`ishiki_core::profile::McpServerDecl::DEFAULT_TIMEOUT_MS`; a test holds them equal).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Which revision of MCP a session speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum McpProtocol {
    /// `initialize` with `2025-11-25`, and `server/discover` with `2026-07-28` when the server
    /// refuses the handshake: every server that speaks the older revision (nearly all, and
    /// the dual-era SDKs) is spoken to in it, and one that speaks only the stateless revision
    /// is still reached.
    #[default]
    Auto,
    /// `2025-11-25` only (the `initialize` handshake).
    V2025_11_25,
    /// `2026-07-28` only: stateless, `server/discover`, list changes on a
    /// `subscriptions/listen` stream the client opens.
    V2026_07_28,
}

impl McpProtocol {
    /// The revision a profile's `protocol` names; `None` for one Ishiki does not speak.
    pub fn from_name(name: &str) -> Option<McpProtocol> {
        match name {
            "2025-11-25" => Some(McpProtocol::V2025_11_25),
            "2026-07-28" => Some(McpProtocol::V2026_07_28),
            _ => None,
        }
    }
}

/// How a remote server is reached (a server with [`McpServerConfig::url`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum McpTransport {
    /// Streamable HTTP, and the older HTTP+SSE (`2024-11-05`) at the same URL when the
    /// `initialize` POST is answered 400, 404 or 405 without a JSON-RPC error: the spec's
    /// backwards compatibility for a client given only a URL.
    #[default]
    Auto,
    /// Streamable HTTP only (profile `transport: streamable-http`).
    StreamableHttp,
    /// The older HTTP+SSE transport only (profile `transport: sse`): the URL is the SSE
    /// stream's, and the server names where messages are posted (on the same origin).
    Sse,
}

impl McpTransport {
    /// The transport a profile's `transport` names; `None` for one Ishiki does not know.
    pub fn from_name(name: &str) -> Option<McpTransport> {
        match name {
            "streamable-http" => Some(McpTransport::StreamableHttp),
            "sse" => Some(McpTransport::Sse),
            _ => None,
        }
    }
}

/// How to reach one MCP server (a child process over stdio, or a remote server over Streamable
/// HTTP or HTTP+SSE when [`McpServerConfig::url`] is set), and how its tools join the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The server's name: tools are named `<name>_<tool>` with origin `mcp:<name>`.
    pub name: String,
    /// The program to run (looked up on `PATH` when it has no slash); unused when `url` is set.
    pub command: String,
    /// The Streamable HTTP endpoint of a remote server (or its SSE stream's URL, see
    /// [`McpServerConfig::transport`]); when set, no process is started.
    pub url: Option<String>,
    /// How the remote server at `url` is reached (default: [`McpTransport::Auto`]).
    pub transport: McpTransport,
    /// HTTP headers for every request to a remote server; `${NAME}` in a value is replaced by
    /// the environment variable `NAME` at each connect (an unset one fails the connect,
    /// naming the variable, never a value).
    pub headers: BTreeMap<String, String>,
    /// The environment variable holding a bearer token for a remote server, read at each
    /// connect and sent as `Authorization: Bearer …`; never shown in any error.
    pub token_env: Option<String>,
    /// OAuth 2.1 for a remote server (run with the `oauth` feature): tokens are obtained
    /// when the server asks for them (a 401), refreshed, and stepped up on a 403
    /// `insufficient_scope`.
    pub oauth: Option<OAuthConfig>,
    /// Where OAuth credentials are kept across restarts (`<dir>/<name>-<hash>.json`, readable
    /// by the owner only, bound to the server's URL and to the issuer that granted them);
    /// none: in memory, for the process.
    pub token_dir: Option<PathBuf>,
    /// Which revision of MCP to speak (default: [`McpProtocol::Auto`]).
    pub protocol: McpProtocol,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to the inherited environment.
    pub env: BTreeMap<String, String>,
    /// The working directory (default: the current one).
    pub cwd: Option<PathBuf>,
    /// Whether the tools are resident (always listed) rather than deferred to the toolsearch
    /// pool (TS-1).
    pub resident: bool,
    /// The limit for starting the server and for every request to it.
    pub timeout: Duration,
}

impl McpServerConfig {
    /// A server `name` started by `command`; deferred tools, the [`DEFAULT_TIMEOUT`].
    pub fn new(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            command: command.into(),
            url: None,
            transport: McpTransport::Auto,
            headers: BTreeMap::new(),
            token_env: None,
            oauth: None,
            token_dir: None,
            protocol: McpProtocol::Auto,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            resident: false,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// A remote server `name` at the Streamable HTTP endpoint `url` (or HTTP+SSE there, see
    /// [`McpTransport::Auto`]); deferred tools, the [`DEFAULT_TIMEOUT`].
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::new(name, "")
        }
    }

    /// Adds a header for a remote server (`${NAME}` in the value names an environment
    /// variable).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    /// Uses OAuth 2.1 with a remote server.
    pub fn oauth(mut self, oauth: OAuthConfig) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// Keeps OAuth credentials in `dir` (see [`McpServerConfig::token_dir`]).
    pub fn token_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.token_dir = Some(dir.into());
        self
    }

    /// Reaches the remote server over `transport`.
    pub fn transport(mut self, transport: McpTransport) -> Self {
        self.transport = transport;
        self
    }

    /// Speaks `protocol`.
    pub fn protocol(mut self, protocol: McpProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Makes the tools resident.
    pub fn resident(mut self, resident: bool) -> Self {
        self.resident = resident;
        self
    }

    /// The servers a profile declares under `mcp.servers`, in name order (feature `profile`).
    #[cfg(feature = "profile")]
    pub fn from_profile(profile: &Profile) -> Vec<McpServerConfig> {
        profile
            .mcp
            .servers
            .iter()
            .map(|(name, decl)| McpServerConfig::from_decl(name, decl))
            .collect()
    }

    /// The server `name` as the profile declares it: the one place a declaration (YAML's
    /// strings and milliseconds) becomes a configuration (paths and a [`Duration`]) (feature
    /// `profile`).
    #[cfg(feature = "profile")]
    pub fn from_decl(name: &str, decl: &McpServerDecl) -> McpServerConfig {
        McpServerConfig {
            name: name.to_owned(),
            command: decl.command.clone(),
            url: decl.url.clone(),
            transport: decl
                .transport
                .as_deref()
                .and_then(McpTransport::from_name)
                .unwrap_or_default(),
            headers: decl.headers.clone(),
            token_env: decl.auth.as_ref().and_then(|a| a.token_env.clone()),
            oauth: decl.auth.as_ref().and_then(oauth_from_decl),
            token_dir: None,
            protocol: decl
                .protocol
                .as_deref()
                .and_then(McpProtocol::from_name)
                .unwrap_or_default(),
            args: decl.args.clone(),
            env: decl.env.clone(),
            cwd: decl.cwd.as_ref().map(PathBuf::from),
            resident: decl.resident,
            timeout: Duration::from_millis(decl.timeout_ms),
        }
    }
}

#[cfg(all(test, feature = "profile"))]
mod tests {
    use super::*;

    #[test]
    fn the_default_timeout_is_the_profiles_default() {
        assert_eq!(
            DEFAULT_TIMEOUT,
            Duration::from_millis(McpServerDecl::DEFAULT_TIMEOUT_MS)
        );
    }
}

/// The OAuth configuration an `auth` declaration gives, if it names OAuth (feature
/// `profile`).
#[cfg(feature = "profile")]
fn oauth_from_decl(decl: &ishiki_core::profile::McpAuthDecl) -> Option<OAuthConfig> {
    use crate::auth::{ClientCredential, JwtAlgorithm, Secret};
    if let Some(oauth) = &decl.oauth {
        return Some(OAuthConfig::AuthorizationCode {
            client_id: oauth.client_id.clone(),
            client_secret: oauth.client_secret_env.clone().map(Secret::Env),
            client_metadata_url: oauth.client_metadata_url.clone(),
            scopes: oauth.scopes.clone(),
        });
    }
    let cc = decl.client_credentials.as_ref()?;
    let credential = match (&cc.client_secret_env, &cc.private_key_env) {
        (Some(var), _) => ClientCredential::Secret(Secret::Env(var.clone())),
        (None, Some(var)) => ClientCredential::PrivateKey {
            key: Secret::Env(var.clone()),
            algorithm: cc
                .algorithm
                .as_deref()
                .and_then(JwtAlgorithm::from_name)
                .unwrap_or(JwtAlgorithm::Es256),
        },
        (None, None) => return None,
    };
    Some(OAuthConfig::ClientCredentials {
        client_id: cc.client_id.clone(),
        credential,
        scopes: cc.scopes.clone(),
    })
}
