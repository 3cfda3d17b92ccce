//! Persisted media as a request sees it: whether an attachment's bytes can be read (cached,
//! except that retention deletes assets), the verdict projection reads, the media part that
//! embeds them, and the check that keeps a deleted asset's id from being handed out again.

use ishiki_projection::{AttachmentRecord, Verdict};
use ishiki_resources::{ResourceError, ResourceErrorKind};

use super::{MediaFailure, Runtime, sha256_hex};
use crate::message::{MediaPart, Part};

/// Media whose bytes a verdict needs and that were never read.
#[derive(Debug)]
pub(super) struct UnreadMedia {
    pub(super) url: String,
    pub(super) image_check: Option<u32>,
}

impl Runtime {
    /// Reads a persisted media resource once and remembers what it found: the URLs are
    /// immutable, so neither availability nor a decode check changes, except that retention
    /// deletes assets ([`Runtime::cleanup_assets`] records that here). Images that fit the
    /// dimension limit are decoded once, so a valid header with garbage behind it is caught.
    pub(super) async fn learn_media(&self, media: &UnreadMedia) {
        let UnreadMedia { url, image_check } = media;
        if self.known_media_info(url).is_some() {
            // Two records of one pass can name the same bytes.
            return;
        }
        // Read without the cache's lock: a store on the network answers in its own time.
        let result = match self.load_media(url).await {
            Ok(bytes) => {
                Ok(image_check.and_then(|max| ishiki_resources::check_image(&bytes, max).err()))
            }
            // An asset id is never reused (see `add_user_message`), so an asset the store
            // does not have was deleted by retention and will not come back.
            Err(e) if url.starts_with("asset:") && e.kind() == ResourceErrorKind::NotFound => {
                Err(MediaFailure::Deleted)
            }
            Err(e) => Err(MediaFailure::Unreadable(e.to_string())),
        };
        self.media_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(url.clone(), result);
    }

    /// What [`Runtime::learn_media`] found for `url` before, if it looked.
    fn known_media_info(&self, url: &str) -> Option<Result<Option<String>, MediaFailure>> {
        self.media_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(url)
            .cloned()
    }

    pub(super) async fn load_media(&self, url: &str) -> Result<Vec<u8>, ResourceError> {
        if url.starts_with("artifact:") {
            self.shared.artifacts.get(url).await
        } else if url.starts_with("asset:") {
            self.shared.assets.get(url).await
        } else {
            Err(ResourceError::new(
                ResourceErrorKind::InvalidUrl,
                format!("`{url}` is not a persisted resource"),
            ))
        }
    }

    /// Why an asset is gone, in the same words before and after a restart.
    pub(super) fn deleted_reason(&self) -> String {
        let days = self.shared.assembly.profile.assets.cleanup.retention_days;
        format!("its retention period (assets.cleanup.retentionDays: {days}) ended")
    }

    /// Whether an asset id was ever handed out in this conversation: still stored, named by an
    /// attachment record, or written in a message (retention deletes the asset, never its
    /// mentions), so a replayed clock never hands out a deleted asset's id again.
    pub(super) async fn asset_id_used(&self, uuid: &uuid::Uuid) -> bool {
        if self.shared.assets.meta(&uuid.to_string()).await.is_ok() {
            return true;
        }
        let url = ishiki_resources::asset_url(uuid);
        self.records.iter().any(|r| r.url == url)
            || self.history.iter().any(|e| {
                e.message.content.iter().any(|part| match part {
                    Part::Text { text } => text.contains(&url),
                    Part::ToolResult { text, .. } => text.contains(&url),
                    _ => false,
                })
            })
    }

    /// The verdict on `record` from what is known of its bytes; `Err` names the media to read
    /// first (with [`Runtime::learn_media`]) when its bytes were never looked at. The
    /// projection asks synchronously, so the caller reads what was missing and asks again.
    pub(super) fn verdict(&self, record: &AttachmentRecord) -> Result<Verdict, UnreadMedia> {
        if let Some(reason) = self.not_downloaded.get(&record.id) {
            return Ok(Verdict::NotDownloaded {
                reason: reason.clone(),
            });
        }
        if let Some(reason) = self.rejected.get(&record.id) {
            return Ok(Verdict::Rejected {
                reason: reason.clone(),
            });
        }
        if record.media_type.starts_with("image/") {
            if !matches!(
                record.media_type.as_str(),
                "image/png" | "image/jpeg" | "image/gif" | "image/webp"
            ) {
                return Ok(Verdict::Unsupported {
                    reason: format!("{} images are not supported", record.media_type),
                });
            }
            if record.dimensions.is_none() {
                return Ok(Verdict::Unsupported {
                    reason: "the image is broken: its header cannot be read".to_owned(),
                });
            }
        } else if !record.media_type.starts_with("audio/") {
            return Ok(Verdict::Unsupported {
                reason: format!("{} cannot be shown to the model", record.media_type),
            });
        }
        let fits = record.dimensions.is_some_and(|(w, h)| {
            let max = self.shared.assembly.profile.attachment.max_image_dimension;
            w <= max && h <= max
        });
        let check = (record.media_type.starts_with("image/") && fits)
            .then_some(self.shared.assembly.profile.attachment.max_image_dimension);
        let Some(known) = self.known_media_info(&record.url) else {
            return Err(UnreadMedia {
                url: record.url.clone(),
                image_check: check,
            });
        };
        Ok(match known {
            Ok(None) => Verdict::Available,
            Ok(Some(broken)) => Verdict::Unsupported { reason: broken },
            Err(MediaFailure::Deleted) => Verdict::Deleted {
                reason: self.deleted_reason(),
            },
            Err(MediaFailure::Unreadable(reason)) => Verdict::Unavailable { reason },
        })
    }

    pub(super) async fn media_part(&self, url: &str, media_type: &str) -> Part {
        match self.load_media(url).await {
            Ok(bytes) => {
                use base64::Engine as _;
                let part = MediaPart {
                    media_type: media_type.to_owned(),
                    url: url.to_owned(),
                    bytes: bytes.len() as u64,
                    sha256: sha256_hex(&bytes),
                    data: Some(base64::engine::general_purpose::STANDARD.encode(&bytes)),
                };
                if media_type.starts_with("audio/") {
                    Part::Audio(part)
                } else {
                    Part::Image(part)
                }
            }
            Err(reason) => Part::Text {
                text: format!("[attachment {url} could not be read: {reason}]"),
            },
        }
    }
}
