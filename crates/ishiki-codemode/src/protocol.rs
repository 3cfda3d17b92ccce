//! Messages between the host and the engine, and their JSON-lines form on a worker's pipes.
//!
//! Host → worker (stdin): one `run`, then a `reply` per tool call. Worker → host (stdout):
//! `ready` once the engine is built (with what confines the worker), then `call` and `console`
//! lines, and finally `done` or `failed`. JSON text produced by `JSON.stringify` never holds a
//! raw newline, so a line is always one message; the worker embeds such text verbatim instead
//! of re-encoding it, after replacing escaped lone surrogates (which no UTF-8 JSON reader
//! accepts) with U+FFFD.
//!
//! Flow control: the worker has at most [`MAX_CALLS_IN_FLIGHT`] calls unanswered and sends
//! calls only while its program waits, when it also reads replies; the host reads the worker's
//! output at all times and writes replies as the worker takes them. Neither side can fill a
//! pipe the other has stopped draining.

use crate::error::CodemodeErrorKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Deepest JSON nesting that crosses the boundary. `serde_json` refuses more than 128 levels
/// and a message adds one, so values are held to this with room to spare.
pub(crate) const MAX_JSON_DEPTH: usize = 100;

/// Tool calls a program may have sent and not had answered. The engine sends no more (later
/// calls wait in its queue until replies come back); a worker that does is broken and ended.
pub(crate) const MAX_CALLS_IN_FLIGHT: usize = 32;

/// Environment variable that starts a binary in worker mode; its value is the engine config.
pub(crate) const WORKER_ENV: &str = "ISHIKI_CODEMODE_WORKER";

/// A message to the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum ToEngine {
    /// Run this program with these tool names available, `Date.now()` at `clock_ms`.
    Run {
        code: String,
        tools: Vec<String>,
        clock_ms: u64,
    },
    /// The outcome of tool call `id`: exactly one of `ok` and `err`.
    Reply {
        id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ok: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        err: Option<String>,
    },
}

/// A message to the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum ToHost {
    /// The engine is built and waits for its program; says what confines the worker.
    Ready {
        #[serde(default)]
        confinement: Option<crate::confine::ConfinementReport>,
    },
    /// The program calls a tool.
    Call { id: u64, tool: String, input: Value },
    /// One line of `console` output.
    Console { line: String },
    /// The program returned this value; `unsent` calls it made were never sent, because it
    /// returned without waiting for them, and `unanswered` were sent but their replies not
    /// read.
    Done {
        value: Value,
        #[serde(default)]
        unsent: usize,
        #[serde(default)]
        unanswered: usize,
    },
    /// The program failed.
    Failed {
        kind: CodemodeErrorKind,
        message: String,
    },
}

/// A `call` line around input JSON that is already valid text.
pub(crate) fn call_line(id: u64, tool: &str, input_json: &str) -> String {
    let tool = Value::String(tool.to_owned());
    format!("{{\"t\":\"call\",\"id\":{id},\"tool\":{tool},\"input\":{input_json}}}\n")
}

/// A `done` line around value JSON that is already valid text.
pub(crate) fn done_line(value_json: &str, unsent: usize, unanswered: usize) -> String {
    format!(
        "{{\"t\":\"done\",\"value\":{value_json},\"unsent\":{unsent},\"unanswered\":{unanswered}}}\n"
    )
}

/// Any other message as one line.
pub(crate) fn line<T: Serialize>(message: &T) -> String {
    // Serializing these plain enums cannot fail: every map key is a string.
    let mut text = serde_json::to_string(message).unwrap_or_default();
    text.push('\n');
    text
}

