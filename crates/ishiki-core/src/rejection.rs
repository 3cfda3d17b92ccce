//! Recognising a provider's refusal of an image in a failed model request.
//!
//! One image over a provider limit must not poison a session: when a request fails with an
//! HTTP 400 (or 413) whose message is about an image, the runtime turns the images of that
//! request terminal with the provider's words (see `Runtime::abandon_failed`), so the next
//! request carries a reason instead of the bytes and succeeds. The message is the model
//! error's text (`Model::respond`'s `Err`), e.g. ishiki-provider's
//! `https://…/v1/messages answered 400 Bad Request: {"type":"error","error":{…}}`.

/// How much of a provider's message is kept as the reason (it is hostile input too).
pub(crate) const MAX_REASON_CHARS: usize = 300;

/// The provider's reason when `error` is a refusal of an image: a 400 or 413 status (or an
/// `invalid_request_error`) and the word "image". `None` for anything else (timeouts, 5xx, a
/// 400 about something else), which must not cost the conversation its images.
pub fn image_rejection(error: &str) -> Option<String> {
    let lower = error.to_ascii_lowercase();
    let status = has_word(&lower, "400")
        || has_word(&lower, "413")
        || lower.contains("invalid_request_error")
        || lower.contains("bad request");
    if !status || !lower.contains("image") {
        return None;
    }
    // The provider's own words follow the status line when there is one.
    let detail = ["400 bad request:", "413 payload too large:", "400:", "413:"]
        .iter()
        .find_map(|marker| lower.find(marker).map(|at| at + marker.len()))
        .and_then(|at| error.get(at..))
        .unwrap_or(error)
        .trim();
    let detail = if detail.is_empty() {
        error.trim()
    } else {
        detail
    };
    let mut reason: String = detail.chars().take(MAX_REASON_CHARS).collect();
    if detail.chars().count() > MAX_REASON_CHARS {
        reason.push('…');
    }
    Some(reason)
}

/// Whether `word` occurs in `text` between non-alphanumeric characters.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anthropic_400_about_an_image_is_a_rejection_with_its_words() {
        let error = "https://api.anthropic.com/v1/messages answered 400 Bad Request: \
                     messages.0.content.1.image.source.base64: image exceeds 5 MB maximum: \
                     5316852 bytes > 5242880 bytes";
        assert_eq!(
            image_rejection(error).as_deref(),
            Some(
                "messages.0.content.1.image.source.base64: image exceeds 5 MB maximum: \
                 5316852 bytes > 5242880 bytes"
            )
        );
    }

    #[test]
    fn an_openai_invalid_request_about_an_image_is_a_rejection() {
        let error = r#"{"error":{"message":"Invalid image data","type":"invalid_request_error"}}"#;
        assert_eq!(image_rejection(error).as_deref(), Some(error));
    }

    #[test]
    fn other_failures_are_not_rejections() {
        for error in [
            "provider 500",
            "https://x/v1/messages answered 500 Internal Server Error: image service down",
            "https://x/v1/messages answered 400 Bad Request: max_tokens: must be positive",
            "https://x/v1/messages answered 429 Too Many Requests: images are rate limited",
            "timed out after 4000 ms reading image",
            "error code 14000 for image",
        ] {
            assert_eq!(image_rejection(error), None, "{error}");
        }
    }

    #[test]
    fn the_reason_is_bounded() {
        let error = format!("400 Bad Request: image {}", "x".repeat(5000));
        let reason = image_rejection(&error).unwrap_or_default();
        assert_eq!(reason.chars().count(), MAX_REASON_CHARS + 1);
        assert!(reason.ends_with('…'));
    }
}
