//! The text-protocol parser (TP-1, SEC-3): never panics, work stays linear in the input, at
//! most `MAX_CALLS` calls plus one refusal, and text segments are verbatim pieces of the input.
#![no_main]

use ishiki_core::text_protocol::{MAX_CALLS, Segment, parse_counted};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fn schema_of(name: &str) -> Option<Value> {
    (name == "write_file").then(|| {
        json!({ "type": "object", "properties": {
            "path": { "type": "string" }, "mode": { "type": "integer" },
            "tags": { "type": "array" }, "note": { "type": ["string", "null"] } } })
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (segments, work) = parse_counted(text, &schema_of);
    assert!(
        work <= 8 * text.len() as u64 + 64,
        "{work} bytes examined for {} bytes",
        text.len()
    );
    let calls = segments
        .iter()
        .filter(|s| !matches!(s, Segment::Text(_)))
        .count();
    assert!(calls <= MAX_CALLS + 1);
    for segment in &segments {
        match segment {
            Segment::Text(t) | Segment::Malformed { raw: t, .. } => assert!(text.contains(t.as_str())),
            Segment::Call(call) => assert!(call.arguments.is_object()),
        }
    }
});
