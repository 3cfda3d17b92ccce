//! Helpers both renderers share: markers for media an API cannot take, catalog deltas as text.

use ishiki_core::{DeltaEntry, MediaPart, Part};

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
