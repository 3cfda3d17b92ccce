//! What a provider API refuses, per image and per request, whatever the profile allows.
//!
//! The profile's budgets (PRO-2) say what the *agent* wants to spend; a provider has hard
//! limits of its own, and an image over one of them fails the whole request — every request
//! while the image stays in context. Projection enforces both; the effective limit is the
//! stricter one, and the reason names the limit that applied.
//!
//! Byte limits here are measured as the provider measures them: on the base64 text of the
//! image in the request body ([`encoded_len`]), not on the file.
//!
//! Provider defaults (checked 2026-12-01; cite these pages when updating the numbers):
//! - Anthropic Messages API — <https://docs.claude.com/en/docs/build-with-claude/vision>
//!   ("Evaluate image size" / FAQ): at most 100 images per request, 8000x8000 px, 2000x2000 px
//!   when a request has more than 20 images, 5 MB per image through the API. The 5 MB is
//!   checked on the base64 data (the API's own message: "image exceeds 5 MB maximum:
//!   5316852 bytes > 5242880 bytes"; Claude Code's `constants/apiLimits.ts` keeps
//!   `API_IMAGE_MAX_BASE64_SIZE = 5 * 1024 * 1024` for that reason). The request itself is
//!   limited to 32 MB (<https://docs.claude.com/en/api/overview>, "Request size limits").
//! - OpenAI (Chat Completions and Responses) —
//!   <https://platform.openai.com/docs/guides/images-vision> ("Image input requirements"):
//!   up to 50 MB total payload per request, up to 500 individual image inputs per request.

use serde::{Deserialize, Serialize};

/// Hard image limits of the provider that serves the main model. `None` means "no limit of
/// this kind"; [`ImageLimits::default`] has none at all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ImageLimits {
    /// Who sets these limits, as the model reads it in a reason (`anthropic`, `openai`, or a
    /// model name when a model overrides them). Empty reads as "the provider".
    #[serde(skip_serializing_if = "String::is_empty")]
    pub provider: String,
    /// Base64 size of one image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_bytes: Option<u64>,
    /// Base64 size of all images of one request together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_bytes: Option<u64>,
    /// Images in one request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub images: Option<usize>,
    /// Pixels on either side of one image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dimension: Option<u32>,
    /// The many-images rule: a request with more images than this ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub many_images: Option<usize>,
    /// ... may only carry images of at most this many pixels per side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub many_images_dimension: Option<u32>,
}

impl ImageLimits {
    /// The Anthropic Messages API: 5 MB per image (base64), 8000 px, 2000 px once a request has
    /// more than 20 images, 100 images and 32 MB per request.
    pub fn anthropic() -> Self {
        Self {
            provider: "anthropic".to_owned(),
            image_bytes: Some(5 * 1024 * 1024),
            request_bytes: Some(32 * 1000 * 1000),
            images: Some(100),
            dimension: Some(8000),
            many_images: Some(20),
            many_images_dimension: Some(2000),
        }
    }

    /// OpenAI's Chat Completions and Responses APIs: 50 MB of images and 500 images per request.
    pub fn openai() -> Self {
        Self {
            provider: "openai".to_owned(),
            request_bytes: Some(50 * 1000 * 1000),
            images: Some(500),
            ..Self::default()
        }
    }

    /// The defaults for a `provider` name of `models.yaml`: `anthropic`, or `openai` and its
    /// dialects (`openai-responses`, `openai-…`). Any other name has no known limits.
    pub fn for_provider(provider: &str) -> Self {
        match provider {
            "anthropic" => Self::anthropic(),
            p if p == "openai" || p.starts_with("openai-") => Self::openai(),
            _ => Self::default(),
        }
    }

    /// The many-images rule as `(above, max side)`, when both halves are set.
    pub(crate) fn many(&self) -> Option<(usize, u32)> {
        Some((self.many_images?, self.many_images_dimension?))
    }

    /// The name used in reasons.
    pub(crate) fn who(&self) -> &str {
        if self.provider.is_empty() {
            "the provider"
        } else {
            &self.provider
        }
    }
}

/// The size of `bytes` bytes as standard padded base64, the way providers measure images.
pub fn encoded_len(bytes: u64) -> u64 {
    bytes.div_ceil(3).saturating_mul(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_len_is_padded_base64() {
        assert_eq!(encoded_len(0), 0);
        assert_eq!(encoded_len(1), 4);
        assert_eq!(encoded_len(3), 4);
        assert_eq!(encoded_len(4), 8);
        // Anthropic's 5 MB of base64 is 3.75 MiB of file.
        assert_eq!(encoded_len(3_932_160), 5_242_880);
        assert_eq!(encoded_len(3_932_161), 5_242_884);
        assert_eq!(encoded_len(u64::MAX), u64::MAX);
    }

    #[test]
    fn provider_names_pick_their_defaults() {
        assert_eq!(ImageLimits::for_provider("anthropic").dimension, Some(8000));
        assert_eq!(ImageLimits::for_provider("openai").images, Some(500));
        assert_eq!(
            ImageLimits::for_provider("openai-responses").request_bytes,
            Some(50_000_000)
        );
        assert_eq!(ImageLimits::for_provider("local"), ImageLimits::default());
        assert_eq!(ImageLimits::anthropic().many(), Some((20, 2000)));
    }
}
