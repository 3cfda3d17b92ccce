//! One MCP server: a child process behind an rmcp client, started on demand, every request
//! under the server's timeout, stopped and restarted when it hangs or dies; its client follows
//! `notifications/tools/list_changed` so the tool list can be listed again
//! ([`McpServer::refresh_tools`]).

use std::collections::VecDeque;
use std::fmt;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{
    MaybeSendFuture, NotificationContext, RoleClient, RunningService, ServiceError, ServiceExt,
};
use rmcp::transport::TokioChildProcess;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::config::McpServerConfig;
use crate::error::{McpError, McpErrorKind};

/// The last lines a server wrote to stderr, quoted in errors about it.
#[derive(Debug, Default)]
struct StderrTail {
    lines: VecDeque<String>,
}

const STDERR_LINES: usize = 5;
const STDERR_LINE_CHARS: usize = 300;
/// How long a failed start waits for the child's last stderr lines.
const STDERR_GRACE: Duration = Duration::from_millis(500);

impl StderrTail {
    fn push(&mut self, line: &str) {
        let line: String = line.trim_end().chars().take(STDERR_LINE_CHARS).collect();
        if line.is_empty() {
            return;
        }
        if self.lines.len() == STDERR_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    fn quoted(&self) -> String {
        if self.lines.is_empty() {
            String::new()
        } else {
            let lines: Vec<&str> = self.lines.iter().map(String::as_str).collect();
            format!(" (its stderr ends: {})", lines.join(" | "))
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether the server said its tool list changed since the list was last read.
#[derive(Debug, Default)]
struct ListChanges {
    pending: AtomicBool,
    notify: tokio::sync::Notify,
}

impl ListChanges {
    fn mark(&self) {
        self.pending.store(true, Ordering::SeqCst);
        // A stored permit wakes a waiter that arrives later, too.
        self.notify.notify_one();
    }
}

/// The client side of a connection: the rmcp defaults, plus following
/// `notifications/tools/list_changed` (rmcp also drops its cached `tools/list` then).
#[derive(Debug, Clone)]
struct Client {
    changes: Arc<ListChanges>,
}

impl ClientHandler for Client {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.changes.mark();
        std::future::ready(())
    }
}

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
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("config", &self.config)
            .field("starts", &self.starts())
            .finish_non_exhaustive()
    }
}

/// Waits (boundedly, on failure paths only) until a stopped child's stderr is read to its end,
/// so an error can quote why it stopped.
async fn wait_for_stderr(mut done: tokio::sync::watch::Receiver<bool>) {
    let _ = tokio::time::timeout(STDERR_GRACE, done.wait_for(|done| *done)).await;
}

fn millis(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

impl McpServer {
    /// Starts the server and lists its tools; the handshake and the listing each run under the
    /// configured timeout.
    pub async fn start(config: McpServerConfig) -> Result<Arc<McpServer>, McpError> {
        let server = Arc::new(McpServer {
            config,
            connection: tokio::sync::Mutex::new(None),
            tools: Mutex::new(Vec::new()),
            starts: AtomicU64::new(0),
            changes: Arc::new(ListChanges::default()),
        });
        let tools = server.list_tools().await?;
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
    /// `notifications/tools/list_changed`, or it was restarted.
    pub fn tools_changed(&self) -> bool {
        self.changes.pending.load(Ordering::SeqCst)
    }

    /// Waits until [`McpServer::tools_changed`] is true (for event loops; bound it with a
    /// timeout of your own).
    pub async fn tools_change(&self) {
        while !self.tools_changed() {
            self.changes.notify.notified().await;
        }
    }

    /// Lists the tools again and returns what changed since the last listing, which becomes
    /// the new [`McpServer::listed_tools`]. Clears [`McpServer::tools_changed`] first, so a
    /// notification that arrives meanwhile is not lost. On error the old list stays.
    pub async fn refresh_tools(&self) -> Result<ToolListChange, McpError> {
        self.changes.pending.store(false, Ordering::SeqCst);
        let fresh = match self.list_tools().await {
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

    /// Stops the child process, if it runs; the next request starts it again.
    pub async fn stop(&self) {
        if let Some(connection) = self.connection.lock().await.take() {
            connection.stop();
        }
    }

    /// Lists every tool (all pages) from the running server, starting it when needed.
    pub async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>, McpError> {
        let connection = self.connection().await?;
        let outcome =
            tokio::time::timeout(self.config.timeout, connection.service.list_all_tools()).await;
        self.finish(&connection, "tools/list", outcome).await
    }

    /// Calls `tool` (its name on the server, without the prefix) and returns the
    /// `CallToolResult` in its wire shape (`content`, `structuredContent`, `isError`).
    ///
    /// A tool failure is a successful answer with `isError: true`; `Err` means the server did
    /// not answer (timeout, exit) or refused the request (JSON-RPC error).
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
        let outcome =
            tokio::time::timeout(self.config.timeout, connection.service.call_tool(params)).await;
        let what = format!("`{tool}`");
        let result = self.finish(&connection, &what, outcome).await?;
        serde_json::to_value(&result).map_err(|e| {
            McpError::new(
                McpErrorKind::Protocol,
                self.name(),
                format!("mcp server `{}`: cannot read the result: {e}", self.name()),
            )
        })
    }

    /// Turns a request's outcome into a result, stopping the connection when the server hung
    /// or died so the next request starts a fresh one.
    async fn finish<T>(
        &self,
        connection: &Arc<Connection>,
        what: &str,
        outcome: Result<Result<T, ServiceError>, tokio::time::error::Elapsed>,
    ) -> Result<T, McpError> {
        let name = self.name();
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(ServiceError::McpError(e))) => Err(McpError::new(
                McpErrorKind::Protocol,
                name,
                format!("mcp server `{name}` refused {what}: {}", e.message),
            )),
            Err(_) => {
                self.discard(connection).await;
                Err(McpError::new(
                    McpErrorKind::Timeout,
                    name,
                    format!(
                        "mcp server `{name}` did not answer {what} within {} (a reply over 16 MiB also ends this way); it was stopped and restarts on the next call",
                        millis(self.config.timeout)
                    ),
                ))
            }
            Ok(Err(e)) => {
                self.discard(connection).await;
                wait_for_stderr(connection.stderr_done.clone()).await;
                let tail = lock(&connection.stderr).quoted();
                let cause = match e {
                    ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                        "exited or closed its output".to_owned()
                    }
                    other => format!("failed ({other})"),
                };
                Err(McpError::new(
                    McpErrorKind::Closed,
                    name,
                    format!(
                        "mcp server `{name}` {cause} during {what}{tail}; it restarts on the next call"
                    ),
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
        let connection = Arc::new(self.spawn().await?);
        *slot = Some(connection.clone());
        Ok(connection)
    }

    async fn spawn(&self) -> Result<Connection, McpError> {
        let name = self.name();
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
        let (transport, stderr) = TokioChildProcess::builder(command)
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                McpError::new(
                    McpErrorKind::Start,
                    name,
                    format!("mcp server `{name}` failed to start: cannot run `{shown}`: {e}"),
                )
            })?;
        self.starts.fetch_add(1, Ordering::Relaxed);
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        let (done_tx, done_rx) = tokio::sync::watch::channel(stderr.is_none());
        if let Some(stderr) = stderr {
            let tail = tail.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    lock(&tail).push(&line);
                }
                let _ = done_tx.send(true);
            });
        }
        let client = Client {
            changes: self.changes.clone(),
        };
        let started = tokio::time::timeout(config.timeout, client.serve(transport)).await;
        let cause = match started {
            Ok(Ok(service)) => {
                if self.starts() > 1 {
                    // A restarted server may list other tools than before.
                    self.changes.mark();
                }
                return Ok(Connection {
                    service,
                    stderr: tail,
                    stderr_done: done_rx,
                });
            }
            Ok(Err(e)) => format!("the initialize handshake failed: {e}"),
            Err(_) => format!("no answer to initialize within {}", millis(config.timeout)),
        };
        // The failed transport is gone and the child with it: read its stderr to the end (a
        // bounded wait, on the failure path only) so the error says why it stopped.
        wait_for_stderr(done_rx).await;
        let quoted = lock(&tail).quoted();
        Err(McpError::new(
            McpErrorKind::Start,
            name,
            format!("mcp server `{name}` failed to start (`{shown}`): {cause}{quoted}"),
        ))
    }
}
