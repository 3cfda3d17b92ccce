//! Helpers the renderers share: markers for media an API cannot take, catalog deltas as text,
//! and which reasoning parts a request may replay.

use std::collections::BTreeSet;
use std::sync::Arc;

use ishiki_model::{DeltaEntry, MediaPart, Message, Part, Reasoning, Request};
use serde::{Deserialize, Serialize};

/// The text shown instead of media the target cannot carry (no data, or an unsupported kind).
pub(crate) fn media_marker(kind: &str, media: &MediaPart, why: &str) -> String {
    format!(
        "[{kind} {} ({}, {} bytes): {why}]",
        media.url, media.media_type, media.bytes
    )
}

/// A catalog delta as text. Only used when its message carries no text of its own: the runtime
/// puts the announcement text beside the structured part, and repeating it would waste tokens.
pub(crate) fn delta_text(added: &[DeltaEntry]) -> String {
    let mut out = String::from("New tools are available:");
    for entry in added {
        out.push_str("\n- ");
        out.push_str(&entry.name);
        out.push_str(": ");
        out.push_str(&entry.description);
        match &entry.signature {
            Some(signature) => {
                out.push('\n');
                out.push_str(signature);
            }
            None => {
                out.push_str("\n  input schema: ");
                out.push_str(&entry.input_schema.to_string());
            }
        }
    }
    out
}

/// Whether a message has a text part (then its catalog delta part is not rendered again).
pub(crate) fn has_text(parts: &[Part]) -> bool {
    parts.iter().any(|p| matches!(p, Part::Text { .. }))
}

/// Whether a message is an attachment message made by the projection (PRJ-3): its id is
/// `att-call-…` or `att-msg-…` (ishiki-projection's record ids).
pub(crate) fn is_attachment(id: &str) -> bool {
    id.starts_with("att-")
}

/// What a renderer did with the request's reasoning parts (the step's report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// Reasoning parts replayed verbatim.
    pub kept: usize,
    /// Parts dropped because another provider or model made them.
    pub dropped_foreign: usize,
    /// Parts dropped because they stand before the first message the projection changed
    /// (in this request or an earlier one): dropping them is the one edit the providers allow.
    pub dropped_before_change: usize,
    /// Index of the first message this request changed, when the projection changed earlier
    /// context since the previous request.
    pub changed_from: Option<usize>,
}

/// The index of the first message of `previous` that `current` does not repeat at the same
/// position, or `None` when `current` starts with all of `previous` (an append-only step).
/// Messages the two requests share (the runtime's history) compare by pointer, in O(1).
pub fn first_changed(previous: &[Arc<Message>], current: &[Arc<Message>]) -> Option<usize> {
    previous
        .iter()
        .zip(current)
        .position(|(a, b)| !Arc::ptr_eq(a, b) && a != b)
        .or_else(|| (current.len() < previous.len()).then_some(current.len()))
}

/// Where a request's reasoning may be replayed from (see [`ReplayState::plan`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayPlan {
    /// The first message this request changed since the previous one, if any.
    pub changed_from: Option<usize>,
    /// The first message whose reasoning may be replayed; reasoning before it is dropped.
    pub reasoning_from: Option<usize>,
}

/// What a model remembers between requests to replay reasoning safely: the previous request's
/// messages, and which messages' reasoning was left out once (it stays out, so the request
/// after a pruning keeps the pruning request's bytes as its prefix).
#[derive(Debug, Clone, Default)]
pub struct ReplayState {
    previous: Vec<Arc<Message>>,
    dropped: BTreeSet<String>,
}

impl ReplayState {
    /// A state before the first request.
    pub fn new() -> Self {
        Self::default()
    }

    /// The plan for `request`: reasoning is replayed from the first message the projection
    /// changed since the previous request, and never before a message whose reasoning was
    /// dropped earlier.
    pub fn plan(&self, request: &Request) -> ReplayPlan {
        let changed_from = first_changed(&self.previous, &request.messages);
        let after_dropped = request
            .messages
            .iter()
            .rposition(|m| self.dropped.contains(&m.id))
            .map(|i| i + 1);
        ReplayPlan {
            changed_from,
            reasoning_from: changed_from.max(after_dropped),
        }
    }

    /// Records that `request`, rendered with `plan`, got an answer.
    pub fn advance(&mut self, request: &Request, plan: &ReplayPlan) {
        let from = plan.reasoning_from.unwrap_or(0).min(request.messages.len());
        for message in &request.messages[..from] {
            if message
                .content
                .iter()
                .any(|p| matches!(p, Part::Reasoning(_)))
            {
                self.dropped.insert(message.id.clone());
            }
        }
        self.previous.clone_from(&request.messages);
    }
}

/// Whether the reasoning part `reasoning` of message `index` is replayed to `provider`/`model`
/// when reasoning is replayed from message `from` on.
pub(crate) fn keeps(
    reasoning: &Reasoning,
    index: usize,
    provider: &str,
    model: &str,
    from: Option<usize>,
) -> bool {
    reasoning.provider == provider && reasoning.model == model && from.is_none_or(|c| index >= c)
}

/// Counts what a renderer for `provider`/`model` does with the reasoning parts of `request`
/// under `plan`.
pub fn reasoning_replay(
    request: &Request,
    provider: &str,
    model: &str,
    plan: &ReplayPlan,
) -> ReplayReport {
    let mut report = ReplayReport {
        changed_from: plan.changed_from,
        ..ReplayReport::default()
    };
    for (index, message) in request.messages.iter().enumerate() {
        for part in &message.content {
            let Part::Reasoning(r) = part else { continue };
            if r.provider != provider || r.model != model {
                report.dropped_foreign += 1;
            } else if keeps(r, index, provider, model, plan.reasoning_from) {
                report.kept += 1;
            } else {
                report.dropped_before_change += 1;
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn delta_text_lists_signatures_or_schemas() {
        let entry = |signature: Option<&str>| DeltaEntry {
            name: "weather".into(),
            description: "Forecast".into(),
            input_schema: json!({ "type": "object" }),
            signature: signature.map(str::to_owned),
        };
        assert_eq!(
            delta_text(&[
                entry(None),
                entry(Some("tools.weather(input: {}): Promise<unknown>;"))
            ]),
            "New tools are available:\n- weather: Forecast\n  input schema: {\"type\":\"object\"}\n\
             - weather: Forecast\ntools.weather(input: {}): Promise<unknown>;"
        );
        assert!(
            is_attachment("att-call-c1") && is_attachment("att-msg-m1") && !is_attachment("m1")
        );
    }
}