/// JSON text with every escaped lone surrogate (`\udXXX` without its other half) replaced by
/// `\ufffd`, U+FFFD REPLACEMENT CHARACTER.
///
/// JavaScript strings are UTF-16 and may hold a lone surrogate (`'😀'.slice(0, 1)`);
/// `JSON.stringify` escapes one as `\ud83d`, which is valid JSON text but names no Unicode
/// scalar value, so no UTF-8 JSON reader (and no Rust `String`) accepts it. Pairs stay as they
/// are; an escaped backslash (`\\ud83d`) is text, not an escape, and stays too.
pub(crate) fn replace_lone_surrogates(text: String) -> String {
    let bytes = text.as_bytes();
    if memchr::memmem::find(bytes, b"\\ud").is_none()
        && memchr::memmem::find(bytes, b"\\uD").is_none()
    {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        if bytes.get(i + 1) != Some(&b'u') {
            // `\\`, `\"`, `\n`…: skip the escaped character too.
            i += 2;
            continue;
        }
        let lone = match hex4(bytes, i + 2) {
            Some(0xD800..=0xDBFF) => {
                let low = bytes.get(i + 6) == Some(&b'\\')
                    && bytes.get(i + 7) == Some(&b'u')
                    && matches!(hex4(bytes, i + 8), Some(0xDC00..=0xDFFF));
                if low {
                    i += 12;
                    continue;
                }
                true
            }
            Some(0xDC00..=0xDFFF) => true,
            _ => false,
        };
        if lone {
            out.push_str(&text[copied..i]);
            out.push_str("\\ufffd");
            copied = i + 6;
        }
        i += 6;
    }
    out.push_str(&text[copied.min(text.len())..]);
    out
}

/// The four hex digits at `at` as a number.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let digits = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(digits, 16).ok()
}

/// The deepest array/object nesting in JSON text, without parsing it.
pub(crate) fn json_depth(text: &str) -> usize {
    let mut depth = 0usize;
    let mut max = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in text.as_bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_round_trip() {
        let call = call_line(7, "read", r#"{"url":"a\nb"}"#);
        assert_eq!(call.matches('\n').count(), 1);
        let parsed: ToHost = serde_json::from_str(call.trim_end()).unwrap();
        assert_eq!(
            parsed,
            ToHost::Call {
                id: 7,
                tool: "read".to_owned(),
                input: json!({ "url": "a\nb" })
            }
        );
        let done: ToHost = serde_json::from_str(done_line("[1,2]", 3, 2).trim_end()).unwrap();
        assert_eq!(
            done,
            ToHost::Done {
                value: json!([1, 2]),
                unsent: 3,
                unanswered: 2,
            }
        );
        let reply = ToEngine::Reply {
            id: 1,
            ok: None,
            err: Some("boom".to_owned()),
        };
        let text = line(&reply);
        assert_eq!(text, "{\"t\":\"reply\",\"id\":1,\"err\":\"boom\"}\n");
        assert_eq!(
            serde_json::from_str::<ToEngine>(text.trim_end()).unwrap(),
            reply
        );
    }

    #[test]
    fn lone_surrogate_escapes_become_replacement_characters() {
        let fix = |s: &str| replace_lone_surrogates(s.to_owned());
        assert_eq!(fix(r#"["ab\ud83d"]"#), r#"["ab\ufffd"]"#);
        assert_eq!(fix(r#""\uDE00x\ud83d""#), r#""\ufffdx\ufffd""#);
        // A pair stays a pair; an escaped backslash before `ud83d` is plain text.
        assert_eq!(fix(r#""\ud83d\ude00""#), r#""\ud83d\ude00""#);
        assert_eq!(fix(r#""\\ud83d""#), r#""\\ud83d""#);
        assert_eq!(fix(r#""\ud83d\u0041""#), r#""\ufffd\u0041""#);
        for text in [r#"["ab\ud83d"]"#, r#"{"\udc00":"\ud800\ud800\udc00"}"#] {
            let value: Value = serde_json::from_str(&fix(text)).unwrap();
            assert!(value.to_string().contains('\u{fffd}'));
        }
    }

    #[test]
    fn depth_ignores_brackets_in_strings() {
        assert_eq!(json_depth("1"), 0);
        assert_eq!(json_depth(r#"{"a":[1,{"b":"[[[{"}]}"#), 3);
        assert_eq!(json_depth(r#"["\"[", [[]]]"#), 3);
    }
}
