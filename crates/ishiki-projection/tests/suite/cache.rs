//! Prefix-cache breaks caused by attachments (PRJ-5, PRJ-8, PRJ-14): how often a request
//! changes a message an earlier request already carried, per image that arrives.
//!
//! A provider reuses its prefix cache only while every message of the previous request comes
//! back unchanged; new messages may only follow. An attachment message of an earlier source
//! that changes (an image released, a reason appearing) breaks the cache from there on.

use ishiki_projection::{AttachmentConfig, AttachmentMessage, Lifetime, Projection, SourceLink};

use super::world::{World, embedded};

/// Whether `now` changed or dropped a message `before` carried, or put a new one among them:
/// the messages of sources `before` knew must come back exactly, in the same order.
fn breaks_prefix(before: &Projection, now: &Projection, known: &[SourceLink]) -> bool {
    let old: Vec<&AttachmentMessage> = now
        .messages
        .iter()
        .filter(|m| known.contains(&m.after))
        .collect();
    let prev: Vec<&AttachmentMessage> = before.messages.iter().collect();
    old != prev
}

/// One `retain` image, then `n` `recent` images, one per successful request (the screenshot
/// loop of a computer-use agent). Returns the number of requests that broke the prefix.
fn breaks_with_retain(config: AttachmentConfig, n: usize) -> usize {
    let mut w = World::new(config);
    w.image("keep", Lifetime::Retain);
    let mut before = w.succeed();
    let mut known: Vec<SourceLink> = w.records.iter().map(|r| r.source.clone()).collect();
    let mut breaks = 0;
    for i in 1..=n {
        w.image(&format!("r{i}"), Lifetime::Recent);
        let now = w.succeed();
        assert!(
            embedded(&now).contains(&"keep".to_owned()),
            "the retain image left request {i}: {:?}",
            embedded(&now)
        );
        if breaks_prefix(&before, &now, &known) {
            breaks += 1;
        }
        known = w.records.iter().map(|r| r.source.clone()).collect();
        before = now;
    }
    breaks
}

#[test]
fn prj8_budget_releases_break_the_cache_no_more_often_than_pruning() {
    // The profile defaults: recentImageCount 3, imagePruneBatchSize 2, maxImageCount 4. With
    // one retain image the count budget, not pruning, decides which recent images go.
    let images = 40;
    let breaks = breaks_with_retain(AttachmentConfig::default(), images);
    // Without a retain image, pruning alone breaks once per batch of 2 images.
    let mut w = World::new(AttachmentConfig::default());
    let mut before = w.succeed();
    let mut known = Vec::new();
    let mut pruning_breaks = 0;
    for i in 1..=images {
        w.image(&format!("r{i}"), Lifetime::Recent);
        let now = w.succeed();
        if breaks_prefix(&before, &now, &known) {
            pruning_breaks += 1;
        }
        known = w.records.iter().map(|r| r.source.clone()).collect();
        before = now;
    }
    println!(
        "cache breaks per image: {breaks}/{images} with a retain image, \
         {pruning_breaks}/{images} with pruning alone"
    );
    assert!(pruning_breaks > 0, "pruning never acted");
    // The same cadence; the first release may come one request earlier.
    assert!(
        breaks <= pruning_breaks + 1,
        "{breaks} breaks with a retain image, {pruning_breaks} with pruning alone"
    );
}

#[test]
fn prj8_budget_releases_follow_the_batch_size() {
    for batch in 1..=4 {
        let config = AttachmentConfig {
            image_prune_batch_size: batch,
            ..AttachmentConfig::default()
        };
        let images = 48;
        let breaks = breaks_with_retain(config, images);
        println!("batch {batch}: {breaks} cache breaks for {images} images");
        // One break per `batch` images, or per image slot the retain image leaves to `recent`
        // ones (maxImageCount 4 - 1) when the batch is larger than that.
        let per = batch.min(3);
        assert!(
            breaks <= images.div_ceil(per),
            "batch {batch}: {breaks} breaks for {images} images"
        );
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]

    /// PRJ-5, PRJ-8: whatever the budgets, viewed `recent` images leave in whole batches, or all
    /// at once; never one at a time while others of them stay.
    #[test]
    fn prj8_viewed_recent_images_leave_in_whole_batches(
        count in 1usize..=6,
        recent in 0usize..=4,
        batch in 1usize..=3,
        arrivals in proptest::collection::vec(proptest::prelude::any::<(bool, bool)>(), 1..24),
    ) {
        let config = AttachmentConfig {
            recent_image_count: recent,
            image_prune_batch_size: batch,
            max_image_count: count,
            ..AttachmentConfig::default()
        };
        let mut w = World::new(config);
        for (i, (retain, request)) in arrivals.into_iter().enumerate() {
            let lifetime = if retain { Lifetime::Retain } else { Lifetime::Recent };
            w.image(&format!("i{i}"), lifetime);
            if !request {
                continue;
            }
            let viewed_before = w.state.clone();
            let p = w.succeed();
            let released = p.pending.released().len();
            let recent_left = embedded(&p).iter().any(|id| {
                viewed_before.record(id).viewed
                    && w.records.iter().any(|r| &r.id == id && r.lifetime == Lifetime::Recent)
            });
            proptest::prop_assert!(
                released.is_multiple_of(batch) || !recent_left,
                "{released} released with batch {batch}: {:?}",
                embedded(&p)
            );
        }
    }
}
