//! PRJ-5 batched pruning: the seed's worked example and the `recent-pruning` scenario.

use ishiki_projection::{AttachmentConfig, Lifetime};

use super::world::{World, embedded};

fn seed_config() -> AttachmentConfig {
    AttachmentConfig {
        recent_image_count: 3,
        image_prune_batch_size: 2,
        max_image_count: 10,
        ..AttachmentConfig::default()
    }
}

/// Builds `n` recent images s1..sn; those listed in `viewed` were embedded in a persisted request.
fn world_with(n: usize, viewed: &[usize], config: AttachmentConfig) -> World {
    let mut w = World::new(config);
    for i in 1..=n {
        w.image(&format!("s{i}"), Lifetime::Recent);
    }
    let ids: Vec<String> = viewed.iter().map(|i| format!("s{i}")).collect();
    w.mark_viewed(&ids.iter().map(String::as_str).collect::<Vec<_>>());
    w
}

#[test]
fn prj5_seed_worked_example() {
    // (active recent images, viewed ones, pruned now, embedded now) with count 3 and batch 2.
    type Row = (
        usize,
        &'static [usize],
        &'static [&'static str],
        &'static [&'static str],
    );
    let cases: [Row; 8] = [
        (3, &[1, 2, 3], &[], &["s1", "s2", "s3"]),
        // The 4th triggers nothing.
        (4, &[1, 2, 3], &[], &["s1", "s2", "s3", "s4"]),
        (4, &[1, 2, 3, 4], &[], &["s1", "s2", "s3", "s4"]),
        // The 5th removes up to 2, oldest viewed first.
        (5, &[1, 2, 3, 4], &["s1", "s2"], &["s3", "s4", "s5"]),
        // Fewer if fewer are viewed; unviewed are never pruned.
        (5, &[3], &["s3"], &["s1", "s2", "s4", "s5"]),
        (5, &[], &[], &["s1", "s2", "s3", "s4", "s5"]),
        (5, &[2, 4, 5], &["s2", "s4"], &["s1", "s3", "s5"]),
        // Whole batches: an excess of 3 removes one batch, an excess of 4 two.
        (
            6,
            &[1, 2, 3, 4, 5],
            &["s1", "s2"],
            &["s3", "s4", "s5", "s6"],
        ),
    ];
    for (n, viewed, pruned, shown) in cases {
        let w = world_with(n, viewed, seed_config());
        let p = w.project();
        assert_eq!(p.pending.released(), pruned, "{n} {viewed:?}");
        assert_eq!(embedded(&p), shown, "{n} {viewed:?}");
    }
    let w = world_with(7, &[1, 2, 3, 4, 5, 6], seed_config());
    assert_eq!(w.project().pending.released(), ["s1", "s2", "s3", "s4"]);
}

#[test]
fn prj5_recent_pruning_scenario() {
    // examples/recent-pruning.yaml: one recent screenshot per step, each viewed by the
    // next request. Request k (1-based) sees the images of steps 1..k-1.
    let mut w = World::new(seed_config());
    let mut requests = Vec::new();
    let mut last = w.succeed();
    requests.push(embedded(&last));
    for i in 1..=5 {
        w.image(&format!("s{i}"), Lifetime::Recent);
        last = w.succeed();
        requests.push(embedded(&last));
    }
    let want: [&[&str]; 6] = [
        &[],
        &["s1"],
        &["s1", "s2"],
        &["s1", "s2", "s3"],
        &["s1", "s2", "s3", "s4"],
        &["s3", "s4", "s5"],
    ];
    assert_eq!(requests, want);
    // Batching keeps the prefix: the next request with no new image repeats the messages of
    // request 6 exactly (same ids, order, timestamps).
    assert_eq!(w.succeed().messages, last.messages);
    assert_eq!(w.project().messages, last.messages);
}

#[test]
fn prj5_a_failed_request_prunes_nothing() {
    let mut w = world_with(5, &[1, 2, 3, 4], seed_config());
    let failed = w.fail();
    assert_eq!(failed.pending.released(), ["s1", "s2"]);
    assert!(!w.state.record("s1").released);
    // The retry decides the same.
    assert_eq!(w.succeed(), failed);
    assert!(w.state.record("s1").released && w.state.record("s2").released);
}

#[test]
fn prj5_batch_zero_is_treated_as_one() {
    let mut c = seed_config();
    c.image_prune_batch_size = 0;
    let w = world_with(4, &[1, 2, 3, 4], c);
    assert_eq!(w.project().pending.released(), ["s1"]);
}
