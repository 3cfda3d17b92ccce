//! Pure mapping from an MCP `tools/call` result (as JSON) to a tool's raw result or error:
//! what a program sees ([`map_call_result`]) and what a direct call shows the model
//! ([`model_result`]), both over the content blocks as `readable_content` leaves them.

use base64::Engine as _;
use ishiki_tool::{ToolError, is_content_block};
use serde_json::{Value, json};

/// What a program gets from a tool call (see [`map_call_result`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultShape {
    /// The tool declares an output schema: its `structuredContent`, when the result has one.
    Structured,
    /// The content blocks, as the model may read them.
    Content,
}

/// The raw result of a call (what `execute` returns and a codemode program sees), or the tool
/// error it reports.
///
/// `result` is a `CallToolResult` in its wire shape (`content`, `structuredContent`,
/// `isError`). With `structured` (the tool declares an output schema) and `structuredContent`
/// present, the structured value is the result: a program reads fields, and servers repeat
/// the same data, media included, in both. Otherwise the content array is the result, as
/// the model may read it (user-only blocks left out, `text/*` blobs as text, unknown blocks
/// as a note), so `result[1]` is the second block.
///
/// An `isError` result becomes a [`ToolError`] of kind `Failed` whose message is its text blocks
/// joined (other blocks are named, not dropped silently), so a tool failure reads like one.
pub fn map_call_result(result: &Value, shape: ResultShape) -> Result<Value, ToolError> {
    let structured = shape == ResultShape::Structured;
    let content = content_of(result);
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(ToolError::new(error_text(
            content,
            result.get("structuredContent"),
        )));
    }
    if structured && let Some(value) = result.get("structuredContent") {
        return Ok(value.clone());
    }
    Ok(Value::Array(readable_content(content)))
}

/// The raw result of a direct call, which core's default display shows the model: the
/// content blocks as the model may read them (see [`map_call_result`]), whether or not the tool declares an
/// output schema, so images and audio become attachments even beside `structuredContent`.
/// Only a result without content blocks shows its `structuredContent` (as JSON). Errors as
/// in [`map_call_result`].
pub fn model_result(result: &Value) -> Result<Value, ToolError> {
    let content = content_of(result);
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(ToolError::new(error_text(
            content,
            result.get("structuredContent"),
        )));
    }
    match result.get("structuredContent") {
        Some(value) if content.is_empty() && !value.is_null() => Ok(value.clone()),
        _ => Ok(Value::Array(readable_content(content))),
    }
}

