//! `ishiki-mcp`: the tools of any MCP server join Ishiki's tool pool.
//!
//! Each server ([`McpServerConfig`], or declared under a profile's `mcp.servers.<name>`) runs
//! as a child process speaking MCP over stdio (the official Rust SDK `rmcp`, on this crate's
//! own bounded stdio transport), or, declared with `url`, is a remote server reached over
//! Streamable HTTP (rmcp's client worker with Ishiki's limits: every reply and SSE event at
//! most 16 MiB, no redirects, headers and a bearer token from the environment, redacted from
//! every error; an unreachable server is tried again after a backoff) or the older HTTP+SSE
//! transport of MCP `2024-11-05` ([`McpTransport`]: this crate's own client, the stream as
//! bounded, its `endpoint` kept to the configured origin; chosen by `transport: sse`, or when
//! the `initialize` POST is answered 400, 404 or 405 without a JSON-RPC error). The client names itself
//! `ishiki` and speaks both revisions of MCP in use ([`McpProtocol`]): `2025-11-25` with the
//! `initialize` handshake, and the stateless `2026-07-28` (`server/discover`, list changes on a
//! `subscriptions/listen` stream) with a server that refuses it or is pinned to it. Its tools become [`ishiki_tool::Tool`]s named
//! `<name>_<tool>`, with origin `mcp:<name>`, deferred to the toolsearch pool unless the server
//! is `resident`. Register them on a runtime builder with `.tool(t)`.
//!
//! The crate needs the tool contract (`ishiki-tool`) and rmcp, not the runtime. Three features
//! add what not every embedder needs:
//!
//! - `http`: remote servers (Streamable HTTP and HTTP+SSE on reqwest and rustls, about 150
//!   crates more).
//!   Without it a server with a `url` fails to connect, saying that the feature is off.
//! - `oauth`: OAuth 2.1 for remote servers ([`OAuthConfig`] on rmcp's `auth`; implies
//!   `http`): sign-in by a person through the embedder's [`Authorizer`] (authorization code
//!   with PKCE, a pre-registered, URL-named or self-registered client), client credentials
//!   (a secret or a `private_key_jwt` assertion) and enterprise-managed exchange. The flow runs
//!   when the server answers 401; a 403 `insufficient_scope` steps up; tokens are refreshed,
//!   kept in memory or an owner-only token directory ([`McpServerConfig::token_dir`]) and
//!   redacted from every error.
//! - `profile`: `McpServerConfig::from_profile` and `McpServerConfig::from_decl`, the
//!   servers as an Ishiki profile declares them (this takes `ishiki-core`).
//!
//! - Names are injective across the servers of one [`connect_all`]/[`start_all`]: when
//!   `<name>_<tool>` is taken (servers `a` with tool `b_c` and `a_b` with tool `c`), the later
//!   tool becomes `<name>__<tool>` and its description says why; whitespace and control
//!   characters in a tool name become `_`. A tool with an empty name, a name listed twice (the
//!   first is kept) or an input schema that is too large is left out with an error of kind
//!   [`McpErrorKind::InvalidTool`]; the server's other tools are offered. The runtime compiles
//!   input schemas (one place for every tool); [`server_tools_checked`] with
//!   `ishiki_core::check_tool` leaves out one that does not compile instead of failing the
//!   build.
//! - A direct call shows the model the result's content blocks ([`model_result`]): text as
//!   text, image/audio and blob resources as media the outlet archives, `text/*` blobs and
//!   embedded text resources as text, resource links as their URI; a block whose audience is
//!   only the user is left out, and a block of a type Ishiki does not know becomes a note. This
//!   holds with an output schema too, so images are never dropped for `structuredContent`.
//! - A program calls the tool's program view, whose raw result is the same content array (so
//!   `shot[1]` is an image block `{type: "image", mimeType, data}`), or `structuredContent`
//!   when the tool declares an output schema ([`map_call_result`]).
//! - A result with `isError: true` is a tool error whose message is the result's text.
//! - Everything read from a server is bounded: one message at most 16 MiB (a longer one stops
//!   the server with an error saying so), one stderr line at most 300 characters (the rest is
//!   skipped, never buffered), one tool listing at most [`MAX_LIST_PAGES`] pages,
//!   [`MAX_LISTED_TOOLS`] tools and [`MAX_LIST_BYTES`] bytes, and a cursor that comes back ends
//!   it; a reply that cannot be decoded (nested deeper than 128 levels) fails its request with
//!   an error of kind [`McpErrorKind::BadReply`] that says so.
//! - Every request (start, listing, call) runs under the server's timeout. A server that times
//!   out or exits is stopped, its tools answer with an error naming it, and the next call
//!   starts it again; other servers and the runtime go on.
//! - A server that fails to start is reported by [`connect_all`]; the others still connect.
//! - A server's tool list may change mid-session: its client follows
//!   `notifications/tools/list_changed`, and [`apply_tool_changes`] (call it before each
//!   request, with the servers from [`start_all`] and the runtime, or any
//!   [`ishiki_tool::ToolSet`]) lists the tools again, adds new ones to the runtime (announced in the next catalog delta) and removes the ones that are gone
//!   (announced as no longer available; calling one fails with a clear error).
//!
//! - A server may ask the person for input mid-call (elicitation): an embedder that gives an
//!   [`Elicitor`] ([`start_all_with`], [`McpServer::start_with`]) answers forms and URLs, and
//!   fields left out take the schema's defaults ([`apply_defaults`]); without one the
//!   capability is not declared and every request is declined.
//!
//! Dropping the last handle to a server stops its child process; do it inside a tokio runtime.
//!
//! # Example
//!
//! Connect the servers a profile declares (feature `profile`) and register their tools (this
//! starts `node`, so it is not run here):
//!
//! ```no_run
//! # #[cfg(feature = "profile")] mod profile {
//! use ishiki_core::{assemble, ModelsDoc, Profile, Runtime};
//! use ishiki_mcp::{connect_all_checked, McpServerConfig};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let profile = Profile::from_yaml(
//!     "toolsearch: { enable: true }\n\
//!      mcp:\n  servers:\n    everything:\n      command: node\n      \
//!      args: [node_modules/@modelcontextprotocol/server-everything/dist/index.js, stdio]\n      \
//!      timeoutMs: 10000\n",
//! )?;
//! let configs = McpServerConfig::from_profile(&profile);
//! let models = ModelsDoc::from_yaml("models:\n  main: { input: [text, image] }\n")?;
//! let assembly = assemble(profile, models, "main")?;
//!
//! // Each tool checked as the runtime will check it: one whose schema does not compile is
//! // left out with an error, instead of failing the build below.
//! let (tools, errors) = connect_all_checked(&configs, ishiki_core::check_tool).await;
//! for error in &errors {
//!     eprintln!("{error}"); // e.g. "mcp server `everything` failed to start (…)"
//! }
//! let mut builder = Runtime::builder(assembly, "state");
//! for tool in tools {
//!     builder = builder.tool(tool); // `everything_get-tiny-image`, …
//! }
//! let runtime = builder.build().await?;
//! # drop(runtime);
//! # Ok(())
//! # }
//! # }
//! ```
//!
//! The mapping itself is a pure function:
//!
//! ```
//! use ishiki_mcp::{ResultShape, map_call_result};
//! use serde_json::json;
//!
//! let shot = json!({ "content": [
//!     { "type": "text", "text": "Here's the image you requested:" },
//!     { "type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo=" }
//! ]});
//! let raw = map_call_result(&shot, ResultShape::Content).unwrap();
//! assert_eq!(raw[1]["mimeType"], "image/png");
//!
//! let failed = json!({ "isError": true, "content": [{ "type": "text", "text": "no such file" }] });
//! assert_eq!(map_call_result(&failed, ResultShape::Content).unwrap_err().message(), "no such file");
//! ```

