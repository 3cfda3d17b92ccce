//! How to start one server: from the profile's `mcp.servers` or built in code.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use ishiki_core::{McpServerDecl, Profile};

/// The default limit: the profile's `timeoutMs` default ([`McpServerDecl::DEFAULT_TIMEOUT_MS`]),
/// defined there once.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(McpServerDecl::DEFAULT_TIMEOUT_MS);

/// How to start one MCP server over stdio, and how its tools join the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The server's name: tools are named `<name>_<tool>` with origin `mcp:<name>`.
    pub name: String,
    /// The program to run (looked up on `PATH` when it has no slash).
    pub command: String,
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
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            resident: false,
            timeout: DEFAULT_TIMEOUT,
        }
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

    /// The servers a profile declares under `mcp.servers`, in name order.
    pub fn from_profile(profile: &Profile) -> Vec<McpServerConfig> {
        profile
            .mcp
            .servers
            .iter()
            .map(|(name, decl)| McpServerConfig::from_decl(name, decl))
            .collect()
    }

    /// The server `name` as the profile declares it: the one place a declaration (YAML's
    /// strings and milliseconds) becomes a configuration (paths and a [`Duration`]).
    pub fn from_decl(name: &str, decl: &McpServerDecl) -> McpServerConfig {
        McpServerConfig {
            name: name.to_owned(),
            command: decl.command.clone(),
            args: decl.args.clone(),
            env: decl.env.clone(),
            cwd: decl.cwd.as_ref().map(PathBuf::from),
            resident: decl.resident,
            timeout: Duration::from_millis(decl.timeout_ms),
        }
    }
}
