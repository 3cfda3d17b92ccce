//! The top-level `attachments` array of a program's return value (CM-5, CM-6, CM-7).
//!
//! Pure functions over JSON: nothing here touches the engine, so the rules are easy to test and
//! reuse. Only the final return value's top-level `attachments` counts; everything else is plain
//! JSON and is never searched for media.

use crate::error::{CodemodeError, CodemodeErrorKind};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// How long an attachment's bytes stay in front of the model (CM-6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lifetime {
    /// Shown once (the default).
    #[default]
    Once,
    /// Kept among the most recently viewed media.
    Recent,
    /// Kept while its source record stays in the active context.
    Retain,
}

/// One declared attachment: what it carries and how long it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentItem {
    /// From the item's `lifetime` field; `once` when absent.
    pub lifetime: Lifetime,
    /// The media itself, or where to find it.
    pub content: AttachmentContent,
}

/// What an attachment item carries (CM-7: bytes count; a bare URL is resolved by the outlet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachmentContent {
    /// Bytes: an MCP `image`/`audio` block, a `read` file node with `data`, or an embedded
    /// resource with a `blob`.
    Bytes {
        /// The declared media type (`mimeType` / `mediaType`).
        media_type: String,
        /// The decoded bytes.
        data: Vec<u8>,
        /// Where the bytes came from, when the item says (file node `url`, resource `uri`).
        url: Option<String>,
    },
    /// An embedded resource carrying text.
    Text {
        /// The resource's URI.
        uri: String,
        /// The declared media type, if any.
        media_type: Option<String>,
        /// The text.
        text: String,
    },
    /// Only a URL: `{ type: "resource_link", uri }` or a file node without `data`.
    Reference {
        /// The URL to resolve.
        url: String,
        /// The declared media type, if any.
        media_type: Option<String>,
    },
}

/// Reads the top-level `attachments` array of a return value (CM-5, CM-6).
///
/// A value that is not an object, or has no `attachments` key, declares nothing. Items are
/// checked strictly: an unknown `type`, a missing field or bad base64 is an error naming the
/// item, so the model can fix its program.
///
/// ```
/// use ishiki_codemode::{parse_attachments, AttachmentContent, Lifetime};
/// let value = serde_json::json!({
///     "count": 1,
///     "attachments": [{ "type": "image", "mimeType": "image/png", "data": "iVBORw==", "lifetime": "recent" }],
/// });
/// let items = parse_attachments(&value).unwrap();
/// assert_eq!(items[0].lifetime, Lifetime::Recent);
/// assert!(matches!(&items[0].content, AttachmentContent::Bytes { media_type, .. } if media_type == "image/png"));
/// ```
pub fn parse_attachments(value: &Value) -> Result<Vec<AttachmentItem>, CodemodeError> {
    let Some(list) = value.as_object().and_then(|o| o.get("attachments")) else {
        return Ok(Vec::new());
    };
    let Some(items) = list.as_array() else {
        return Err(invalid(format!(
            "attachments must be an array, got {}",
            type_name(list)
        )));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_item(i, item))
        .collect()
}

/// Splits a return value into the value the model sees and its attachments: the top-level
/// `attachments` key is removed from an object value.
pub(crate) fn split_attachments(
    mut value: Value,
) -> Result<(Value, Vec<AttachmentItem>), CodemodeError> {
    let items = parse_attachments(&value)?;
    if let Some(object) = value.as_object_mut() {
        object.remove("attachments");
    }
    Ok((value, items))
}