mod auth;
mod client;
mod config;
mod elicit;
mod error;
mod http;
mod names;
#[cfg(feature = "oauth")]
mod oauth;
mod result;
mod server;
#[cfg(feature = "http")]
mod sse;
#[cfg(feature = "http")]
mod sse_transport;
mod stderr;
mod tool;
mod transport;

use std::sync::Arc;

pub use auth::{
    Authorizer, ClientCredential, DEFAULT_APPROVAL_TIME, JwtAlgorithm, OAuthConfig, Secret,
};
pub use config::{DEFAULT_TIMEOUT, McpProtocol, McpServerConfig, McpTransport};
pub use elicit::{AcceptDefaults, ElicitAnswer, ElicitRequest, Elicitor, apply_defaults};
pub use error::{McpError, McpErrorKind};
#[cfg(feature = "oauth")]
pub use oauth::{HeadlessAuthorizer, LoopbackAuthorizer, ShowUrl};
pub use result::{ResultShape, map_call_result, model_result};
pub use server::{MAX_LIST_BYTES, MAX_LIST_PAGES, MAX_LISTED_TOOLS, McpServer, ToolListChange};
pub use tool::{
    McpTool, ToolsDelta, apply_tool_changes, server_tools, server_tools_checked, sync_tools,
};

/// Starts every server (concurrently) and returns their tools, in config order, with one error
/// per server that failed to start and per tool left out. A failed server or tool does not
/// stop the others; tool names are given in config order, so the same configuration gives the
/// same names. The input schemas are not compiled here (see [`server_tools`]):
/// [`connect_all_checked`] with `ishiki_core::check_tool` leaves out a tool whose schema would
/// make the runtime's build fail.
pub async fn connect_all(
    configs: &[McpServerConfig],
) -> (Vec<Arc<dyn ishiki_tool::Tool>>, Vec<McpError>) {
    connect_all_checked(configs, |_| Ok::<(), String>(())).await
}

