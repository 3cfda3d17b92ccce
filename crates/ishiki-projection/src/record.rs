//! Attachment records as history stores them (PRJ-1) and the resolver's verdict on each.

use serde::{Deserialize, Serialize};

use crate::config::Lifetime;

/// The history record an attachment belongs to. The attachment lives only while this record is
/// in the active context (PRJ-7, PRJ-11).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceLink {
    /// A tool result, by the id of the call that produced it.
    ToolResult {
        /// The tool call's id.
        call_id: String,
    },
    /// A platform message, by its id.
    Message {
        /// The platform message's id.
        message_id: String,
    },
}

impl SourceLink {
    /// The stable id of the attachment message placed after this source: `att-call-<call_id>`
    /// or `att-msg-<message_id>` (two prefixes, so a call and a message with the same id never
    /// share a message id).
    pub fn message_id(&self) -> String {
        match self {
            SourceLink::ToolResult { call_id } => format!("att-call-{call_id}"),
            SourceLink::Message { message_id } => format!("att-msg-{message_id}"),
        }
    }
}

/// One `ishiki.attachment` record: a resource reference linked to its source (PRJ-1). It holds
/// no display choice; what a request shows is decided by [`project`](crate::project) each time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentRecord {
    /// The record's id; delivery state is keyed by it.
    pub id: String,
    /// Where the attachment came from.
    pub source: SourceLink,
    /// The resource URL that holds the bytes (`asset://…`, `artifact://…`, …).
    pub url: String,
    /// The media type, e.g. `image/png`. `image/*` counts as an image, `audio/*` as audio.
    pub media_type: String,
    /// The size in bytes.
    pub bytes: u64,
    /// Width and height in pixels, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<(u32, u32)>,
    /// The record's lifetime; `once` when absent.
    #[serde(default)]
    pub lifetime: Lifetime,
    /// Arrival order: a larger `seq` arrived later. "Oldest" and "arrival order" use it, and
    /// delivery state is keyed by `(seq, id)`, so it must never change once assigned.
    pub seq: u64,
    /// When the record was created (opaque to this crate; copied into message timestamps).
    pub created_at: String,
}

impl AttachmentRecord {
    /// A record of `bytes` bytes of `media_type` at `url`, left by `source`: lifetime `once`,
    /// dimensions unknown, arrival `seq` 0 and no creation time until [`at`](Self::at) sets
    /// them.
    pub fn new(
        id: impl Into<String>,
        source: SourceLink,
        url: impl Into<String>,
        media_type: impl Into<String>,
        bytes: u64,
    ) -> Self {
        Self {
            id: id.into(),
            source,
            url: url.into(),
            media_type: media_type.into(),
            bytes,
            dimensions: None,
            lifetime: Lifetime::default(),
            seq: 0,
            created_at: String::new(),
        }
    }

    /// The same record with its width and height in pixels.
    pub fn with_dimensions(self, width: u32, height: u32) -> Self {
        Self {
            dimensions: Some((width, height)),
            ..self
        }
    }

    /// The same record with `lifetime`.
    pub fn with_lifetime(self, lifetime: Lifetime) -> Self {
        Self { lifetime, ..self }
    }

    /// The same record arriving as number `seq` (larger is later; never change it once
    /// assigned), created at `created_at`.
    pub fn at(self, seq: u64, created_at: impl Into<String>) -> Self {
        Self {
            seq,
            created_at: created_at.into(),
            ..self
        }
    }
}

/// The resolver's verdict on one record for this request. The caller does the I/O; projection
/// only reads the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The bytes are readable; their size and dimensions are the record's.
    Available,
    /// Not readable now (source temporarily gone, timeout …): retried next request (PRJ-10).
    Unavailable {
        /// What happened, for the model.
        reason: String,
    },
    /// The media type or encoding is unsupported, or the image is broken: terminal (PRJ-9).
    Unsupported {
        /// What is wrong, for the model.
        reason: String,
    },
    /// Inbound media was not stored (over `assets.autoDownloadMaxBytes`, or that is 0):
    /// terminal, stated once (RES-9).
    NotDownloaded {
        /// Why it was not stored, for the model.
        reason: String,
    },
    /// The stored media was deleted for good (an asset past its retention period): terminal,
    /// stated once in the same words before and after a restart.
    Deleted {
        /// Why it is gone, for the model.
        reason: String,
    },
    /// The provider refused a request because of these bytes (an HTTP 400 about the image):
    /// terminal, stated once, so the next request can succeed.
    Rejected {
        /// The provider's message, for the model.
        reason: String,
    },
}

/// What kind of media a record holds, from its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MediaKind {
    Image,
    Audio,
    Other,
}

impl MediaKind {
    pub(crate) fn of(media_type: &str) -> Self {
        let top = media_type
            .as_bytes()
            .split(|&b| b == b'/')
            .next()
            .unwrap_or_default();
        if top.eq_ignore_ascii_case(b"image") {
            MediaKind::Image
        } else if top.eq_ignore_ascii_case(b"audio") {
            MediaKind::Audio
        } else {
            MediaKind::Other
        }
    }
}
