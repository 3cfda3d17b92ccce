//! The bounded `console` and how values and errors are described to the model.

use boa_engine::{Context, JsObject, JsResult, JsString, JsValue};
use serde_json::Value;

use super::Session;
use super::realm::{session, shared};
use super::tools::to_json;
use crate::error::human_bytes;
use crate::tool::clip;

pub(super) fn console_log(
    this: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    console(this, args, "", context)
}

pub(super) fn console_warn(
    this: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    console(this, args, "[warn] ", context)
}

pub(super) fn console_error(
    this: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    console(this, args, "[error] ", context)
}

/// Formats one console line and sends what fits in the console budget.
pub(super) fn console(
    _this: &JsValue,
    args: &[JsValue],
    prefix: &str,
    context: &mut Context,
) -> JsResult<JsValue> {
    let session = session(context)?;
    if session.borrow().console_closed {
        return Ok(JsValue::undefined());
    }
    let max = shared(context)?.config.max_console_bytes;
    let mut line = prefix.to_owned();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        line.push_str(&format_value(arg, context));
        if line.len() > max {
            break;
        }
    }
    let mut session = session.borrow_mut();
    let Session {
        link,
        console_used,
        console_closed,
        ..
    } = &mut *session;
    let Some(link) = link.as_mut() else {
        return Ok(JsValue::undefined());
    };
    let room = max.saturating_sub(*console_used);
    if line.len() <= room {
        *console_used += line.len();
        link.console(&line);
    } else {
        let mut cut = room;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut > 0 {
            link.console(&line[..cut]);
        }
        link.console(&format!(
            "[console output truncated: the limit is {}]",
            human_bytes(max as u64)
        ));
        *console_used = max;
        *console_closed = true;
    }
    Ok(JsValue::undefined())
}

/// How `console.log` shows a value: strings as they are, objects as JSON.
pub(super) fn format_value(value: &JsValue, context: &mut Context) -> String {
    if let Some(s) = value.as_string() {
        return s.to_std_string_lossy();
    }
    if let Some(object) = value.as_object() {
        if object.is::<boa_engine::builtins::error::Error>() {
            return describe_error(&object, context);
        }
        if object.is_callable() {
            return "[Function]".to_owned();
        }
        return match to_json(value, context) {
            Ok(text) => text.map_or_else(|| "undefined".to_owned(), |s| json_string(&s)),
            Err(_) => "[object]".to_owned(),
        };
    }
    value.display().to_string()
}

/// `Name: message` of an Error object (reads its properties, as JavaScript would).
pub(super) fn describe_error(object: &JsObject, context: &mut Context) -> String {
    let mut read = |key: &str| -> String {
        object
            .get(JsString::from(key), context)
            .ok()
            .filter(|v| !v.is_undefined())
            .and_then(|v| v.to_string(context).ok())
            .map(|s| s.to_std_string_lossy())
            .unwrap_or_default()
    };
    let name = read("name");
    let message = read("message");
    let name = if name.is_empty() {
        "Error".to_owned()
    } else {
        name
    };
    if message.is_empty() {
        name
    } else {
        format!("{name}: {}", clip(&message, 1000))
    }
}

/// What was thrown, for the model: `Error: boom`, `exception: "text"`, `exception: {"a":1}`.
pub(super) fn describe_thrown(value: &JsValue, context: &mut Context) -> String {
    if let Some(object) = value.as_object()
        && object.is::<boa_engine::builtins::error::Error>()
    {
        return describe_error(&object, context);
    }
    let shown = if let Some(s) = value.as_string() {
        Value::String(s.to_std_string_lossy()).to_string()
    } else {
        format_value(value, context)
    };
    format!("exception: {}", clip(&shown, 300))
}

/// [`describe_thrown`] plus where an `Error` was created, from its `stack`.
pub(super) fn describe_uncaught(value: &JsValue, context: &mut Context) -> String {
    let described = describe_thrown(value, context);
    let Some(object) = value.as_object() else {
        return described;
    };
    if !object.is::<boa_engine::builtins::error::Error>() {
        return described;
    }
    let stack = object
        .get(JsString::from("stack"), context)
        .ok()
        .and_then(|v| v.as_string())
        .map(|s| s.to_std_string_lossy())
        .unwrap_or_default();
    match stack_position(&stack) {
        Some((line, column)) => format!("{described} (line {line}, col {column})"),
        None => described,
    }
}

/// The first `:line:col)` of a Boa stack, renumbered for the wrapper's first line.
pub(super) fn stack_position(stack: &str) -> Option<(u64, u64)> {
    stack.lines().find_map(|frame| {
        let inner = frame.trim_end().strip_suffix(')')?;
        let mut parts = inner.rsplitn(3, ':');
        let column = parts.next()?.parse::<u64>().ok()?;
        let line = parts.next()?.parse::<u64>().ok()?;
        (line >= 2).then(|| (line - 1, column))
    })
}

/// JSON text from `JSON.stringify` as UTF-8 that any JSON reader accepts: a lone surrogate
/// (escaped by `stringify`) becomes U+FFFD (see `replace_lone_surrogates`).
pub(super) fn json_string(text: &JsString) -> String {
    crate::protocol::replace_lone_surrogates(text.to_std_string_lossy())
}

/// Bytes `s` takes as UTF-8 (lone surrogates count as the replacement character).
pub(super) fn utf8_len(s: &JsString) -> usize {
    match s.as_str().variant() {
        boa_engine::string::JsStrVariant::Latin1(bytes) => {
            bytes.len() + bytes.iter().filter(|&&b| b >= 0x80).count()
        }
        boa_engine::string::JsStrVariant::Utf16(units) => units
            .iter()
            .map(|&u| match u {
                0..=0x7F => 1,
                0x80..=0x7FF => 2,
                // A surrogate pair is 4 bytes, 2 per half; a lone one becomes U+FFFD (3).
                0xD800..=0xDFFF => 2,
                _ => 3,
            })
            .sum(),
    }
}
