//! A proptest state machine over arrivals, successful and failed requests, withdrawals and
//! restarts, checking the projection invariants after every request.

use std::collections::BTreeMap;

use ishiki_projection::{
    AttachmentConfig, AttachmentRecord, DeliveryState, ImageLimits, Lifetime, Projection,
    SourceLink, Verdict, encoded_len,
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::world::{World, all_text, call, embedded, msg, reasons};

#[derive(Debug, Clone, Copy)]
enum Media {
    Image,
    Audio,
    Other,
}

#[derive(Debug, Clone, Copy)]
enum V {
    Available,
    Unavailable,
    Unsupported,
    NotDownloaded,
}

#[derive(Debug, Clone, Copy)]
enum Src {
    NewCall,
    NewMessage,
    Existing(usize),
}

#[derive(Debug, Clone)]
enum Op {
    Arrive {
        lifetime: Lifetime,
        bytes: u64,
        dims: (u32, u32),
        src: Src,
        media: Media,
        verdict: V,
    },
    Succeed,
    Fail,
    Withdraw(usize),
    /// Serialize the state and restore it, as across a restart.
    Restart,
    /// An unavailable resource becomes readable.
    Recover(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let lifetime = prop_oneof![
        Just(Lifetime::Once),
        Just(Lifetime::Recent),
        Just(Lifetime::Retain)
    ];
    let src = prop_oneof![
        3 => Just(Src::NewCall),
        1 => Just(Src::NewMessage),
        1 => any::<usize>().prop_map(Src::Existing),
    ];
    let media = prop_oneof![
        8 => Just(Media::Image),
        1 => Just(Media::Audio),
        1 => Just(Media::Other),
    ];
    let verdict = prop_oneof![
        8 => Just(V::Available),
        2 => Just(V::Unavailable),
        1 => Just(V::Unsupported),
        1 => Just(V::NotDownloaded),
    ];
    let arrive = (
        lifetime,
        1u64..=12,
        (1u32..=12, 1u32..=12),
        src,
        media,
        verdict,
    )
        .prop_map(|(lifetime, bytes, dims, src, media, verdict)| Op::Arrive {
            lifetime,
            bytes,
            dims,
            src,
            media,
            verdict,
        });
    prop_oneof![
        5 => arrive,
        4 => Just(Op::Succeed),
        2 => Just(Op::Fail),
        1 => any::<usize>().prop_map(Op::Withdraw),
        1 => Just(Op::Restart),
        1 => any::<usize>().prop_map(Op::Recover),
    ]
}

/// Provider limits of the same order as the profile's: none, or some of each kind.
fn provider_limits() -> impl Strategy<Value = ImageLimits> {
    let some = (
        prop::option::of(8u64..=16),
        prop::option::of(12u64..=28),
        prop::option::of(1usize..=4),
        prop::option::of(5u32..=12),
        prop::option::of((0usize..=3, 3u32..=10)),
    )
        .prop_map(
            |(image_bytes, request_bytes, images, dimension, many)| ImageLimits {
                provider: "acme".into(),
                image_bytes,
                request_bytes,
                images,
                dimension,
                many_images: many.map(|m| m.0),
                many_images_dimension: many.map(|m| m.1),
            },
        );
    prop_oneof![1 => Just(ImageLimits::default()), 2 => some]
}

fn config() -> impl Strategy<Value = (AttachmentConfig, bool)> {
    (
        (0usize..=4, 1usize..=3, 1usize..=4),
        (4u64..=12, 6u64..=20, 6u32..=12),
        any::<bool>(),
        prop_oneof![4 => Just(true), 1 => Just(false)],
        provider_limits(),
    )
        .prop_map(
            |(
                (count, batch, max_count),
                (max_bytes, max_total, max_dim),
                msg_in,
                image_input,
                provider_limits,
            )| {
                let config = AttachmentConfig {
                    image_input: true,
                    message_image_input: msg_in,
                    vision_model: None,
                    recent_image_count: count,
                    image_prune_batch_size: batch,
                    max_image_bytes: max_bytes,
                    max_total_image_bytes: max_total,
                    max_image_count: max_count,
                    max_image_dimension: max_dim,
                    provider_limits,
                };
                (config, image_input)
            },
        )
}

struct Sim {
    w: World,
    sources: Vec<SourceLink>,
    next: usize,
    /// How many persisted requests embedded each record.
    successes: BTreeMap<String, usize>,
}

impl Sim {
    fn record(&self, id: &str) -> &AttachmentRecord {
        self.w
            .records
            .iter()
            .find(|r| r.id == id)
            .unwrap_or_else(|| panic!("no record {id}"))
    }

    fn is_image(r: &AttachmentRecord) -> bool {
        r.media_type.starts_with("image/")
    }

    fn gated_out(&self, r: &AttachmentRecord) -> bool {
        Self::is_image(r)
            && !self.w.config.message_image_input
            && matches!(r.source, SourceLink::Message { .. })
    }

    fn effective_once(&self, r: &AttachmentRecord) -> bool {
        r.lifetime == Lifetime::Once || (Self::is_image(r) && !self.w.image_input)
    }

    fn within_limits(&self, r: &AttachmentRecord) -> bool {
        let c = &self.w.config;
        let p = &c.provider_limits;
        let (width, height) = r.dimensions.unwrap_or((0, 0));
        let side = width.max(height);
        let encoded = encoded_len(r.bytes);
        r.bytes <= c.max_image_bytes
            && r.bytes <= c.max_total_image_bytes
            && side <= c.max_image_dimension
            && p.image_bytes.is_none_or(|max| encoded <= max)
            && p.request_bytes.is_none_or(|max| encoded <= max)
            && p.dimension.is_none_or(|max| side <= max)
            && !(p.many_images == Some(0) && p.many_images_dimension.is_some_and(|m| side > m))
    }

    /// An image that nothing but the budget can keep from this request.
    fn deliverable_image(&self, r: &AttachmentRecord) -> bool {
        Self::is_image(r)
            && self.w.image_input
            && !self.gated_out(r)
            && !self.w.inactive.contains(&r.source)
            && !self.w.verdicts.contains_key(&r.id)
            && self.within_limits(r)
    }

    fn finished(&self, r: &AttachmentRecord) -> bool {
        let s = self.w.state.record(&r.id);
        s.released || s.reason_delivered || (self.effective_once(r) && (s.viewed || s.consumed))
    }

    /// Every invariant that must hold for the projection of the current world.
    fn check(&self, p: &Projection) -> Result<(), TestCaseError> {
        let c = &self.w.config;
        // Same inputs, same output.
        prop_assert_eq!(&self.w.project(), p);

        // No request exceeds any budget.
        let images: Vec<&AttachmentRecord> = embedded(p)
            .iter()
            .map(|id| self.record(id))
            .filter(|r| Self::is_image(r))
            .collect();
        prop_assert!(images.len() <= c.max_image_count, "count {}", images.len());
        let total: u64 = images.iter().map(|r| r.bytes).sum();
        prop_assert!(total <= c.max_total_image_bytes, "total {total}");
        for r in &images {
            prop_assert!(self.within_limits(r), "{} over a per-image limit", r.id);
        }
        // Nor any provider limit: count, base64 bytes, the many-images rule.
        let p_limits = &c.provider_limits;
        if let Some(max) = p_limits.images {
            prop_assert!(images.len() <= max, "provider count {}", images.len());
        }
        if let Some(max) = p_limits.request_bytes {
            let encoded: u64 = images.iter().map(|r| encoded_len(r.bytes)).sum();
            prop_assert!(encoded <= max, "provider bytes {encoded}");
        }
        if let (Some(above), Some(side)) = (p_limits.many_images, p_limits.many_images_dimension) {
            let big = images
                .iter()
                .any(|r| r.dimensions.is_some_and(|(w, h)| w > side || h > side));
            prop_assert!(
                !big || images.len() <= above,
                "many-images rule: {}",
                images.len()
            );
        }

        // Viewed `recent` images leave in whole batches (PRJ-5 pruning and the PRJ-8 budget
        // alike), unless none of them is left in the request: one at a time would break the
        // prefix cache in every request.
        let batch = c.image_prune_batch_size.max(1);
        for media in ["image/", "audio/"] {
            let released = p
                .pending
                .released()
                .into_iter()
                .filter(|id| self.record(id).media_type.starts_with(media))
                .count();
            let recent_left = embedded(p).iter().any(|id| {
                let r = self.record(id);
                r.media_type.starts_with(media)
                    && r.lifetime == Lifetime::Recent
                    && self.w.state.record(id).viewed
            });
            prop_assert!(
                released.is_multiple_of(batch) || !recent_left,
                "{released} {media} released with batch {batch} while viewed recent ones stay"
            );
        }

        let text = all_text(p);
        for r in &self.w.records {
            // A released (or otherwise finished) record never returns; nor does one whose
            // source left the active context.
            if self.finished(r) || self.w.inactive.contains(&r.source) || self.gated_out(r) {
                prop_assert!(!text.contains(&r.url), "{} came back: {text}", r.id);
            }
            // A once record is in at most one persisted request.
            if self.effective_once(r) && self.successes.get(&r.id).copied().unwrap_or(0) > 0 {
                prop_assert!(!embedded(p).contains(&r.id), "{} embedded again", r.id);
            }
            // An unviewed image that only the budget can stop is in every request until it
            // is delivered: embedded, or waiting with a reason.
            let s = self.w.state.record(&r.id);
            if self.deliverable_image(r) && !s.viewed && !self.finished(r) {
                let label = format!("[attachment: {}]", r.url);
                let waiting = reasons(p).iter().any(|t| {
                    t.starts_with(&label) && t.contains("It will follow in a later request")
                });
                prop_assert!(embedded(p).contains(&r.id) || waiting, "{} missing", r.id);
            }
        }

        // An unviewed image is never pruned or released.
        for id in p.pending.released() {
            prop_assert!(self.w.state.record(id).viewed, "unviewed {id} released");
        }

        // One message per active source, id derived from it.
        let mut ids: Vec<&str> = p.messages.iter().map(|m| m.id.as_str()).collect();
        for m in &p.messages {
            prop_assert_eq!(&m.id, &m.after.message_id());
            prop_assert!(!self.w.inactive.contains(&m.after));
            prop_assert!(!m.content.is_empty());
        }
        ids.dedup();
        prop_assert_eq!(ids.len(), p.messages.len());
        Ok(())
    }

    fn succeed(&mut self) -> Result<(), TestCaseError> {
        let p = self.w.project();
        self.check(&p)?;
        self.w.state.commit(&p.pending);
        for id in embedded(&p) {
            *self.successes.entry(id).or_default() += 1;
        }
        Ok(())
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Arrive {
                lifetime,
                bytes,
                dims,
                src,
                media,
                verdict,
            } => {
                self.next += 1;
                let n = self.next;
                let source = match src {
                    Src::Existing(i) if !self.sources.is_empty() => {
                        self.sources[i % self.sources.len()].clone()
                    }
                    Src::NewMessage => msg(&format!("m{n}")),
                    Src::NewCall | Src::Existing(_) => call(&format!("c{n}")),
                };
                if !self.sources.contains(&source) {
                    self.sources.push(source.clone());
                }
                let (media_type, dimensions) = match media {
                    Media::Image => ("image/png", Some(dims)),
                    Media::Audio => ("audio/ogg", None),
                    Media::Other => ("application/pdf", None),
                };
                let id = format!("a{n}");
                self.w
                    .add_full(&id, source, media_type, lifetime, bytes, dimensions);
                let v = match verdict {
                    V::Available => None,
                    V::Unavailable => Some(Verdict::Unavailable {
                        reason: "timeout".into(),
                    }),
                    V::Unsupported => Some(Verdict::Unsupported {
                        reason: "broken".into(),
                    }),
                    V::NotDownloaded => Some(Verdict::NotDownloaded {
                        reason: "too big".into(),
                    }),
                };
                if let Some(v) = v {
                    self.w.verdicts.insert(id, v);
                }
            }
            Op::Succeed => self.succeed()?,
            Op::Fail => {
                let before = self.w.state.clone();
                let p = self.w.project();
                self.check(&p)?;
                prop_assert_eq!(&self.w.state, &before);
            }
            Op::Withdraw(i) => {
                if !self.sources.is_empty() {
                    let s = self.sources[i % self.sources.len()].clone();
                    self.w.inactive.insert(s);
                }
            }
            Op::Restart => {
                let before = self.w.project();
                let json = serde_json::to_string(&self.w.state)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let restored: DeliveryState =
                    serde_json::from_str(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(&restored, &self.w.state);
                self.w.state = restored;
                prop_assert_eq!(self.w.project(), before);
            }
            Op::Recover(i) => {
                let unavailable: Vec<String> = self
                    .w
                    .verdicts
                    .iter()
                    .filter(|(_, v)| matches!(v, Verdict::Unavailable { .. }))
                    .map(|(id, _)| id.clone())
                    .collect();
                if !unavailable.is_empty() {
                    let id = &unavailable[i % unavailable.len()];
                    self.w.verdicts.remove(id);
                }
            }
        }
        Ok(())
    }

    /// Every unreadable resource recovers and requests succeed until nothing is left to do;
    /// then each deliverable `once` image was in exactly one persisted request.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        self.w
            .verdicts
            .retain(|_, v| !matches!(v, Verdict::Unavailable { .. }));
        for _ in 0..self.w.records.len() + 2 {
            self.succeed()?;
        }
        for r in &self.w.records {
            let n = self.successes.get(&r.id).copied().unwrap_or(0);
            if self.effective_once(r) {
                prop_assert!(n <= 1, "{} delivered {n} times", r.id);
            }
            if r.lifetime == Lifetime::Once && self.deliverable_image(r) {
                prop_assert_eq!(n, 1, "{} never delivered", &r.id);
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn prj4_prj5_prj8_prj13_state_machine(
        (config, image_input) in config(),
        ops in prop::collection::vec(op(), 1..48),
    ) {
        let mut world = World::new(config);
        world.image_input = image_input;
        let mut sim = Sim { w: world, sources: Vec::new(), next: 0, successes: BTreeMap::new() };
        for op in &ops {
            sim.apply(op)?;
        }
        sim.drain()?;
    }
}
