//! The projection: which attachment bytes and reasons one request carries (PRJ-3..PRJ-12), and
//! the delivery-state change to apply once its response is persisted.
//!
//! The order of the rules is the order of the code: source and state checks, capability,
//! verdict and per-image limits, batched pruning of `recent` (PRJ-5), then budget selection
//! (PRJ-8), then the messages, one per source.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::config::{AttachmentConfig, Lifetime};
use crate::limits::encoded_len;
use crate::record::{AttachmentRecord, MediaKind, SourceLink, Verdict};
use crate::state::{DeliveryState, Mark, PendingChange};
use crate::wording::{self, ProviderLimit, Reason, Shortfall};

/// Everything one projection reads. The caller gathers it; projection does no I/O.
pub struct ProjectionInput<'a> {
    /// The history's attachment records, in history order.
    pub records: &'a [AttachmentRecord],
    /// Whether a source record is still in the active context: not withdrawn, not removed
    /// (PRJ-7, PRJ-11). Ask it before any context engine folds tool results.
    pub active: &'a dyn Fn(&SourceLink) -> bool,
    /// The resolver's verdict for a record in this request. Called at most once per record and
    /// only for records still in play whose kind the model accepts.
    pub verdict: &'a dyn Fn(&AttachmentRecord) -> Verdict,
    /// The persisted delivery state.
    pub state: &'a DeliveryState,
    /// The profile's `attachment` section.
    pub config: &'a AttachmentConfig,
    /// The effective image capability (PRO-8, see [`effective_image_input`]); when false only
    /// reasons are shown and every image behaves as `once` (PRJ-12).
    ///
    /// [`effective_image_input`]: crate::effective_image_input
    pub image_input: bool,
    /// Whether the main model accepts audio; otherwise audio gets a terminal reason.
    pub audio_input: bool,
}

/// Every source is active until a context engine says otherwise.
fn every_source_active(_: &SourceLink) -> bool {
    true
}

/// Every record is readable until a resolver says otherwise.
fn every_record_available(_: &AttachmentRecord) -> Verdict {
    Verdict::Available
}

impl<'a> ProjectionInput<'a> {
    /// The records, their delivery state and the configuration, with the defaults of a caller
    /// that has no context engine and no resolver yet: every source active, every record
    /// [`Verdict::Available`], a model that accepts images (so image input is what
    /// `config.image_input` allows) and no audio. The setters below change each.
    pub fn new(
        records: &'a [AttachmentRecord],
        state: &'a DeliveryState,
        config: &'a AttachmentConfig,
    ) -> Self {
        Self {
            records,
            active: &every_source_active,
            verdict: &every_record_available,
            state,
            config,
            image_input: config.image_input,
            audio_input: false,
        }
    }

    /// Asks `active` whether a source is still in the active context (PRJ-7, PRJ-11).
    pub fn active(self, active: &'a dyn Fn(&SourceLink) -> bool) -> Self {
        Self { active, ..self }
    }

    /// Asks `verdict` whether a record's bytes are readable for this request.
    pub fn verdict(self, verdict: &'a dyn Fn(&AttachmentRecord) -> Verdict) -> Self {
        Self { verdict, ..self }
    }

    /// What the main model accepts: image input becomes the effective capability (the
    /// profile's `imageInput` and the model's `image` input, PRO-8), audio as given.
    pub fn model_input(self, input: ModelInput) -> Self {
        Self {
            image_input: crate::effective_image_input(self.config, input.images),
            audio_input: input.audio,
            ..self
        }
    }
}

/// The kinds of media the main model takes as input ([`ProjectionInput::model_input`]); named
/// fields, since two flags in a row are easy to swap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelInput {
    /// The model takes images.
    pub images: bool,
    /// The model takes audio.
    pub audio: bool,
}

impl fmt::Debug for ProjectionInput<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProjectionInput")
            .field("records", &self.records.len())
            .field("state", &self.state.len())
            .field("config", self.config)
            .field("image_input", &self.image_input)
            .field("audio_input", &self.audio_input)
            .finish_non_exhaustive()
    }
}

/// The result of one projection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Projection {
    /// Attachment messages, in the history order of their sources; place each right after
    /// its source.
    pub messages: Vec<AttachmentMessage>,
    /// What to commit if, and only if, this request's response is persisted.
    pub pending: PendingChange,
}

