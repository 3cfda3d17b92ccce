//! Helpers the renderers share: markers for media an API cannot take, catalog deltas as text,
//! and what a render did with the request's reasoning.

use ishiki_model::{DeltaEntry, MediaPart, Part, Reasoning};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    /// Parts dropped because their prefix changed since they were made (or they carry no
    /// stamp): the provider would refuse them (see [`crate::replay`]).
    pub dropped_changed: usize,
    /// The index of the first message whose reasoning was dropped because its prefix changed.
    pub first_dropped: Option<usize>,
}

/// A provider's compaction as text, for a renderer that cannot send the block itself (another
/// provider or model): its readable summary, or `None` when it has none.
pub(crate) fn compaction_text(compacted: &ishiki_model::Compacted) -> Option<String> {
    compacted
        .summary
        .as_ref()
        .map(|summary| format!("[summary of the earlier conversation]\n{summary}"))
}

/// Whether `compacted` was made by `provider`'s `model` (only then is the block sent back).
pub(crate) fn is_own_compaction(
    compacted: &ishiki_model::Compacted,
    provider: &str,
    model: &str,
) -> bool {
    compacted.provider == provider && compacted.model == model
}

/// Whether `reasoning` was made by `provider`'s `model` (only then may it be replayed).
pub(crate) fn is_own(reasoning: &Reasoning, provider: &str, model: &str) -> bool {
    reasoning.provider == provider && reasoning.model == model
}

/// Refuses a response of more than [`MAX_STREAM_ITEMS`](crate::sse::MAX_STREAM_ITEMS) blocks, items
/// or calls, streamed or not: one bound for every path.
pub(crate) fn check_items(count: usize, what: &str) -> Result<(), crate::ProviderError> {
    if count > crate::sse::MAX_STREAM_ITEMS {
        return Err(crate::ProviderError::malformed(format!(
            "the response has {count} {what}, more than {} (the limit of one response)",
            crate::sse::MAX_STREAM_ITEMS
        )));
    }
    Ok(())
}

/// Parses JSON from a provider, replacing each lone UTF-16 surrogate escape (`\ud800` without
/// its pair, which serde_json refuses) with U+FFFD first, as codemode does for program values:
/// one bad escape in a long answer must not fail the step for good.
pub(crate) fn parse_json(text: &str) -> Result<Value, serde_json::Error> {
    match serde_json::from_str(text) {
        Err(error) if text.contains("\\u") => {
            serde_json::from_str(&replace_lone_surrogates(text)).map_err(|_| error)
        }
        other => other,
    }
}

fn replace_lone_surrogates(text: &str) -> String {
    let hex = |at: usize| -> Option<u16> {
        let digits = text.get(at..at + 4)?;
        u16::from_str_radix(digits, 16).ok()
    };
    let escape = |at: usize| -> Option<u16> {
        (text.get(at..at + 2) == Some("\\u"))
            .then(|| hex(at + 2))
            .flatten()
    };
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(offset) = text[at..].find('\\') {
        let here = at + offset;
        out.push_str(&text[at..here]);
        match escape(here) {
            Some(0xD800..=0xDBFF) => match escape(here + 6) {
                Some(0xDC00..=0xDFFF) => {
                    out.push_str(&text[here..here + 12]);
                    at = here + 12;
                }
                _ => {
                    out.push_str("\\ufffd");
                    at = here + 6;
                }
            },
            Some(0xDC00..=0xDFFF) => {
                out.push_str("\\ufffd");
                at = here + 6;
            }
            _ => {
                // Any other escape: copy it whole, so `\\\\u` (a backslash, then `u`) stays.
                let end = text[here + 1..]
                    .chars()
                    .next()
                    .map_or(here + 1, |c| here + 1 + c.len_utf8());
                out.push_str(&text[here..end]);
                at = end;
            }
        }
    }
    out.push_str(&text[at..]);
    out
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

    #[test]
    fn a_lone_surrogate_escape_becomes_a_replacement_character_and_pairs_stay() {
        let value = parse_json(r#"{"a":"x\ud800y","b":"\ud83d\ude00","c":"\\ud800","d":"\udc00"}"#)
            .expect("repaired");
        assert_eq!(value["a"], "x\u{fffd}y");
        assert_eq!(value["b"], "\u{1f600}");
        assert_eq!(value["c"], "\\ud800");
        assert_eq!(value["d"], "\u{fffd}");
        assert!(parse_json("{").is_err());
    }
}
