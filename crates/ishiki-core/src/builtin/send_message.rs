//! `send_message` (SEND-*): text and `<img>` references sent to the platform.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use ishiki_outlet::ToolDisplay;
use ishiki_resources::ReadResult;
use ishiki_tool::{Tool, ToolContext, ToolError};
use ishiki_toolsearch::ToolDef;
use serde_json::{Value, json};

use super::{Shared, builtin_def, string_field};
use crate::markup::{Piece, escape_attribute};
use crate::platform::{Dropped, Outgoing, OutgoingImage};

/// `send_message({ messages, mode })` (SEND-1, SEND-2).
#[derive(Debug)]
pub(crate) struct SendMessageTool {
    shared: Arc<Shared>,
}

impl SendMessageTool {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

const SEND_SCHEMES: [&str; 4] = ["asset", "artifact", "local", "workspace"];

/// The most images one `send_message` call sends; later `<img>` tags are dropped unread.
pub(crate) const MAX_SEND_IMAGES: usize = 16;

/// The most image bytes one `send_message` call sends together.
pub(crate) const MAX_SEND_IMAGE_BYTES: usize = 64 << 20;

#[async_trait]
impl Tool for SendMessageTool {
    fn definition(&self) -> ToolDef {
        builtin_def(
            "send_message",
            "Send messages to the user. In element mode, images go inline as <img src=\"URL\"/> with an asset://, artifact://, local:// or workspace:// URL; an image that cannot be sent is removed and reported.",
            json!({
                "type": "object",
                "properties": {
                    "messages": { "type": "array", "items": { "type": "string" }, "minItems": 1 },
                    "mode": { "type": "string", "enum": ["text", "element"], "description": "element: parse <img src=\"…\"/> (default text)" }
                },
                "required": ["messages"],
                "additionalProperties": false
            }),
        )
    }

    async fn execute(&self, input: Value, context: &ToolContext) -> Result<Value, ToolError> {
        let element = string_field(&input, "mode") == "element";
        let texts: Vec<String> = input
            .get("messages")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        let mut messages = Vec::new();
        let mut images: Vec<OutgoingImage> = Vec::new();
        let mut dropped = Vec::new();
        // Markup escaped or removed from element-mode messages (tags, attributes).
        let mut removed: Vec<String> = Vec::new();
        // Each source is read once per call; the count and the bytes of images are capped.
        let mut resolved: HashMap<String, Result<OutgoingImage, String>> = HashMap::new();
        let mut total_bytes = 0_usize;
        for text in texts {
            if !element {
                messages.push(text);
                continue;
            }
            let markup = crate::markup::parse(&text);
            removed.extend(markup.removed);
            let mut out = String::new();
            for piece in markup.pieces {
                let (src, attributes) = match piece {
                    Piece::Html(html) => {
                        out.push_str(&html);
                        continue;
                    }
                    Piece::Image { src, attributes } => (src, attributes),
                };
                if src.is_empty() {
                    dropped.push(Dropped {
                        src,
                        reason: "the <img> has no src (srcset, data-src and the like are not read)"
                            .to_owned(),
                    });
                    continue;
                }
                if images.len() >= MAX_SEND_IMAGES {
                    dropped.push(Dropped {
                        src,
                        reason: format!(
                            "over the limit of {MAX_SEND_IMAGES} images per send_message call"
                        ),
                    });
                    continue;
                }
                if !resolved.contains_key(&src) {
                    let image = self.resolve_image(&src).await;
                    resolved.insert(src.clone(), image);
                }
                match resolved.get(&src) {
                    Some(Ok(image))
                        if total_bytes.saturating_add(image.data.len()) > MAX_SEND_IMAGE_BYTES =>
                    {
                        dropped.push(Dropped {
                            src,
                            reason: format!(
                                "the images of this call would pass {MAX_SEND_IMAGE_BYTES} bytes together"
                            ),
                        });
                    }
                    Some(Ok(image)) => {
                        total_bytes += image.data.len();
                        out.push_str(&format!(
                            "<img src=\"{}\"{attributes}/>",
                            escape_attribute(&src)
                        ));
                        images.push(image.clone());
                    }
                    Some(Err(reason)) => dropped.push(Dropped {
                        src,
                        reason: reason.clone(),
                    }),
                    None => {}
                }
            }
            messages.push(out);
        }
        let outgoing = Outgoing {
            step: context.step,
            call_id: context.call_id.clone(),
            messages: messages.clone(),
            images,
            dropped: dropped.clone(),
        };
        self.shared.platform.send(&outgoing).await.map_err(|e| {
            ToolError::with_kind(
                e.kind(),
                format!("the platform refused the message: {}", e.message()),
            )
        })?;
        let mut result = json!({
            "sent": messages.len(),
            "images": outgoing.images.len(),
            "dropped": dropped,
        });
        if !removed.is_empty() {
            result["removed"] = json!(removed);
        }
        Ok(result)
    }

    fn to_model_output(&self, raw: &Value) -> ToolDisplay {
        let sent = raw.get("sent").and_then(Value::as_u64).unwrap_or(0);
        let images = raw.get("images").and_then(Value::as_u64).unwrap_or(0);
        let mut text = format!("Sent {sent} message(s) with {images} image(s).");
        if let Some(dropped) = raw.get("dropped").and_then(Value::as_array) {
            for d in dropped {
                let src = string_field(d, "src");
                let reason = string_field(d, "reason");
                if src.is_empty() {
                    text.push_str(&format!("\nDropped an image: {reason}"));
                } else {
                    text.push_str(&format!("\nDropped image {src}: {reason}"));
                }
            }
        }
        if let Some(removed) = raw.get("removed").and_then(Value::as_array) {
            for r in removed.iter().filter_map(Value::as_str) {
                text.push_str(&format!("\nRemoved markup: {r}"));
            }
        }
        ToolDisplay::text(text)
    }
}

impl SendMessageTool {
    async fn resolve_image(&self, src: &str) -> Result<OutgoingImage, String> {
        let scheme = src.split_once(':').map(|(s, _)| s).unwrap_or("");
        if !SEND_SCHEMES.contains(&scheme) {
            return Err(format!(
                "`{scheme}:` is not allowed here; use asset://, artifact://, local:// or workspace://"
            ));
        }
        match self.shared.center.read(src).await {
            Ok(ReadResult::File {
                media_type, data, ..
            }) if media_type.starts_with("image/") => {
                // The bytes must decode within the profile's dimension limit: a bare signature,
                // a truncated file, a huge header or a 0×0 image never reaches the platform.
                let max = self.shared.assembly.profile.attachment.max_image_dimension;
                ishiki_resources::check_image(&data, max)?;
                Ok(OutgoingImage {
                    src: src.to_owned(),
                    media_type,
                    data,
                })
            }
            Ok(ReadResult::File { media_type, .. }) => {
                Err(format!("it is {media_type}, not an image"))
            }
            Ok(ReadResult::Text { .. }) => Err("it is text, not an image".to_owned()),
            Err(e) => Err(e.to_string()),
        }
    }
}