/// One user message carrying a source's attachments (PRJ-3). It exists only when the source has
/// something to deliver: bytes, or a reason why they are not provided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentMessage {
    /// Stable id derived from the source ([`SourceLink::message_id`]).
    pub id: String,
    /// The source this message follows.
    pub after: SourceLink,
    /// Stable timestamp: `created_at` of the source's earliest record.
    pub created_at: String,
    /// For each record in arrival order: a label line and the media, or one reason line.
    pub content: Vec<AttachmentContent>,
}

/// One part of an attachment message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentContent {
    /// Text the model reads (wording in one module, `wording.rs`).
    Text(String),
    /// Bytes to embed; the caller reads them from `url`.
    Media {
        /// The record whose bytes these are.
        record_id: String,
        /// Where the bytes are.
        url: String,
        /// Their media type.
        media_type: String,
        /// Their size.
        bytes: u64,
    },
}

/// What happens to a record in this request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// May be embedded, subject to pruning and the budget.
    Candidate,
    /// Embedded in this request.
    Embed,
    /// Not provided; the reason is shown.
    Reason(Reason),
    /// A viewed `retain` image the budget leaves out this time; it may come back (PRJ-8).
    Silent,
    /// A viewed `recent` image pruned or left out under the hard budget: released for good.
    Released,
}

/// A record still in play in this request.
#[derive(Debug)]
struct Item<'r> {
    /// Position in `records` (history order), the tie-breaker after `seq`.
    idx: usize,
    record: &'r AttachmentRecord,
    kind: MediaKind,
    /// The lifetime in force: always `once` for images when image input is off (PRJ-12).
    lifetime: Lifetime,
    viewed: bool,
    outcome: Outcome,
}

impl Item<'_> {
    fn arrival(&self) -> (u64, usize) {
        (self.record.seq, self.idx)
    }
}

/// Projects the attachments of one request. Pure: the same input gives the same output
/// (PRJ-14), and nothing changes until the caller commits [`Projection::pending`].
pub fn project(input: &ProjectionInput<'_>) -> Projection {
    let mut items = live_items(input);
    prune_recent(&mut items, MediaKind::Image, input.config);
    prune_recent(&mut items, MediaKind::Audio, input.config);
    select_images(&mut items, input.config);
    for item in &mut items {
        // Audio has no budget of its own: everything that survived pruning is embedded.
        if item.outcome == Outcome::Candidate {
            item.outcome = Outcome::Embed;
        }
    }
    assemble(input, &items)
}

/// Source and state checks, capability, verdict and per-image limits (PRJ-9..PRJ-12).
fn live_items<'r>(input: &ProjectionInput<'r>) -> Vec<Item<'r>> {
    let mut items = Vec::new();
    let mut states = input.state.cursor();
    for (idx, record) in input.records.iter().enumerate() {
        // Most records of a long history are finished; the state decides that with the fewest
        // memory touches, so it goes first.
        let st = states.get(record.seq, &record.id);
        if st.released || st.reason_delivered || st.consumed {
            continue;
        }
        let kind = MediaKind::of(&record.media_type);
        let lifetime = if kind == MediaKind::Image && !input.image_input {
            Lifetime::Once
        } else {
            record.lifetime
        };
        if lifetime == Lifetime::Once && st.viewed {
            continue;
        }
        // PRJ-2: with messageImageInput off, platform images stay out of the main context.
        if kind == MediaKind::Image
            && !input.config.message_image_input
            && matches!(record.source, SourceLink::Message { .. })
        {
            continue;
        }
        // PRJ-7, PRJ-11: a source that left the active context ends its attachments, whatever
        // the persisted state says.
        if !(input.active)(&record.source) {
            continue;
        }
        let outcome = classify(record, kind, input);
        items.push(Item {
            idx,
            record,
            kind,
            lifetime,
            viewed: st.viewed,
            outcome,
        });
    }
    items
}

fn classify(record: &AttachmentRecord, kind: MediaKind, input: &ProjectionInput<'_>) -> Outcome {
    match kind {
        MediaKind::Image if !input.image_input => return Outcome::Reason(Reason::ImageInputOff),
        MediaKind::Audio if !input.audio_input => return Outcome::Reason(Reason::AudioInputOff),
        MediaKind::Other => return Outcome::Reason(Reason::UnsupportedType),
        MediaKind::Image | MediaKind::Audio => {}
    }
    let unavailable = match (input.verdict)(record) {
        Verdict::Available => None,
        Verdict::Unavailable { reason } => Some(reason),
        Verdict::Unsupported { reason } => return Outcome::Reason(Reason::Unsupported(reason)),
        Verdict::NotDownloaded { reason } => {
            return Outcome::Reason(Reason::NotDownloaded(reason));
        }
        Verdict::Rejected { reason } => return Outcome::Reason(Reason::Rejected(reason)),
        Verdict::Deleted { reason } => return Outcome::Reason(Reason::Deleted(reason)),
    };
    // A limit the image can never meet is terminal even while the bytes are unreadable:
    // retrying would only repeat a wait that cannot end.
    if kind == MediaKind::Image
        && let Some(reason) = over_limit(record, input.config)
    {
        return Outcome::Reason(reason);
    }
    match unavailable {
        Some(reason) => Outcome::Reason(Reason::Unavailable(reason)),
        None => Outcome::Candidate,
    }
}

