//! [`AttachmentInfo`]: one media attachment as the embedder and the transcript see it. A leaf
//! module: the runtime, the conversions and the built-ins all name it.

use ishiki_projection::Lifetime;
use serde::{Deserialize, Serialize};

/// One media attachment of a tool result or an inbound message, as a transcript prints it:
/// `{url, media_type, bytes, lifetime}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachmentInfo {
    /// The resource URL (`artifact://…` or `asset://…`; `inbound:<message id>/<n>` for an
    /// inbound image that was not downloaded).
    pub url: String,
    /// Media type.
    pub media_type: String,
    /// Size in bytes.
    pub bytes: u64,
    /// How long the model keeps seeing it (serialized as `once`, `recent` or `retain`).
    pub lifetime: Lifetime,
}