/// [`connect_all`] with `check` run on every tool ([`server_tools_checked`]).
pub async fn connect_all_checked<E: std::fmt::Display>(
    configs: &[McpServerConfig],
    check: impl Fn(&dyn ishiki_tool::Tool) -> Result<(), E>,
) -> (Vec<Arc<dyn ishiki_tool::Tool>>, Vec<McpError>) {
    let (servers, mut errors) = start_all(configs).await;
    let mut tools = Vec::new();
    for server in &servers {
        let (server_tools, tool_errors) = server_tools_checked(server, &check);
        tools.extend(server_tools);
        errors.extend(tool_errors);
    }
    (tools, errors)
}

/// Starts every server concurrently; the servers that started, in config order, and an error
/// for each that did not. The servers share one naming, so their tools get distinct names.
pub async fn start_all(configs: &[McpServerConfig]) -> (Vec<Arc<McpServer>>, Vec<McpError>) {
    start_all_with(configs, None).await
}

/// [`start_all`] with `elicitor` answering every server's elicitation requests (none: they
/// are declined and the capability is not declared).
pub async fn start_all_with(
    configs: &[McpServerConfig],
    elicitor: Option<Arc<dyn Elicitor>>,
) -> (Vec<Arc<McpServer>>, Vec<McpError>) {
    start_all_authorized(configs, elicitor, None).await
}

/// [`start_all_with`] with `authorizer` approving the OAuth sign-ins of servers configured
/// for the authorization-code flow (none: such a server fails to connect, saying so).
pub async fn start_all_authorized(
    configs: &[McpServerConfig],
    elicitor: Option<Arc<dyn Elicitor>>,
    authorizer: Option<Arc<dyn Authorizer>>,
) -> (Vec<Arc<McpServer>>, Vec<McpError>) {
    let mut set = tokio::task::JoinSet::new();
    let names = Arc::new(names::ToolNames::default());
    for (index, config) in configs.iter().enumerate() {
        let config = config.clone();
        let names = names.clone();
        let elicitor = elicitor.clone();
        let authorizer = authorizer.clone();
        set.spawn(async move {
            (
                index,
                McpServer::start_naming(config, names, elicitor, authorizer).await,
            )
        });
    }
    let mut outcomes = Vec::new();
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok(outcome) => outcomes.push(outcome),
            // A start task only panics on a bug; report it rather than lose the server.
            Err(e) => outcomes.push((
                usize::MAX,
                Err(McpError::new(
                    McpErrorKind::Start,
                    "",
                    format!("an mcp server start task failed: {e}"),
                )),
            )),
        }
    }
    outcomes.sort_by_key(|(index, _)| *index);
    let mut servers = Vec::new();
    let mut errors = Vec::new();
    for (_, outcome) in outcomes {
        match outcome {
            Ok(server) => servers.push(server),
            Err(e) => errors.push(e),
        }
    }
    (servers, errors)
}