/// The per-image limits of PRJ-9, checked on the record itself: the profile's first (so its
/// reasons read as before), then the provider's (see [`ImageLimits`]).
///
/// [`ImageLimits`]: crate::ImageLimits
fn over_limit(record: &AttachmentRecord, config: &AttachmentConfig) -> Option<Reason> {
    if record.bytes > config.max_image_bytes {
        return Some(Reason::OverImageBytes);
    }
    if record.bytes > config.max_total_image_bytes {
        return Some(Reason::OverTotalBytes);
    }
    if let Some((width, height)) = record.dimensions
        && (width > config.max_image_dimension || height > config.max_image_dimension)
    {
        return Some(Reason::OverDimension { width, height });
    }
    let limits = &config.provider_limits;
    let encoded = encoded_len(record.bytes);
    if let Some(max) = limits.image_bytes
        && encoded > max
    {
        return Some(Reason::OverProvider(ProviderLimit::ImageBytes { max }));
    }
    if let Some(max) = limits.request_bytes
        && encoded > max
    {
        return Some(Reason::OverProvider(ProviderLimit::RequestBytes { max }));
    }
    let (width, height) = record.dimensions?;
    let over = |max: u32| width > max || height > max;
    if let Some(max) = limits.dimension
        && over(max)
    {
        return Some(Reason::OverProvider(ProviderLimit::Dimension {
            width,
            height,
            max,
        }));
    }
    // A many-images rule that starts at 0 images applies to every request: terminal too.
    if let Some((0, max)) = limits.many()
        && over(max)
    {
        return Some(Reason::OverProvider(ProviderLimit::Dimension {
            width,
            height,
            max,
        }));
    }
    None
}

