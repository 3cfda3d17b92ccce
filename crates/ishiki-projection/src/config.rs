//! Attachment configuration (PRO-2), media lifetimes and the effective image capability (PRO-8).

use serde::{Deserialize, Serialize};

use crate::error::{ProjectionError, ProjectionErrorKind};
use crate::limits::ImageLimits;

/// How many requests an attachment's bytes may appear in (PRJ-4..PRJ-7).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Lifetime {
    /// Embedded until one request carrying it is answered and persisted (the default everywhere).
    #[default]
    Once,
    /// Kept among the most recent images; old viewed ones are pruned in batches (PRJ-5).
    Recent,
    /// Selected in every request while its source is in the active context (PRJ-6).
    Retain,
}

impl Lifetime {
    /// Every lifetime, in the order the docs list them.
    pub const ALL: [Lifetime; 3] = [Lifetime::Once, Lifetime::Recent, Lifetime::Retain];

    /// The name a model, a profile and a transcript write: `once`, `recent` or `retain`.
    pub fn as_str(self) -> &'static str {
        match self {
            Lifetime::Once => "once",
            Lifetime::Recent => "recent",
            Lifetime::Retain => "retain",
        }
    }
}

impl std::fmt::Display for Lifetime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Lifetime {
    type Err = ProjectionError;

    /// `once`, `recent` or `retain`; anything else is an error naming the three.
    fn from_str(s: &str) -> Result<Self, ProjectionError> {
        Lifetime::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| {
                ProjectionError::new(
                    ProjectionErrorKind::InvalidConfig,
                    format!("unknown lifetime `{s}` (expected once, recent or retain)"),
                )
            })
    }
}

/// The profile's `attachment` section (PRO-2). Serde uses the profile's camelCase keys; missing
/// keys take their defaults. Unknown keys are left to the caller's own assembly checks (PRO-7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AttachmentConfig {
    /// The profile's upper bound on the main model's image input (`imageInput`, default true).
    pub image_input: bool,
    /// Whether platform-message images enter the main context by themselves
    /// (`messageImageInput`, default true). Tool media is unaffected (PRJ-2).
    pub message_image_input: bool,
    /// The vision side-model or group (`visionModel`, default none). Projection only uses its
    /// presence, to tell the model it can ask about an image it cannot see (VIS-1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vision_model: Option<String>,
    /// Target number of active `recent` images (`recentImageCount`, default 3).
    pub recent_image_count: usize,
    /// How many viewed `recent` images are removed at once (`imagePruneBatchSize`, default 2).
    pub image_prune_batch_size: usize,
    /// Per-image byte limit (`maxImageBytes`, default 5 MiB).
    pub max_image_bytes: u64,
    /// Byte limit for all images of one request (`maxTotalImageBytes`, default 10 MiB).
    pub max_total_image_bytes: u64,
    /// Image count limit for one request (`maxImageCount`, default 4).
    pub max_image_count: usize,
    /// Pixel limit for each side of an image (`maxImageDimension`, default 1568).
    pub max_image_dimension: u32,
    /// The main model's provider limits (from `models.yaml`, not the profile): enforced
    /// together with the budgets above, the stricter of each pair applies. None by default.
    #[serde(skip)]
    pub provider_limits: ImageLimits,
}

impl Default for AttachmentConfig {
    fn default() -> Self {
        Self {
            image_input: true,
            message_image_input: true,
            vision_model: None,
            recent_image_count: 3,
            image_prune_batch_size: 2,
            max_image_bytes: 5_242_880,
            max_total_image_bytes: 10_485_760,
            max_image_count: 4,
            max_image_dimension: 1568,
            provider_limits: ImageLimits::default(),
        }
    }
}

impl AttachmentConfig {
    /// The smallest value each counted key accepts, by its profile name. The profile decoder
    /// and [`validate`](Self::validate) both read this table, so a range is written once.
    pub const MINIMUMS: [(&'static str, u64); 6] = [
        ("recentImageCount", 0),
        ("imagePruneBatchSize", 1),
        ("maxImageBytes", 1),
        ("maxTotalImageBytes", 1),
        ("maxImageCount", 1),
        ("maxImageDimension", 1),
    ];

    /// The smallest value `key` (a profile name of [`MINIMUMS`](Self::MINIMUMS)) accepts; 0
    /// for a key without a minimum.
    pub fn minimum(key: &str) -> u64 {
        Self::MINIMUMS
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(0, |(_, min)| *min)
    }

    /// Checks the ranges that would make projection useless: a zero batch size, or a zero image
    /// limit (every image would wait or be refused for ever). [`project`](crate::project) itself
    /// never fails on such values — it treats a zero batch as 1 — so this is for callers that
    /// build a config in code; a profile's decoder applies the same [`MINIMUMS`](Self::MINIMUMS)
    /// with the key's line and column (PRO-7).
    pub fn validate(&self) -> Result<(), ProjectionError> {
        let values: [(&str, u64); 6] = [
            ("recentImageCount", self.recent_image_count as u64),
            ("imagePruneBatchSize", self.image_prune_batch_size as u64),
            ("maxImageBytes", self.max_image_bytes),
            ("maxTotalImageBytes", self.max_total_image_bytes),
            ("maxImageCount", self.max_image_count as u64),
            ("maxImageDimension", u64::from(self.max_image_dimension)),
        ];
        match values
            .iter()
            .find(|(key, value)| *value < Self::minimum(key))
        {
            Some((key, _)) => Err(ProjectionError::new(
                ProjectionErrorKind::InvalidConfig,
                format!("attachment.{key} must be at least {}", Self::minimum(key)),
            )),
            None => Ok(()),
        }
    }
}

/// The effective image capability (PRO-8): the profile allows image input and the main model
/// declares `image` input.
pub fn effective_image_input(config: &AttachmentConfig, model_accepts_images: bool) -> bool {
    config.image_input && model_accepts_images
}
