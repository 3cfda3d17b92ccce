//! The client side of one connection: how Ishiki names itself (`ishiki`), which revision it
//! speaks (`lifecycle`), following tool list changes (`notifications/tools/list_changed`, or
//! the `subscriptions/listen` stream of a `2026-07-28` session), and passing elicitation to
//! the embedder's [`Elicitor`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, FormElicitationCapability, Implementation, ProtocolVersion,
    UrlElicitationCapability,
};
use rmcp::service::{MaybeSendFuture, NotificationContext, RequestContext, RoleClient};
use serde_json::Value;

use crate::config::McpProtocol;
use crate::elicit::{ElicitAnswer, ElicitRequest, Elicitor, apply_defaults};

/// Whether the server said its tool list changed since the list was last read.
#[derive(Debug, Default)]
pub(crate) struct ListChanges {
    pub(crate) pending: AtomicBool,
    pub(crate) notify: tokio::sync::Notify,
    /// The `subscriptions/listen` stream of a `2026-07-28` session is known not to be open
    /// (it ended, failed, or the server does not know the method): nothing would announce a
    /// change, so a listing's `ttlMs` of 0 counts again (`listing::freshness`).
    pub(crate) unheard: AtomicBool,
}

impl ListChanges {
    pub(crate) fn mark(&self) {
        self.pending.store(true, Ordering::SeqCst);
        // A stored permit wakes a waiter that arrives later, too.
        self.notify.notify_one();
    }
}

/// The client side of a connection: the rmcp defaults, plus following
/// `notifications/tools/list_changed` (rmcp also drops its cached `tools/list` then) and
/// passing elicitation to the embedder's [`Elicitor`], when it gave one.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) changes: Arc<ListChanges>,
    pub(crate) server: String,
    pub(crate) elicitor: Option<Arc<dyn Elicitor>>,
}

/// The protocol revision Ishiki asks for: the newest one with an `initialize` handshake, which
/// the servers in use speak (the stateless 2026-07-28 revision is not spoken yet).
pub(crate) const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// How Ishiki names itself to servers; elicitation (form and URL) is declared when an
/// embedder answers it.
pub(crate) fn client_info(elicitation: bool) -> ClientConfig {
    let mut capabilities = ClientCapabilities::default();
    if elicitation {
        let mut declared = ElicitationCapability::default();
        declared.form = Some(FormElicitationCapability::default());
        declared.url = Some(UrlElicitationCapability::default());
        capabilities.elicitation = Some(declared);
    }
    ClientConfig::new(
        capabilities,
        Implementation::new("ishiki", env!("CARGO_PKG_VERSION")).with_title("Ishiki"),
    )
    .with_protocol_version(PROTOCOL_VERSION)
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        client_info(self.elicitor.is_some())
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let Some(elicitor) = &self.elicitor else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let server = self.server.clone();
        let (asked, schema) = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => {
                let schema = serde_json::to_value(&requested_schema).unwrap_or_default();
                let asked = ElicitRequest::Form {
                    server,
                    message,
                    schema: schema.clone(),
                };
                (asked, Some(schema))
            }
            ElicitRequestParams::UrlElicitationParams { message, url, .. } => (
                ElicitRequest::Url {
                    server,
                    message,
                    url,
                },
                None,
            ),
            _ => return Ok(ElicitResult::new(ElicitationAction::Decline)),
        };
        Ok(match elicitor.elicit(asked).await {
            ElicitAnswer::Accept(mut content) => {
                if let Some(schema) = &schema {
                    apply_defaults(schema, &mut content);
                }
                let accepted = ElicitResult::new(ElicitationAction::Accept);
                if schema.is_some() {
                    accepted.with_content(Value::Object(content))
                } else {
                    accepted
                }
            }
            ElicitAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
            _ => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.changes.mark();
        std::future::ready(())
    }
}

/// How a session starts: `attempt` 0 is the first try, 1 the one after the server refused
/// the `initialize` handshake (only [`McpProtocol::Auto`] has one).
pub(crate) fn lifecycle(protocol: McpProtocol, attempt: u8) -> Option<rmcp::ClientLifecycleMode> {
    let discover = || rmcp::ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    match (protocol, attempt) {
        (McpProtocol::Auto | McpProtocol::V2025_11_25, 0) => {
            Some(rmcp::ClientLifecycleMode::Initialize)
        }
        (McpProtocol::V2026_07_28, 0) | (McpProtocol::Auto, 1) => Some(discover()),
        _ => None,
    }
}

/// Whether a failed start is the server refusing the `initialize` handshake itself (it does
/// not know the method, or not that revision), after which [`McpProtocol::Auto`] tries
/// `server/discover`. Any other failure (an internal error, a crash, a refused token) is the
/// start's own and is reported as it is.
pub(crate) fn refused_initialize(error: &rmcp::service::ClientInitializeError) -> bool {
    use rmcp::model::ErrorCode;
    match error {
        rmcp::service::ClientInitializeError::JsonRpcError(e) => matches!(
            e.code,
            ErrorCode::METHOD_NOT_FOUND
                | ErrorCode::INVALID_PARAMS
                | ErrorCode::INVALID_REQUEST
                | ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        ),
        _ => false,
    }
}

/// The wait before a `subscriptions/listen` stream that ended is opened again; doubled after
/// each stream that ended soon, up to [`LISTEN_RETRY_MAX`].
const LISTEN_RETRY_FIRST: Duration = Duration::from_secs(1);
/// The longest wait before a stream is opened again; a stream that lived this long starts
/// the waits over.
const LISTEN_RETRY_MAX: Duration = Duration::from_secs(30);

/// Opens the `subscriptions/listen` stream of a `2026-07-28` session, on which such a server
/// announces tool list changes (it sends them nowhere else), and marks `changes` for each.
/// A stream the server ends (gracefully, by cancelling it, or because the client lagged) or
/// that fails is opened again after a wait (1 s, doubling to 30 s), and `changes` is marked
/// when it is back, since a change made while it was down was announced to nobody. A server
/// that does not know the method is not asked again. The task ends with the session.
pub(crate) fn follow_list_changes(peer: rmcp::Peer<RoleClient>, changes: Arc<ListChanges>) {
    tokio::spawn(async move {
        let filter = rmcp::model::SubscriptionFilter::builder()
            .tools_list_changed()
            .build();
        let mut wait = LISTEN_RETRY_FIRST;
        let mut reopened = false;
        while !peer.is_transport_closed() {
            match peer.listen(filter.clone()).await {
                Ok(mut subscription) => {
                    changes.unheard.store(false, Ordering::SeqCst);
                    if reopened {
                        changes.mark();
                    }
                    let opened = tokio::time::Instant::now();
                    while let Ok(Some(notification)) = subscription.next().await {
                        if matches!(
                            notification,
                            rmcp::model::ServerNotification::ToolListChangedNotification(_)
                        ) {
                            changes.mark();
                        }
                    }
                    changes.unheard.store(true, Ordering::SeqCst);
                    if opened.elapsed() >= LISTEN_RETRY_MAX {
                        wait = LISTEN_RETRY_FIRST;
                    }
                }
                Err(rmcp::service::ServiceError::McpError(e))
                    if e.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND =>
                {
                    changes.unheard.store(true, Ordering::SeqCst);
                    return;
                }
                Err(_) => changes.unheard.store(true, Ordering::SeqCst),
            }
            if peer.is_transport_closed() {
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(LISTEN_RETRY_MAX);
            reopened = true;
        }
    });
}