fn content_of(result: &Value) -> &[Value] {
    result
        .get("content")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The content blocks a model may read, in order:
///
/// - a block whose `annotations.audience` names only others than `"assistant"` (e.g.
///   `["user"]`) is left out: the server meant it for a person's screen, not the model;
/// - an embedded resource with a `text/*` blob that is UTF-8 becomes an embedded text
///   resource, so it is read as text rather than attached as media no model accepts;
/// - a block of a type Ishiki does not know, or a known type without its fields, becomes a
///   text block naming it, so one odd block never hides the others.
///
/// When every block was meant for others, one text block says so: a bare `[]` would read as
/// a tool that returned nothing.
pub(crate) fn readable_content(content: &[Value]) -> Vec<Value> {
    let readable: Vec<Value> = content
        .iter()
        .filter(|block| !for_others_only(block))
        .map(|block| {
            if let Some(text) = text_blob(block) {
                text
            } else if is_content_block(block) {
                block.clone()
            } else {
                json!({ "type": "text", "text": unknown_block_note(block) })
            }
        })
        .collect();
    if readable.is_empty() && !content.is_empty() {
        let n = content.len();
        let blocks = if n == 1 { "block" } else { "blocks" };
        return vec![json!({
            "type": "text",
            "text": format!("[the result is meant for the user only: {n} content {blocks} not shown to you]")
        })];
    }
    readable
}

fn for_others_only(block: &Value) -> bool {
    block
        .pointer("/annotations/audience")
        .and_then(Value::as_array)
        .is_some_and(|audience| {
            !audience.is_empty() && !audience.iter().any(|role| role == "assistant")
        })
}

/// An embedded `text/*` blob resource as the same resource with its text, when the blob is
/// base64 of UTF-8.
fn text_blob(block: &Value) -> Option<Value> {
    if block.get("type").and_then(Value::as_str) != Some("resource") {
        return None;
    }
    let resource = block.get("resource")?.as_object()?;
    let mime = resource.get("mimeType")?.as_str()?;
    if !mime.trim_start().to_ascii_lowercase().starts_with("text/") {
        return None;
    }
    let blob = resource.get("blob")?.as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(blob.trim().as_bytes())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let mut resource = resource.clone();
    resource.remove("blob");
    resource.insert("text".to_owned(), Value::String(text));
    let mut block = block.clone();
    block["resource"] = Value::Object(resource);
    Some(block)
}

/// The text that stands for a block Ishiki cannot show, naming its type (cut short, quoted).
fn unknown_block_note(block: &Value) -> String {
    match block.get("type").and_then(Value::as_str) {
        Some(kind) => {
            let kind: String = kind.chars().take(40).collect();
            format!("[a content block of type {kind:?} that Ishiki cannot show]")
        }
        None => "[a content block without a type that Ishiki cannot show]".to_owned(),
    }
}

/// The readable text of an error result.
fn error_text(content: &[Value], structured: Option<&Value>) -> String {
    let parts: Vec<String> = content
        .iter()
        .map(|block| {
            let kind = block
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            match (kind, block.get("text").and_then(Value::as_str)) {
                ("text", Some(text)) => text.to_owned(),
                _ => format!("[{kind} block]"),
            }
        })
        .filter(|text| !text.trim().is_empty())
        .collect();
    if !parts.is_empty() {
        return parts.join("\n");
    }
    match structured {
        Some(value) if !value.is_null() => value.to_string(),
        _ => "the tool reported an error without a message".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    //! The mapping rules on hand-written results.

    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn a_result_meant_for_the_user_only_says_so_instead_of_reading_empty() {
        let for_user =
            json!({ "type": "text", "text": "Done!", "annotations": { "audience": ["user"] } });
        let result = json!({ "content": [for_user] });
        let raw = map_call_result(&result, ResultShape::Content).unwrap();
        assert_eq!(
            raw,
            json!([{ "type": "text", "text": "[the result is meant for the user only: 1 content block not shown to you]" }])
        );
        // Beside a block for the model, the user's block is just left out.
        let result = json!({ "content": [for_user, { "type": "text", "text": "for you" }] });
        let raw = map_call_result(&result, ResultShape::Content).unwrap();
        assert_eq!(raw, json!([{ "type": "text", "text": "for you" }]));
        // No content at all stays no content.
        let raw = map_call_result(&json!({ "content": [] }), ResultShape::Content).unwrap();
        assert_eq!(raw, json!([]));
    }

    #[test]
    fn content_array_is_the_raw_result() {
        let result = json!({ "content": [
            { "type": "text", "text": "here" },
            { "type": "image", "data": "AAAA", "mimeType": "image/png" }
        ]});
        let raw = map_call_result(&result, ResultShape::Content).unwrap();
        assert_eq!(raw[1]["type"], "image");
        assert_eq!(raw.as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn structured_content_wins_only_with_an_output_schema() {
        let result = json!({
            "content": [{ "type": "text", "text": "{\"sum\":3}" }],
            "structuredContent": { "sum": 3 }
        });
        assert_eq!(
            map_call_result(&result, ResultShape::Structured).unwrap(),
            json!({ "sum": 3 })
        );
        assert_eq!(
            map_call_result(&result, ResultShape::Content).unwrap(),
            json!([{ "type": "text", "text": "{\"sum\":3}" }])
        );
        // A tool with a schema that sent no structured value still returns its content.
        let plain = json!({ "content": [{ "type": "text", "text": "x" }] });
        assert_eq!(
            map_call_result(&plain, ResultShape::Structured).unwrap()[0]["text"],
            "x"
        );
    }

    #[test]
    fn errors_read_as_text() {
        let result = json!({ "isError": true, "content": [
            { "type": "text", "text": "bad input" },
            { "type": "image", "data": "AAAA", "mimeType": "image/png" }
        ]});
        assert_eq!(
            map_call_result(&result, ResultShape::Content)
                .unwrap_err()
                .message(),
            "bad input\n[image block]"
        );
        let empty = json!({ "isError": true, "content": [] });
        assert_eq!(
            map_call_result(&empty, ResultShape::Content)
                .unwrap_err()
                .message(),
            "the tool reported an error without a message"
        );
        let only_structured = json!({ "isError": true, "structuredContent": { "code": 7 } });
        assert_eq!(
            map_call_result(&only_structured, ResultShape::Structured)
                .unwrap_err()
                .message(),
            "{\"code\":7}"
        );
    }

    fn block() -> impl Strategy<Value = Value> {
        prop_oneof![
            ".{0,20}".prop_map(|text| json!({ "type": "text", "text": text })),
            "[A-Za-z0-9+/]{0,16}"
                .prop_map(|data| json!({ "type": "image", "mimeType": "image/png", "data": data })),
            ".{0,20}".prop_map(|uri| json!({ "type": "resource_link", "uri": uri })),
        ]
    }

    fn shape(structured: bool) -> ResultShape {
        if structured {
            ResultShape::Structured
        } else {
            ResultShape::Content
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// The content array passes through unchanged, and an error always has a message.
        #[test]
        fn cm2_content_passes_through_and_errors_read(
            content in prop::collection::vec(block(), 0..6),
            structured in any::<bool>(),
        ) {
            let result = json!({ "content": content.clone() });
            prop_assert_eq!(map_call_result(&result, shape(structured)), Ok(Value::Array(content.clone())));
            let failed = json!({ "content": content, "isError": true });
            let message = map_call_result(&failed, shape(structured)).unwrap_err();
            prop_assert!(!message.message().trim().is_empty());
        }
    }

    #[test]
    fn missing_content_is_an_empty_array() {
        assert_eq!(
            map_call_result(&json!({}), ResultShape::Content).unwrap(),
            json!([])
        );
    }
}
