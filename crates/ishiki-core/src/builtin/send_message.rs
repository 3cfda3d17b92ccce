//! `send_message` (SEND-*): text and `<img>` references sent to the platform.

use super::*;

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
        // Each source is read once per call; the count and the bytes of images are capped.
        let mut resolved: HashMap<String, Result<OutgoingImage, String>> = HashMap::new();
        let mut total_bytes = 0_usize;
        for text in texts {
            if !element {
                messages.push(text);
                continue;
            }
            let mut out = String::new();
            let mut rest = text.as_str();
            while let Some((before, tag, src, after)) = next_img(rest) {
                out.push_str(before);
                rest = after;
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
                        out.push_str(tag);
                        images.push(image.clone());
                    }
                    Some(Err(reason)) => dropped.push(Dropped {
                        src,
                        reason: reason.clone(),
                    }),
                    None => {}
                }
            }
            out.push_str(rest);
            messages.push(out);
        }
        let outgoing = Outgoing {
            step: context.step,
            call_id: context.call_id.clone(),
            messages: messages.clone(),
            images,
            dropped: dropped.clone(),
        };
        self.shared.platform.send(&outgoing).map_err(|e| {
            ToolError::with_kind(
                e.kind(),
                format!("the platform refused the message: {}", e.message()),
            )
        })?;
        Ok(json!({
            "sent": messages.len(),
            "images": outgoing.images.len(),
            "dropped": dropped,
        }))
    }

    fn to_model_output(&self, raw: &Value) -> Display {
        let sent = raw.get("sent").and_then(Value::as_u64).unwrap_or(0);
        let images = raw.get("images").and_then(Value::as_u64).unwrap_or(0);
        let mut text = format!("Sent {sent} message(s) with {images} image(s).");
        if let Some(dropped) = raw.get("dropped").and_then(Value::as_array) {
            for d in dropped {
                text.push_str(&format!(
                    "\nDropped image {}: {}",
                    string_field(d, "src"),
                    string_field(d, "reason")
                ));
            }
        }
        Display::text(text)
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
            }) if media_type.starts_with("image/") => Ok(OutgoingImage {
                src: src.to_owned(),
                media_type,
                data,
            }),
            Ok(ReadResult::File { media_type, .. }) => {
                Err(format!("it is {media_type}, not an image"))
            }
            Ok(ReadResult::Text { .. }) => Err("it is text, not an image".to_owned()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Finds the next `<img … src="…" …/>` (or `>`): text before, the whole tag, the src, the rest.
fn next_img(text: &str) -> Option<(&str, &str, String, &str)> {
    let start = text.find("<img")?;
    let end_rel = text[start..].find('>')?;
    let end = start + end_rel + 1;
    let tag = &text[start..end];
    let src = attribute(tag, "src").unwrap_or_default();
    Some((&text[..start], tag, src, &text[end..]))
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let key = format!("{name}=");
    let at = tag.find(&key)? + key.len();
    let rest = &tag[at..];
    let quote = rest.chars().next()?;
    if quote == '"' || quote == '\'' {
        let inner = &rest[1..];
        let close = inner.find(quote)?;
        Some(inner[..close].to_owned())
    } else {
        let close = rest
            .find(|c: char| c.is_whitespace() || c == '/' || c == '>')
            .unwrap_or(rest.len());
        Some(rest[..close].to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send1_img_tags_are_found_with_either_quote() {
        let (before, tag, src, after) =
            next_img("look <img src=\"artifact://codemode/abc.png\"/> ok").expect("a tag");
        assert_eq!(before, "look ");
        assert_eq!(tag, "<img src=\"artifact://codemode/abc.png\"/>");
        assert_eq!(src, "artifact://codemode/abc.png");
        assert_eq!(after, " ok");
        assert_eq!(attribute("<img src='a'>", "src").as_deref(), Some("a"));
        assert_eq!(attribute("<img src=a/>", "src").as_deref(), Some("a"));
    }
}