fn parse_item(index: usize, item: &Value) -> Result<AttachmentItem, CodemodeError> {
    let at = format!("attachments[{index}]");
    let Some(object) = item.as_object() else {
        return Err(invalid(format!(
            "{at} must be an object, got {}",
            type_name(item)
        )));
    };
    let lifetime = match object.get("lifetime") {
        None | Some(Value::Null) => Lifetime::Once,
        Some(Value::String(s)) if s == "once" => Lifetime::Once,
        Some(Value::String(s)) if s == "recent" => Lifetime::Recent,
        Some(Value::String(s)) if s == "retain" => Lifetime::Retain,
        Some(other) => {
            return Err(invalid(format!(
                "{at}.lifetime must be \"once\", \"recent\" or \"retain\", got {}",
                short_json(other)
            )));
        }
    };
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.as_str(),
        Some(other) => {
            return Err(invalid(format!(
                "{at}.type must be a string, got {}",
                type_name(other)
            )));
        }
        None => return Err(invalid(format!("{at} has no type"))),
    };
    let content = match kind {
        "image" | "audio" => AttachmentContent::Bytes {
            media_type: required_str(object, "mimeType", &at)?.to_owned(),
            data: decode(required_str(object, "data", &at)?, &format!("{at}.data"))?,
            url: None,
        },
        "file" => {
            let url = optional_str(object, "url", &at)?;
            let media_type = optional_str(object, "mediaType", &at)?;
            match (optional_str(object, "data", &at)?, url) {
                (Some(data), url) => AttachmentContent::Bytes {
                    media_type: media_type
                        .ok_or_else(|| invalid(format!("{at} has data but no mediaType")))?
                        .to_owned(),
                    data: decode(data, &format!("{at}.data"))?,
                    url: url.map(str::to_owned),
                },
                (None, Some(url)) => AttachmentContent::Reference {
                    url: url.to_owned(),
                    media_type: media_type.map(str::to_owned),
                },
                (None, None) => {
                    return Err(invalid(format!("{at} (file) needs data or url")));
                }
            }
        }
        "resource" => {
            let at_resource = format!("{at}.resource");
            let Some(resource) = object.get("resource").and_then(Value::as_object) else {
                return Err(invalid(format!("{at_resource} must be an object")));
            };
            let uri = required_str(resource, "uri", &at_resource)?.to_owned();
            let media_type = optional_str(resource, "mimeType", &at_resource)?;
            if let Some(blob) = optional_str(resource, "blob", &at_resource)? {
                AttachmentContent::Bytes {
                    media_type: media_type.unwrap_or("application/octet-stream").to_owned(),
                    data: decode(blob, &format!("{at_resource}.blob"))?,
                    url: Some(uri),
                }
            } else if let Some(text) = optional_str(resource, "text", &at_resource)? {
                AttachmentContent::Text {
                    uri,
                    media_type: media_type.map(str::to_owned),
                    text: text.to_owned(),
                }
            } else {
                return Err(invalid(format!("{at_resource} needs blob or text")));
            }
        }
        "resource_link" => AttachmentContent::Reference {
            url: required_str(object, "uri", &at)?.to_owned(),
            media_type: optional_str(object, "mimeType", &at)?.map(str::to_owned),
        },
        other => {
            return Err(invalid(format!(
                "{at}.type {} is not an attachment; use image, audio, file, resource or resource_link",
                short_json(&Value::String(other.to_owned()))
            )));
        }
    };
    Ok(AttachmentItem { lifetime, content })
}

fn required_str<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<&'a str, CodemodeError> {
    optional_str(object, key, at)?.ok_or_else(|| invalid(format!("{at} has no {key}")))
}

fn optional_str<'a>(
    object: &'a Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<&'a str>, CodemodeError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(invalid(format!(
            "{at}.{key} must be a string, got {}",
            type_name(other)
        ))),
    }
}

fn decode(data: &str, at: &str) -> Result<Vec<u8>, CodemodeError> {
    use base64::DecodeError;
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| {
            let why = match e {
                DecodeError::InvalidByte(offset, byte) => {
                    format!("character {:?} at offset {offset}", char::from(byte))
                }
                DecodeError::InvalidLength(length) => format!("length {length}"),
                DecodeError::InvalidLastSymbol(offset, _) => {
                    format!("last symbol at offset {offset}")
                }
                DecodeError::InvalidPadding => "padding".to_owned(),
            };
            invalid(format!("{at} is not valid base64 (bad {why})"))
        })
}

fn invalid(message: String) -> CodemodeError {
    CodemodeError::new(CodemodeErrorKind::InvalidAttachments, message)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn short_json(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= 40 {
        return text;
    }
    let mut cut = 40;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cm5_value_without_attachments_declares_nothing() {
        assert_eq!(parse_attachments(&json!(42)).unwrap(), vec![]);
        assert_eq!(parse_attachments(&json!({ "a": 1 })).unwrap(), vec![]);
        // Media elsewhere in the value is plain JSON (CM-5).
        let nested =
            json!({ "shot": { "type": "image", "mimeType": "image/png", "data": "AA==" } });
        assert_eq!(parse_attachments(&nested).unwrap(), vec![]);
    }

    #[test]
    fn cm5_split_removes_only_top_level_key() {
        let value = json!({ "n": 1, "attachments": [], "inner": { "attachments": [1] } });
        let (rest, items) = split_attachments(value).unwrap();
        assert_eq!(rest, json!({ "n": 1, "inner": { "attachments": [1] } }));
        assert!(items.is_empty());
    }
}
