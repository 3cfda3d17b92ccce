//! The client side of one connection: how Ishiki names itself (`ishiki`, protocol
//! `2025-11-25`), following `notifications/tools/list_changed`, and passing elicitation to
//! the embedder's [`Elicitor`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, FormElicitationCapability, Implementation, ProtocolVersion,
    UrlElicitationCapability,
};
use rmcp::service::{MaybeSendFuture, NotificationContext, RequestContext, RoleClient};
use serde_json::Value;

use crate::elicit::{ElicitAnswer, ElicitRequest, Elicitor, apply_defaults};

/// Whether the server said its tool list changed since the list was last read.
#[derive(Debug, Default)]
pub(crate) struct ListChanges {
    pub(crate) pending: AtomicBool,
    pub(crate) notify: tokio::sync::Notify,
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
