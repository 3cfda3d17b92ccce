//! One MCP server: a child process behind an rmcp client, started on demand, every request
//! under the server's timeout, stopped and restarted when it hangs or dies; its client follows
//! `notifications/tools/list_changed` so the tool list can be listed again
//! ([`McpServer::refresh_tools`]).

use std::collections::HashSet;
use std::fmt;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, CustomResult, ServerResult,
};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError};
use serde_json::Value;

use crate::auth::Authorizer;
use crate::client::{Client, ListChanges};
use crate::config::McpServerConfig;
use crate::elicit::Elicitor;
use crate::error::{McpError, McpErrorKind};
use crate::http;
use crate::names::ToolNames;
use crate::stderr::{StderrTail, lock, read_stderr, wait_for_stderr};
use crate::transport::{Broken, StdioTransport, undecodable_reason};

mod listing;
mod remote;
mod task;

use listing::{freshness, list_pages, stale_at};

/// What changed in a server's tool list between two listings, in the server's order.
#[derive(Debug, Clone, Default)]
pub struct ToolListChange {
    /// Tools that are new, or whose definition changed.
    pub added: Vec<rmcp::model::Tool>,
    /// Names (on the server, without the prefix) of tools that are gone.
    pub removed: Vec<String>,
}

impl ToolListChange {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

/// A running child with its client session.
struct Connection {
    service: RunningService<RoleClient, Client>,
    stderr: Arc<Mutex<StderrTail>>,
    /// Turns true when the child's stderr reaches its end (the child exited).
    stderr_done: tokio::sync::watch::Receiver<bool>,
    /// Why the transport closed the connection itself, if it did.
    broken: Broken,
}

impl Connection {
    fn is_dead(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    fn stop(&self) {
        // Cancelling ends the client task, which drops the transport and kills the child;
        // requests still waiting on this connection fail at once instead of at their timeout.
        self.service.cancellation_token().cancel();
    }
}

/// One MCP server: started by [`McpServer::start`], restarted on the next request after it
/// hung (timeout) or exited.
pub struct McpServer {
    config: McpServerConfig,
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    tools: Mutex<Vec<rmcp::model::Tool>>,
    starts: AtomicU64,
    changes: Arc<ListChanges>,
    duplicates: Mutex<Vec<String>>,
    /// The names given to tools, shared with the servers started alongside this one.
    names: Arc<ToolNames>,
    /// After a remote server could not be reached: when the next attempt may be made, the
    /// wait after that one fails, and why it failed (requests before then fail at once).
    retry: Mutex<Option<Retry>>,
    /// Who answers the server's elicitation requests; none: they are declined.
    elicitor: Option<Arc<dyn Elicitor>>,
    /// Who approves an OAuth sign-in; none: a server that asks for one fails to connect.
    #[cfg_attr(not(feature = "oauth"), allow(dead_code))]
    authorizer: Option<Arc<dyn Authorizer>>,
    /// The OAuth state, kept across connections (feature `oauth`).
    #[cfg(feature = "oauth")]
    oauth: tokio::sync::Mutex<Option<Arc<crate::oauth::Session>>>,
    /// Tools (names on the server) that refused a plain call: they are called as tasks
    /// (`task.rs`).
    task_tools: Mutex<HashSet<String>>,
    /// Sessions begun (a start that ended in a session).
    sessions: AtomicU64,
    /// When the last listing stops being fresh (its `ttlMs`), if it said.
    stale_at: Mutex<Option<tokio::time::Instant>>,
    /// The remote server was found to speak only HTTP+SSE: reconnects skip the probe.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    legacy_sse: std::sync::atomic::AtomicBool,
}

/// The backoff between attempts to reach a remote server that could not be reached.
#[derive(Debug, Clone)]
struct Retry {
    not_before: tokio::time::Instant,
    delay: Duration,
    error: McpError,
}

/// The first wait after a failed connect to a remote server, doubled per failure up to
/// [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_millis(500);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("config", &self.config)
            .field("starts", &self.starts())
            .finish_non_exhaustive()
    }
}

/// The most pages one listing may take.
pub const MAX_LIST_PAGES: usize = 100;
/// The most tools one listing may hold.
pub const MAX_LISTED_TOOLS: usize = 1000;
/// The most bytes one listing may hold, its tools measured as JSON over all pages.
pub const MAX_LIST_BYTES: usize = 16 * 1024 * 1024;