/// PRJ-5: count the active `recent` items of `kind` (viewed and unviewed, readable now or not);
/// once the excess over `recentImageCount` reaches a batch, release the oldest viewed ones, whole
/// batches at a time, so the prefix stays unchanged between removals. Unviewed items are never
/// pruned, so fewer may go than the batches ask for.
fn prune_recent(items: &mut [Item<'_>], kind: MediaKind, config: &AttachmentConfig) {
    let mut pool: Vec<usize> = (0..items.len())
        .filter(|&i| {
            let it = &items[i];
            it.kind == kind
                && it.lifetime == Lifetime::Recent
                && match &it.outcome {
                    Outcome::Candidate => true,
                    Outcome::Reason(r) => !r.is_terminal(),
                    Outcome::Embed | Outcome::Silent | Outcome::Released => false,
                }
        })
        .collect();
    let batch = config.image_prune_batch_size.max(1);
    let excess = pool.len().saturating_sub(config.recent_image_count);
    if excess < batch {
        return;
    }
    let mut to_remove = excess / batch * batch;
    pool.sort_by_key(|&i| items[i].arrival());
    for i in pool {
        if to_remove == 0 {
            break;
        }
        if items[i].viewed {
            items[i].outcome = Outcome::Released;
            to_remove -= 1;
        }
    }
}

/// PRJ-8: fill the request's image budget in the Decision order — unviewed in arrival order,
/// viewed `retain` in arrival order, viewed `recent` newest first. An image that does not fit
/// what is left is skipped, and later ones may still fit.
///
/// The budget is the profile's and the provider's together: the stricter count, the profile's
/// total bytes and the provider's base64 request bytes, and the many-images rule (once an
/// image over its side limit is in, the request holds at most that many images).
///
/// Viewed `recent` images the budget leaves out are released in whole prune batches
/// (`imagePruneBatchSize`), oldest first: releasing one per request would change an earlier
/// message in every request and break the provider's prefix cache each time.
fn select_images(items: &mut [Item<'_>], config: &AttachmentConfig) {
    let candidates = |pred: &dyn Fn(&Item<'_>) -> bool| -> Vec<usize> {
        let mut v: Vec<usize> = (0..items.len())
            .filter(|&i| {
                let it = &items[i];
                it.kind == MediaKind::Image && it.outcome == Outcome::Candidate && pred(it)
            })
            .collect();
        v.sort_by_key(|&i| items[i].arrival());
        v
    };
    let unviewed = candidates(&|it| !it.viewed);
    let retain = candidates(&|it| it.viewed && it.lifetime == Lifetime::Retain);
    let mut recent = candidates(&|it| it.viewed && it.lifetime == Lifetime::Recent);
    recent.reverse();

    let limits = &config.provider_limits;
    let count_limit = config
        .max_image_count
        .min(limits.images.unwrap_or(usize::MAX));
    let many = limits.many();
    let mut selected = 0usize;
    let mut big_selected = false;
    let mut bytes_left = config.max_total_image_bytes;
    let mut encoded_left = limits.request_bytes.unwrap_or(u64::MAX);
    let mut released = 0usize;
    for i in unviewed
        .into_iter()
        .chain(retain)
        .chain(recent.iter().copied())
    {
        let item = &mut items[i];
        let bytes = item.record.bytes;
        let encoded = encoded_len(bytes);
        let big = many.is_some_and(|(_, side)| {
            item.record
                .dimensions
                .is_some_and(|(w, h)| w > side || h > side)
        });
        let cap = match many {
            Some((above, _)) if big || big_selected => count_limit.min(above),
            _ => count_limit,
        };
        let shortfall = if selected >= count_limit {
            Some(Shortfall::Count)
        } else if selected >= cap {
            Some(Shortfall::ManyImages)
        } else if bytes > bytes_left {
            Some(Shortfall::Bytes { left: bytes_left })
        } else if encoded > encoded_left {
            Some(Shortfall::RequestBytes { left: encoded_left })
        } else {
            None
        };
        match shortfall {
            None => {
                item.outcome = Outcome::Embed;
                selected += 1;
                big_selected |= big;
                bytes_left -= bytes;
                encoded_left -= encoded;
            }
            Some(shortfall) if !item.viewed => {
                item.outcome = Outcome::Reason(Reason::NoCapacity(shortfall));
            }
            Some(_) if item.lifetime == Lifetime::Retain => item.outcome = Outcome::Silent,
            Some(_) => {
                item.outcome = Outcome::Released;
                released += 1;
            }
        }
    }

    // Round the budget's releases up to a whole batch with the oldest viewed `recent` images
    // still selected: they would be the next to go, one request later each.
    let batch = config.image_prune_batch_size.max(1);
    let mut extra = if released.is_multiple_of(batch) {
        0
    } else {
        batch - released % batch
    };
    for &i in recent.iter().rev() {
        if extra == 0 {
            break;
        }
        if items[i].outcome == Outcome::Embed {
            items[i].outcome = Outcome::Released;
            extra -= 1;
        }
    }
}

/// One message per source with content, in the history order of sources; the pending change.
fn assemble(input: &ProjectionInput<'_>, items: &[Item<'_>]) -> Projection {
    let mut pending = PendingChange::default();
    // Per message slot: its source and its content. Items are visited in arrival order, so
    // each message's content comes out in arrival order too.
    let mut slots: Vec<(&SourceLink, Vec<AttachmentContent>)> = Vec::new();
    let mut by_source: HashMap<&SourceLink, usize> = HashMap::new();
    let mut ordered: Vec<&Item<'_>> = items.iter().collect();
    ordered.sort_by_key(|it| it.arrival());

    for item in ordered {
        let record = item.record;
        match &item.outcome {
            Outcome::Embed => {
                pending.viewed.push(mark(record));
                if item.lifetime == Lifetime::Once {
                    pending.consumed.push(mark(record));
                }
            }
            Outcome::Reason(reason) => {
                if reason.is_terminal() {
                    pending.reason_delivered.push(mark(record));
                }
            }
            Outcome::Released => {
                pending.released.push(mark(record));
                continue;
            }
            Outcome::Silent | Outcome::Candidate => continue,
        }
        let slot = *by_source.entry(&record.source).or_insert_with(|| {
            slots.push((&record.source, Vec::new()));
            slots.len() - 1
        });
        let content = &mut slots[slot].1;
        match &item.outcome {
            Outcome::Reason(reason) => content.push(AttachmentContent::Text(wording::reason_text(
                reason,
                &record.url,
                &record.media_type,
                record.bytes,
                input.config,
            ))),
            _ => {
                content.push(AttachmentContent::Text(wording::label(&record.url)));
                content.push(AttachmentContent::Media {
                    record_id: record.id.clone(),
                    url: record.url.clone(),
                    media_type: record.media_type.clone(),
                    bytes: record.bytes,
                });
            }
        }
    }

    let heads = source_heads(input.records, &by_source);
    let mut messages: Vec<(usize, AttachmentMessage)> = slots
        .into_iter()
        .zip(heads)
        .map(|((source, content), (first_idx, created_at))| {
            let message = AttachmentMessage {
                id: source.message_id(),
                after: source.clone(),
                created_at: created_at.to_owned(),
                content,
            };
            (first_idx, message)
        })
        .collect();
    messages.sort_by_key(|(first_idx, _)| *first_idx);
    Projection {
        messages: messages.into_iter().map(|(_, m)| m).collect(),
        pending,
    }
}

fn mark(record: &AttachmentRecord) -> Mark {
    Mark {
        id: record.id.clone(),
        seq: record.seq,
    }
}

/// For each message slot: the history position of its source's first record and the
/// `created_at` of its earliest-arriving record — both independent of what is delivered now,
/// so ids, order and timestamps stay put while records come and go (PRJ-14).
fn source_heads<'r>(
    records: &'r [AttachmentRecord],
    by_source: &HashMap<&SourceLink, usize>,
) -> Vec<(usize, &'r str)> {
    if by_source.is_empty() {
        return Vec::new();
    }
    let mut heads: Vec<Option<Head<'r>>> = vec![None; by_source.len()];
    let filter = Bloom::new(by_source.keys().copied());
    let mut prev: Option<(&SourceLink, Option<usize>)> = None;
    for (idx, record) in records.iter().enumerate() {
        // Records of one source are usually adjacent: one lookup per run. Most runs belong to
        // sources without a message, which the filter rules out without the map's slower hash.
        let slot = match prev {
            Some((source, slot)) if *source == record.source => slot,
            _ => {
                let slot = if filter.may_contain(&record.source) {
                    by_source.get(&record.source).copied()
                } else {
                    None
                };
                prev = Some((&record.source, slot));
                slot
            }
        };
        let Some(slot) = slot else { continue };
        let arrival = (record.seq, idx);
        match &mut heads[slot] {
            Some(head) => {
                if arrival < head.earliest {
                    head.earliest = arrival;
                    head.created_at = &record.created_at;
                }
            }
            empty => {
                *empty = Some(Head {
                    first: idx,
                    earliest: arrival,
                    created_at: &record.created_at,
                });
            }
        }
    }
    heads
        .into_iter()
        // Every slot came from a record of `records`, so each is filled; the fallback is unused.
        .map(|h| h.map_or((usize::MAX, ""), |h| (h.first, h.created_at)))
        .collect()
}

