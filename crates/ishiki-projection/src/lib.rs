//! `ishiki-projection`: which attachment bytes each model request carries, and why not.
//!
//! Tool results and platform messages leave *attachment records* in history — a resource URL
//! linked to its source, with a [`Lifetime`] (PRJ-1). Before each request, [`project`] turns
//! those records, their persisted [`DeliveryState`], the [`AttachmentConfig`] budgets and the
//! caller's per-record [`Verdict`] into attachment messages (one per source, placed right after
//! it) and a [`PendingChange`]. The caller commits that change with [`DeliveryState::commit`]
//! only once the response is persisted, so a failed or aborted step consumes nothing
//! (PRJ-4, PRJ-13).
//!
//! The rules, in the order they apply:
//! - a record whose source left the active context is not shown (PRJ-7, PRJ-11);
//! - `once` is embedded until one carrying request is persisted; `recent` keeps the newest
//!   images, pruning the oldest *viewed* ones in whole batches once the excess over
//!   `recentImageCount` reaches `imagePruneBatchSize` (PRJ-5; `recent` audio is counted among
//!   audio the same way); `retain` is selected every request while its source is active (PRJ-6);
//! - per-request budgets (`maxImageCount`, `maxImageBytes`, `maxTotalImageBytes`,
//!   `maxImageDimension`) together with the main model's provider limits ([`ImageLimits`]:
//!   images and base64 bytes per request, the many-images side rule; the stricter applies):
//!   unviewed first in arrival order, then viewed `retain` in arrival order, then viewed
//!   `recent` newest first; what does not fit waits, except a viewed `recent` image, which is
//!   released — in whole `imagePruneBatchSize` batches, like pruning, so a budget does not break
//!   the prefix cache in every request (PRJ-8);
//! - terminal reasons (capability off, unsupported, over a per-image limit of the profile or
//!   the provider, refused by the provider, not downloaded) are stated once; unreadable-now and
//!   over-capacity are retried (PRJ-9, PRJ-10);
//! - with image input off, messages only say that visual content was not provided (PRJ-12);
//! - message ids, order and timestamps derive from the sources, so an unchanged selection
//!   gives an unchanged prefix (PRJ-14).
//!
//! This crate does no I/O of any kind: where the bytes come from is the caller's business; it
//! only reads the verdict. Every text the model reads is listed, with sample values, in
//! [`texts`].
//!
//! Two attachment forms, on purpose: a tool result first names its media with the outlet's full
//! marker, `[attachment: URL; image/png; 428 bytes; 64x48]` (what it is, once, in the result the
//! model reads); an attachment message then refers to it by the short label
//! `[attachment: URL]`, followed by the bytes or by the one line that says why they are not
//! there. The URL is the key that ties the two together.
//!
//! Cost: one forward sweep over the records beside the state (kept sorted by each record's
//! `(seq, id)`, so history in arrival order needs no hashing), then work proportional to the
//! records still in play: about 0.5 ms for 10,000 records of which 1,000 images are in play
//! (`cargo bench -p ishiki-projection --bench bench`).
//!
//! # Example
//!
//! ```
//! use ishiki_projection::{
//!     AttachmentConfig, AttachmentContent, AttachmentRecord, DeliveryState, Lifetime,
//!     ModelInput, ProjectionInput, SourceLink, Verdict, project,
//! };
//!
//! let tool_result = SourceLink::ToolResult { call_id: "c1".into() };
//! let records = vec![
//!     AttachmentRecord::new("a1", tool_result, "artifact://screenshot/1.png", "image/png", 2048)
//!         .with_dimensions(800, 600)
//!         .with_lifetime(Lifetime::Once)
//!         .at(1, "2025-01-01T00:00:00Z"),
//! ];
//! let config = AttachmentConfig::default();
//! let mut state = DeliveryState::new();
//! // Every source active, every record readable, a model that takes images but no audio.
//! let request = |state: &DeliveryState| {
//!     project(
//!         &ProjectionInput::new(&records, state, &config)
//!             .active(&|_| true)
//!             .verdict(&|_| Verdict::Available)
//!             .model_input(ModelInput { images: true, audio: false }),
//!     )
//! };
//!
//! // The first request embeds the image after its tool result.
//! let first = request(&state);
//! assert_eq!(first.messages[0].id, "att-call-c1");
//! assert!(matches!(first.messages[0].content[1], AttachmentContent::Media { .. }));
//!
//! // The request failed: nothing is committed, so the retry carries it again.
//! assert_eq!(request(&state), first);
//!
//! // The response was persisted: commit, and a `once` image is gone from later requests.
//! state.commit(&first.pending);
//! assert!(request(&state).messages.is_empty());
//! ```

mod config;
mod error;
mod limits;
mod project;
mod record;
mod state;
mod wording;

/// What the model reads in attachment messages: every label and reason line.
///
#[doc = include_str!("../TEXTS.md")]
pub mod texts {}

pub use config::{AttachmentConfig, Lifetime, effective_image_input};
pub use error::{ProjectionError, ProjectionErrorKind};
pub use limits::{ImageLimits, encoded_len};
pub use project::{
    AttachmentContent, AttachmentMessage, ModelInput, Projection, ProjectionInput, project,
};
pub use record::{AttachmentRecord, SourceLink, Verdict};
pub use state::{DeliveryRow, DeliveryState, PendingChange, RecordState};