/// A request that took longer than the server's timeout.
pub(crate) struct TimedOut;

/// Why a request gave no usable answer.
enum Failure {
    /// rmcp's own error: a JSON-RPC error, a closed transport, an unexpected reply.
    Service(ServiceError),
    /// The answer broke a limit or the protocol; the connection itself is fine.
    Refused(String),
}

impl From<ServiceError> for Failure {
    fn from(e: ServiceError) -> Self {
        Failure::Service(e)
    }
}

/// One `tools/call`, its result in the wire shape. A result rmcp could not type (a content
/// block of a type it does not know) comes back as its raw JSON, which is still a tool
/// result; rmcp's `call_tool` would call it an "unexpected response".
async fn call_once(
    peer: &Peer<RoleClient>,
    params: CallToolRequestParams,
) -> Result<Value, Failure> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let unusable = |e: serde_json::Error| Failure::Refused(format!("cannot read the result: {e}"));
    match peer.send_request(request).await? {
        ServerResult::CallToolResult(result) => serde_json::to_value(&result).map_err(unusable),
        ServerResult::EmptyResult(_) => Ok(serde_json::json!({ "content": [] })),
        ServerResult::CustomResult(CustomResult(raw))
            if ["content", "structuredContent", "isError"]
                .iter()
                .any(|key| raw.get(key).is_some()) =>
        {
            Ok(raw)
        }
        _ => Err(Failure::Refused(
            "its reply is not a tool result (no `content`, `structuredContent` or `isError`)"
                .to_owned(),
        )),
    }
}