/// What [`source_heads`] tracks per message slot while it scans.
#[derive(Debug, Clone, Copy)]
struct Head<'r> {
    /// History position of the source's first record.
    first: usize,
    /// `(seq, position)` of its earliest-arriving record.
    earliest: (u64, usize),
    /// That record's `created_at`.
    created_at: &'r str,
}

/// A one-hash Bloom filter over sources: no false negatives, about 3 % false positives, which
/// then pay for the real lookup. The map keeps std's DoS-resistant hasher; this cheap hash only
/// decides whether to ask it.
#[derive(Debug)]
struct Bloom {
    bits: Vec<u64>,
    mask: u64,
}

impl Bloom {
    fn new<'s>(keys: impl ExactSizeIterator<Item = &'s SourceLink>) -> Self {
        let nbits = (keys.len().max(2) * 32).next_power_of_two();
        let mut bloom = Bloom {
            bits: vec![0; nbits / 64],
            mask: nbits as u64 - 1,
        };
        for key in keys {
            let bit = bloom.bit(key);
            bloom.bits[(bit / 64) as usize] |= 1 << (bit % 64);
        }
        bloom
    }

    fn may_contain(&self, key: &SourceLink) -> bool {
        let bit = self.bit(key);
        self.bits[(bit / 64) as usize] & (1 << (bit % 64)) != 0
    }

    /// The variant and the id through rustc-hash's FxHasher, folded so the high bits count too.
    fn bit(&self, key: &SourceLink) -> u64 {
        use std::hash::Hasher as _;
        let (tag, id) = match key {
            SourceLink::ToolResult { call_id } => (1u8, call_id),
            SourceLink::Message { message_id } => (2u8, message_id),
        };
        let mut hasher = rustc_hash::FxHasher::default();
        hasher.write_u8(tag);
        hasher.write(id.as_bytes());
        let h = hasher.finish();
        (h ^ (h >> 29) ^ (h >> 47)) & self.mask
    }
}
