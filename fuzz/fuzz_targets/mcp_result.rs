//! The MCP result mapper (SEC-3): any `tools/call` result a server sends maps to a value or an
//! error text without panicking, never shows the model more blocks than the server sent, and
//! an `isError` result is always an error.
#![no_main]

use ishiki_mcp::{ResultShape, map_call_result, model_result};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(result) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    for mapped in [
        map_call_result(&result, ResultShape::Content),
        map_call_result(&result, ResultShape::Structured),
        model_result(&result),
    ] {
        match mapped {
            Ok(value) => {
                assert!(!is_error, "an isError result mapped to a value");
                if let Value::Array(items) = &value
                    && result.get("structuredContent").is_none()
                {
                    assert!(
                        items.len() <= blocks,
                        "{} items from {blocks} blocks",
                        items.len()
                    );
                }
            }
            Err(text) => assert!(is_error, "an error without isError: {text}"),
        }
    }
});
