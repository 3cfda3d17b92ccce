//! A small in-memory world around `project`: records, active sources, verdicts and state, with
//! the request/commit cycle the runtime performs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use ishiki_projection::{
    AttachmentConfig, AttachmentContent, AttachmentRecord, DeliveryState, Lifetime, Projection,
    ProjectionInput, SourceLink, Verdict, project,
};

pub(crate) fn call(id: &str) -> SourceLink {
    SourceLink::ToolResult {
        call_id: id.to_owned(),
    }
}

pub(crate) fn msg(id: &str) -> SourceLink {
    SourceLink::Message {
        message_id: id.to_owned(),
    }
}

#[derive(Debug, Clone)]
pub(crate) struct World {
    pub(crate) records: Vec<AttachmentRecord>,
    pub(crate) inactive: BTreeSet<SourceLink>,
    pub(crate) verdicts: BTreeMap<String, Verdict>,
    pub(crate) state: DeliveryState,
    pub(crate) config: AttachmentConfig,
    pub(crate) image_input: bool,
    pub(crate) audio_input: bool,
    next_seq: u64,
}

impl World {
    pub(crate) fn new(config: AttachmentConfig) -> Self {
        Self {
            records: Vec::new(),
            inactive: BTreeSet::new(),
            verdicts: BTreeMap::new(),
            state: DeliveryState::new(),
            config,
            image_input: true,
            audio_input: true,
            next_seq: 1,
        }
    }

    /// Adds a record with full control; `seq` counts up in arrival order.
    pub(crate) fn add_full(
        &mut self,
        id: &str,
        source: SourceLink,
        media_type: &str,
        lifetime: Lifetime,
        bytes: u64,
        dimensions: Option<(u32, u32)>,
    ) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let ext = media_type.rsplit('/').next().unwrap_or("bin");
        self.records.push(AttachmentRecord {
            id: id.to_owned(),
            source,
            url: format!("artifact://t/{id}.{ext}"),
            media_type: media_type.to_owned(),
            bytes,
            dimensions,
            lifetime,
            seq,
            created_at: format!("2025-01-01T00:00:{seq:02}Z"),
        });
    }

    /// A 1000-byte 100x100 PNG from tool call `c-<id>`.
    pub(crate) fn image(&mut self, id: &str, lifetime: Lifetime) {
        self.add_full(
            id,
            call(&format!("c-{id}")),
            "image/png",
            lifetime,
            1000,
            Some((100, 100)),
        );
    }

    pub(crate) fn url(&self, id: &str) -> String {
        self.records
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.url.clone())
            .unwrap_or_default()
    }

    pub(crate) fn project(&self) -> Projection {
        let inactive = &self.inactive;
        let verdicts = &self.verdicts;
        project(&ProjectionInput {
            records: &self.records,
            active: &|s| !inactive.contains(s),
            verdict: &|r| verdicts.get(&r.id).cloned().unwrap_or(Verdict::Available),
            state: &self.state,
            config: &self.config,
            image_input: self.image_input,
            audio_input: self.audio_input,
        })
    }

    /// A request whose response is persisted: project, then commit.
    pub(crate) fn succeed(&mut self) -> Projection {
        let p = self.project();
        self.state.commit(&p.pending);
        p
    }

    /// Makes exactly `ids` viewed, the only way state moves: a persisted request in which only
    /// they are visible and nothing limits them.
    pub(crate) fn mark_viewed(&mut self, ids: &[&str]) {
        let mut setup = self.clone();
        setup.inactive.extend(
            self.records
                .iter()
                .filter(|r| !ids.contains(&r.id.as_str()))
                .map(|r| r.source.clone()),
        );
        setup.config.recent_image_count = usize::MAX;
        setup.config.max_image_count = usize::MAX;
        setup.config.max_total_image_bytes = u64::MAX;
        let p = setup.project();
        assert_eq!(p.pending.viewed().len(), ids.len(), "setup: {p:?}");
        self.state.commit(&p.pending);
    }

    /// A request whose step fails or is aborted: nothing is committed.
    pub(crate) fn fail(&mut self) -> Projection {
        self.project()
    }
}

/// Record ids embedded in a projection, in message order.
pub(crate) fn embedded(p: &Projection) -> Vec<String> {
    p.messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|c| match c {
            AttachmentContent::Media { record_id, .. } => Some(record_id.clone()),
            AttachmentContent::Text(_) => None,
        })
        .collect()
}

/// Reason lines (texts that are not the label before a media part).
pub(crate) fn reasons(p: &Projection) -> Vec<String> {
    let mut out = Vec::new();
    for m in &p.messages {
        for (i, c) in m.content.iter().enumerate() {
            let followed_by_media =
                matches!(m.content.get(i + 1), Some(AttachmentContent::Media { .. }));
            if let AttachmentContent::Text(t) = c
                && !followed_by_media
            {
                out.push(t.clone());
            }
        }
    }
    out
}

/// All text of a projection, for "does this URL appear at all" checks.
pub(crate) fn all_text(p: &Projection) -> String {
    let mut s = String::new();
    for m in &p.messages {
        for c in &m.content {
            match c {
                AttachmentContent::Text(t) => s.push_str(t),
                AttachmentContent::Media { url, .. } => s.push_str(url),
            }
            s.push('\n');
        }
    }
    s
}

/// The projection as the model's messages plus the pending change, for snapshots.
pub(crate) fn render(p: &Projection) -> String {
    let mut s = String::new();
    for m in &p.messages {
        let after = match &m.after {
            SourceLink::ToolResult { call_id } => format!("tool result {call_id}"),
            SourceLink::Message { message_id } => format!("message {message_id}"),
        };
        let _ = writeln!(s, "message {} after {after} at {}", m.id, m.created_at);
        for c in &m.content {
            match c {
                AttachmentContent::Text(t) => {
                    let _ = writeln!(s, "  text: {t}");
                }
                AttachmentContent::Media {
                    record_id,
                    url,
                    media_type,
                    bytes,
                } => {
                    let _ = writeln!(s, "  media: {record_id} {media_type} {bytes} bytes {url}");
                }
            }
        }
    }
    let pending = &p.pending;
    let _ = writeln!(
        s,
        "pending: viewed {:?}, consumed {:?}, released {:?}, reason_delivered {:?}",
        pending.viewed(),
        pending.consumed(),
        pending.released(),
        pending.reason_delivered()
    );
    s
}