fn millis(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

impl McpServer {
    /// Starts the server and lists its tools; the handshake and the listing each run under the
    /// configured timeout.
    pub async fn start(config: McpServerConfig) -> Result<Arc<McpServer>, McpError> {
        McpServer::start_naming(config, Arc::default(), None, None).await
    }

    /// [`McpServer::start`] with `elicitor` answering the server's elicitation requests (the
    /// client then declares the capability).
    pub async fn start_with(
        config: McpServerConfig,
        elicitor: Arc<dyn Elicitor>,
    ) -> Result<Arc<McpServer>, McpError> {
        McpServer::start_naming(config, Arc::default(), Some(elicitor), None).await
    }

    /// [`McpServer::start`] with the embedder's `elicitor` and `authorizer` (who approves an
    /// OAuth sign-in, [`crate::OAuthConfig::AuthorizationCode`]).
    pub async fn start_authorized(
        config: McpServerConfig,
        elicitor: Option<Arc<dyn Elicitor>>,
        authorizer: Option<Arc<dyn Authorizer>>,
    ) -> Result<Arc<McpServer>, McpError> {
        McpServer::start_naming(config, Arc::default(), elicitor, authorizer).await
    }

    /// [`McpServer::start`], giving tool names from `names`, which the servers of one session
    /// share so that no two of their tools get the same name.
    pub(crate) async fn start_naming(
        config: McpServerConfig,
        names: Arc<ToolNames>,
        elicitor: Option<Arc<dyn Elicitor>>,
        authorizer: Option<Arc<dyn Authorizer>>,
    ) -> Result<Arc<McpServer>, McpError> {
        let server = Arc::new(McpServer {
            config,
            connection: tokio::sync::Mutex::new(None),
            tools: Mutex::new(Vec::new()),
            starts: AtomicU64::new(0),
            changes: Arc::new(ListChanges::default()),
            duplicates: Mutex::new(Vec::new()),
            names,
            retry: Mutex::new(None),
            elicitor,
            authorizer,
            #[cfg(feature = "oauth")]
            oauth: tokio::sync::Mutex::new(None),
            task_tools: Mutex::default(),
            sessions: AtomicU64::new(0),
            stale_at: Mutex::default(),
            legacy_sse: Default::default(),
        });
        let tools = server.list_unique().await?;
        *lock(&server.tools) = tools;
        Ok(server)
    }

    /// The server's configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// How many times the child process was started (1 after [`McpServer::start`]; each
    /// restart after a hang or exit adds one).
    pub fn starts(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
    }

    /// The tools as last listed (at start, or by [`McpServer::refresh_tools`]), in the
    /// server's order.
    pub fn listed_tools(&self) -> Vec<rmcp::model::Tool> {
        lock(&self.tools).clone()
    }

    /// Whether the tool list may have changed since it was last listed: the server sent
    /// `notifications/tools/list_changed`, it was restarted, or the last listing's `ttlMs`
    /// has passed.
    pub fn tools_changed(&self) -> bool {
        self.changes.pending.load(Ordering::SeqCst)
            || lock(&self.stale_at).is_some_and(|at| tokio::time::Instant::now() >= at)
    }

    /// Waits until [`McpServer::tools_changed`] is true (for event loops; bound it with a
    /// timeout of your own).
    pub async fn tools_change(&self) {
        while !self.tools_changed() {
            let stale_at = *lock(&self.stale_at);
            match stale_at {
                Some(at) => {
                    let _ = tokio::time::timeout_at(at, self.changes.notify.notified()).await;
                }
                None => self.changes.notify.notified().await,
            }
        }
    }

    /// Lists the tools again and returns what changed since the last listing, which becomes
    /// the new [`McpServer::listed_tools`]. Clears [`McpServer::tools_changed`] first, so a
    /// notification that arrives meanwhile is not lost. On error the old list stays.
    pub async fn refresh_tools(&self) -> Result<ToolListChange, McpError> {
        self.changes.pending.store(false, Ordering::SeqCst);
        let fresh = match self.list_unique().await {
            Ok(fresh) => fresh,
            Err(e) => {
                self.changes.mark();
                return Err(e);
            }
        };
        let mut old = lock(&self.tools);
        let added = fresh
            .iter()
            .filter(|t| !old.iter().any(|o| o == *t))
            .cloned()
            .collect();
        let removed = old
            .iter()
            .filter(|o| !fresh.iter().any(|t| t.name == o.name))
            .map(|o| o.name.to_string())
            .collect();
        *old = fresh;
        Ok(ToolListChange { added, removed })
    }

    /// Names the last listing gave more than once; only the first of each was kept (two
    /// tools with one name cannot be told apart when called).
    pub fn duplicate_names(&self) -> Vec<String> {
        lock(&self.duplicates).clone()
    }

    /// [`McpServer::list_tools`] with the second and later tools of one name left out (and
    /// remembered for [`McpServer::duplicate_names`]).
    async fn list_unique(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let listed = self.list_tools().await?;
        let mut seen = HashSet::new();
        let mut duplicates = Vec::new();
        let mut unique = Vec::with_capacity(listed.len());
        for tool in listed {
            if seen.insert(tool.name.clone()) {
                unique.push(tool);
            } else if !duplicates.iter().any(|d| *d == *tool.name) {
                duplicates.push(tool.name.to_string());
            }
        }
        *lock(&self.duplicates) = duplicates;
        Ok(unique)
    }

    pub(crate) fn names(&self) -> &ToolNames {
        &self.names
    }

    /// Stops the child process, if it runs; the next request starts it again.
    pub async fn stop(&self) {
        if let Some(connection) = self.connection.lock().await.take() {
            connection.stop();
        }
    }

    /// Lists every tool (all pages) from the running server, starting it when needed. One
    /// listing takes at most [`MAX_LIST_PAGES`] pages, [`MAX_LISTED_TOOLS`] tools and
    /// [`MAX_LIST_BYTES`] bytes, and a cursor that comes back ends it: a server that pages
    /// for ever fails with an error saying so, not by exhausting memory or the timeout.
    ///
    /// A listing that says how long it stays fresh (`ttlMs`) makes [`McpServer::tools_changed`]
    /// true once that time has passed, so the next [`crate::apply_tool_changes`] lists again;
    /// a `ttlMs` of 0 does so only for a server that announces no list changes.
    pub async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let connection = self.connection().await?;
        let outcome = self.bounded(list_pages(connection.service.peer())).await;
        let (tools, ttl) = self.finish(&connection, "tools/list", outcome).await?;
        // Declared, and not known to have nowhere to announce it (a listen stream down).
        let announces = connection
            .service
            .peer()
            .peer_info()
            .and_then(|info| info.capabilities.tools.as_ref()?.list_changed)
            == Some(true)
            && !self.changes.unheard.load(Ordering::SeqCst);
        let fresh = freshness(ttl, announces);
        *lock(&self.stale_at) = stale_at(tokio::time::Instant::now(), fresh);
        Ok(tools)
    }

    /// Calls `tool` (its name on the server, without the prefix) and returns the
    /// `CallToolResult` in its wire shape (`content`, `structuredContent`, `isError`).
    ///
    /// A tool failure is a successful answer with `isError: true`; `Err` means the server did
    /// not answer (timeout, exit), refused the request (JSON-RPC error) or answered with
    /// something that is no tool result. A result with content blocks rmcp does not know is
    /// still returned as the server sent it ([`crate::map_call_result`] names such blocks).
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<Value, McpError> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        match arguments {
            Value::Object(map) => params = params.with_arguments(map),
            Value::Null => {}
            other => {
                return Err(McpError::new(
                    McpErrorKind::Protocol,
                    self.name(),
                    format!(
                        "mcp server `{}`: the arguments of `{tool}` must be a JSON object, found {other}",
                        self.name()
                    ),
                ));
            }
        }
        let connection = self.connection().await?;
        let peer = connection.service.peer();
        let ttl = self.config.timeout;
        let as_task = lock(&self.task_tools).contains(tool);
        // Set once the server made a task of the call: past that, the deadline cuts a task
        // that runs long, not a server that hung.
        let created = AtomicBool::new(false);
        let outcome = self
            .bounded(async {
                if as_task {
                    return Ok(task::call_as_task(peer, params, ttl, &created).await?);
                }
                let first = call_once(peer, params.clone()).await;
                if !task::needs_task(&first) {
                    return first;
                }
                // A tool that must run as a task; a server that makes no task of it either
                // gets its first answer back.
                match task::call_as_task(peer, params, ttl, &created).await {
                    Ok(result) => {
                        lock(&self.task_tools).insert(tool.to_owned());
                        Ok(result)
                    }
                    Err(task::TaskFailure::NotCreated(_)) => first,
                    Err(task::TaskFailure::Failed(failure)) => Err(failure),
                }
            })
            .await;
        if outcome.is_err() && created.load(Ordering::SeqCst) {
            // The task's `tasks/cancel` went out as the call was cut; the session goes on.
            let name = self.name();
            return Err(McpError::new(
                McpErrorKind::Timeout,
                name,
                format!(
                    "mcp server `{name}` did not end the task of `{tool}` within {}; the task was cancelled",
                    millis(self.config.timeout)
                ),
            ));
        }
        let what = format!("`{tool}`");
        self.finish(&connection, &what, outcome).await
    }

    /// Turns a request's outcome into a result, stopping the connection when the server hung
    /// or died so the next request starts a fresh one.
    async fn finish<T>(
        &self,
        connection: &Arc<Connection>,
        what: &str,
        outcome: Result<Result<T, Failure>, TimedOut>,
    ) -> Result<T, McpError> {
        let result = self.outcome(connection, what, outcome).await;
        if self.config.url.is_none() {
            return result;
        }
        // A remote server's words may repeat a header or the token it was sent.
        let e = match result {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        let message = self
            .redact_tokens(http::redact(e.message(), &self.config))
            .await;
        Err(McpError::new(e.kind(), self.name(), message))
    }

    async fn outcome<T>(
        &self,
        connection: &Arc<Connection>,
        what: &str,
        outcome: Result<Result<T, Failure>, TimedOut>,
    ) -> Result<T, McpError> {
        let name = self.name();
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(Failure::Refused(reason))) => Err(McpError::new(
                McpErrorKind::BadReply,
                name,
                format!("mcp server `{name}` gave an unusable answer to {what}: {reason}"),
            )),
            Ok(Err(Failure::Service(ServiceError::McpError(e)))) => {
                Err(match undecodable_reason(&e) {
                    Some(reason) => McpError::new(
                        McpErrorKind::BadReply,
                        name,
                        format!(
                            "mcp server `{name}` sent a reply to {what} that cannot be decoded: {reason}"
                        ),
                    ),
                    None => McpError::new(
                        McpErrorKind::Protocol,
                        name,
                        format!("mcp server `{name}` refused {what}: {}", e.message),
                    ),
                })
            }
            Err(_) => {
                self.discard(connection).await;
                let tail = lock(&connection.stderr).quoted();
                Err(McpError::new(
                    McpErrorKind::Timeout,
                    name,
                    format!(
                        "mcp server `{name}` did not answer {what} within {}{tail}; it was stopped and restarts on the next call",
                        millis(self.config.timeout)
                    ),
                ))
            }
            Ok(Err(Failure::Service(e))) => {
                self.discard(connection).await;
                if let Some(reason) = lock(&connection.broken).clone() {
                    return Err(McpError::new(
                        McpErrorKind::BadReply,
                        name,
                        format!(
                            "mcp server `{name}` {reason} during {what}; it was stopped and restarts on the next call"
                        ),
                    ));
                }
                wait_for_stderr(connection.stderr_done.clone()).await;
                let tail = lock(&connection.stderr).quoted();
                let remote = self.config.url.is_some();
                let refused = self.auth_failure().await;
                let cause = match e {
                    // The HTTP+SSE transport's POST answered other than 2xx: its status.
                    #[cfg(feature = "http")]
                    ServiceError::TransportSend(ref sent)
                        if let Some(why) = crate::sse_transport::refused(sent) =>
                    {
                        why
                    }
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                        if let Some(why) = refused =>
                    {
                        format!("refused the client's authorization ({why})")
                    }
                    ServiceError::TransportClosed | ServiceError::TransportSend(_) if remote => {
                        "stopped answering (its connection failed or closed)".to_owned()
                    }
                    ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                        "exited or closed its output".to_owned()
                    }
                    other if remote => {
                        let text = other.to_string();
                        format!(
                            "failed ({})",
                            http::redact(http::plain(&text), &self.config)
                        )
                    }
                    other => format!("failed ({other})"),
                };
                let next = if remote {
                    "it is connected again on the next call"
                } else {
                    "it restarts on the next call"
                };
                Err(McpError::new(
                    McpErrorKind::Closed,
                    name,
                    format!("mcp server `{name}` {cause} during {what}{tail}; {next}"),
                ))
            }
        }
    }

    async fn discard(&self, connection: &Arc<Connection>) {
        connection.stop();
        let mut slot = self.connection.lock().await;
        if slot.as_ref().is_some_and(|c| Arc::ptr_eq(c, connection)) {
            *slot = None;
        }
    }

    /// The live connection, started (or restarted) when there is none.
    async fn connection(&self) -> Result<Arc<Connection>, McpError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            if !connection.is_dead() {
                return Ok(connection.clone());
            }
            connection.stop();
            *slot = None;
        }
        let Some(url) = self.config.url.as_deref() else {
            let connection = Arc::new(self.spawn().await?);
            *slot = Some(connection.clone());
            return Ok(connection);
        };
        let waited = lock(&self.retry).clone();
        if let Some(retry) = &waited {
            let left = retry
                .not_before
                .saturating_duration_since(tokio::time::Instant::now());
            if !left.is_zero() {
                return Err(McpError::new(
                    retry.error.kind(),
                    self.name(),
                    format!(
                        "{}; the next attempt is in {}",
                        retry.error.message(),
                        millis(left)
                    ),
                ));
            }
        }
        match self.connect_http(url).await {
            Ok(connection) => {
                *lock(&self.retry) = None;
                let connection = Arc::new(connection);
                *slot = Some(connection.clone());
                Ok(connection)
            }
            Err(error) => {
                let delay =
                    waited.map_or(FIRST_RETRY_DELAY, |r| (r.delay * 2).min(MAX_RETRY_DELAY));
                *lock(&self.retry) = Some(Retry {
                    not_before: tokio::time::Instant::now() + delay,
                    delay,
                    error: error.clone(),
                });
                Err(error)
            }
        }
    }

    /// Starts the child and its session in the configured revision of MCP: with
    /// [`crate::McpProtocol::Auto`], a child that refuses `initialize` is started again for
    /// `server/discover`.
    async fn spawn(&self) -> Result<Connection, McpError> {
        self.in_revision(|mode| self.spawn_once(mode)).await
    }

    /// A session made by `start` in the configured revision of MCP: with
    /// [`crate::McpProtocol::Auto`], when the server refuses `initialize` (`start`'s error
    /// says so), `start` runs again for `server/discover`.
    async fn in_revision<F, Fut>(&self, mut start: F) -> Result<Connection, McpError>
    where
        F: FnMut(rmcp::ClientLifecycleMode) -> Fut,
        Fut: Future<Output = Result<Connection, (McpError, bool)>>,
    {
        let mut attempt = 0;
        let mut first = None;
        loop {
            // Attempt 0 always has a mode, and a later one is only made when it has one.
            let mode = crate::client::lifecycle(self.config.protocol, attempt)
                .unwrap_or(rmcp::ClientLifecycleMode::Initialize);
            match start(mode).await {
                Ok(connection) => return Ok(connection),
                Err((error, true))
                    if crate::client::lifecycle(self.config.protocol, attempt + 1).is_some() =>
                {
                    first = Some(error);
                    attempt += 1;
                }
                // When `server/discover` fails too, the refused `initialize` says more.
                Err((error, _)) => return Err(first.unwrap_or(error)),
            }
        }
    }

    /// The client side of a new session with this server: its list changes and elicitor.
    fn handler(&self) -> Client {
        Client {
            changes: self.changes.clone(),
            server: self.config.name.clone(),
            elicitor: self.elicitor.clone(),
        }
    }

    /// What every new session does: a restarted server may list other tools than before, and
    /// a `2026-07-28` one announces changes only on the listen stream this opens.
    fn on_started(&self, service: &RunningService<RoleClient, Client>, modern: bool) {
        // A session after the first may face another tool list. Counted per session, not per
        // start: a server that refused `initialize` and then took `server/discover` was
        // started twice for one session.
        if self.sessions.fetch_add(1, Ordering::Relaxed) > 0 {
            self.changes.mark();
        }
        if modern {
            crate::client::follow_list_changes(service.peer().clone(), self.changes.clone());
        }
    }

    /// One start in `mode`; the error says whether the server refused `initialize`.
    async fn spawn_once(
        &self,
        mode: rmcp::ClientLifecycleMode,
    ) -> Result<Connection, (McpError, bool)> {
        let name = self.name();
        let modern = matches!(mode, rmcp::ClientLifecycleMode::Discover { .. });
        let config = &self.config;
        let mut command = tokio::process::Command::new(&config.command);
        // Killed with its handle even if no runtime is left to run rmcp's async cleanup.
        command
            .args(&config.args)
            .envs(&config.env)
            .kill_on_drop(true);
        if let Some(cwd) = &config.cwd {
            command.current_dir(cwd);
        }
        let shown = std::iter::once(config.command.as_str())
            .chain(config.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let broken = Broken::default();
        let transport = command
            .spawn()
            .and_then(|mut child| {
                let stderr = child.stderr.take();
                Ok((StdioTransport::new(child, broken.clone())?, stderr))
            })
            .map_err(|e| {
                let error = McpError::new(
                    McpErrorKind::Start,
                    name,
                    format!("mcp server `{name}` failed to start: cannot run `{shown}`: {e}"),
                );
                (error, false)
            });
        let (transport, stderr) = transport?;
        self.starts.fetch_add(1, Ordering::Relaxed);
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        let (done_tx, done_rx) = tokio::sync::watch::channel(stderr.is_none());
        if let Some(stderr) = stderr {
            let tail = tail.clone();
            tokio::spawn(async move {
                read_stderr(stderr, &tail).await;
                let _ = done_tx.send(true);
            });
        }
        let client = self.handler();
        let started = self
            .bounded(rmcp::ClientServiceExt::serve_with_lifecycle(
                client, transport, mode,
            ))
            .await;
        let mut refused = false;
        let cause = match started {
            Ok(Ok(service)) => {
                self.on_started(&service, modern);
                return Ok(Connection {
                    service,
                    stderr: tail,
                    stderr_done: done_rx,
                    broken,
                });
            }
            Ok(Err(e)) => {
                refused = crate::client::refused_initialize(&e);
                format!("the initialize handshake failed: {e}")
            }
            Err(_) => format!("no answer to initialize within {}", millis(config.timeout)),
        };
        // The failed transport is gone and the child with it: read its stderr to the end (a
        // bounded wait, on the failure path only) so the error says why it stopped.
        wait_for_stderr(done_rx).await;
        let quoted = lock(&tail).quoted();
        let error = McpError::new(
            McpErrorKind::Start,
            name,
            format!("mcp server `{name}` failed to start (`{shown}`): {cause}{quoted}"),
        );
        Err((error, refused))
    }
}
