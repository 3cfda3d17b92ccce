//! One table-driven test per PRJ requirement (ID in the name), as far as this crate reaches.

use ishiki_projection::{
    AttachmentConfig, AttachmentRecord, DeliveryState, Lifetime, ModelInput, Projection,
    ProjectionInput, SourceLink, Verdict, effective_image_input, project,
};

use super::world::{World, all_text, call, embedded, msg, reasons};

fn cfg() -> AttachmentConfig {
    AttachmentConfig::default()
}

/// A request outcome in a scripted sequence.
#[derive(Debug, Clone, Copy)]
enum Step {
    Ok,
    Fail,
}

fn run(world: &mut World, steps: &[Step]) -> Vec<Projection> {
    steps
        .iter()
        .map(|s| match s {
            Step::Ok => world.succeed(),
            Step::Fail => world.fail(),
        })
        .collect()
}

#[test]
fn pro2_defaults_and_pro8_effective_capability() {
    let c = AttachmentConfig::default();
    assert_eq!(
        (
            c.image_input,
            c.message_image_input,
            c.vision_model.clone(),
            c.recent_image_count,
            c.image_prune_batch_size,
            c.max_image_bytes,
            c.max_total_image_bytes,
            c.max_image_count,
            c.max_image_dimension
        ),
        (true, true, None, 3, 2, 5_242_880, 10_485_760, 4, 1568)
    );
    let parsed: AttachmentConfig =
        serde_json::from_str(r#"{"recentImageCount":5,"imageInput":false}"#).unwrap();
    assert_eq!(
        parsed,
        AttachmentConfig {
            recent_image_count: 5,
            image_input: false,
            ..AttachmentConfig::default()
        }
    );
    for (profile, model, want) in [
        (true, true, true),
        (true, false, false),
        (false, true, false),
        (false, false, false),
    ] {
        let c = AttachmentConfig {
            image_input: profile,
            ..AttachmentConfig::default()
        };
        assert_eq!(effective_image_input(&c, model), want, "{profile} {model}");
    }
}

#[test]
fn pro7_validate_names_the_key() {
    type Edit = fn(&mut AttachmentConfig);
    let cases: [(Edit, Option<&str>); 4] = [
        (|_| {}, None),
        (
            |c| c.image_prune_batch_size = 0,
            Some("attachment.imagePruneBatchSize must be at least 1"),
        ),
        (
            |c| c.max_image_count = 0,
            Some("attachment.maxImageCount must be at least 1"),
        ),
        (|c| c.recent_image_count = 0, None),
    ];
    for (edit, want) in cases {
        let mut c = cfg();
        edit(&mut c);
        assert_eq!(c.validate().err().map(|e| e.to_string()).as_deref(), want);
    }
}

#[test]
fn pro7_every_minimum_is_enforced_and_its_key_named() {
    // MINIMUMS is the one table the profile decoder and validate both read: each key with a
    // minimum of 1 fails at 0, naming that key.
    for (key, min) in AttachmentConfig::MINIMUMS {
        let mut c = cfg();
        match key {
            "recentImageCount" => c.recent_image_count = 0,
            "imagePruneBatchSize" => c.image_prune_batch_size = 0,
            "maxImageBytes" => c.max_image_bytes = 0,
            "maxTotalImageBytes" => c.max_total_image_bytes = 0,
            "maxImageCount" => c.max_image_count = 0,
            "maxImageDimension" => c.max_image_dimension = 0,
            other => panic!("MINIMUMS names `{other}`, which this test does not know"),
        }
        let want = (min > 0).then(|| format!("attachment.{key} must be at least {min}"));
        assert_eq!(c.validate().err().map(|e| e.to_string()), want, "{key}");
        assert_eq!(AttachmentConfig::minimum(key), min);
    }
    assert_eq!(AttachmentConfig::minimum("imageInput"), 0);
}

#[test]
fn prj4_lifetimes_read_and_print_as_their_names() {
    for l in Lifetime::ALL {
        assert_eq!(l.as_str().parse::<Lifetime>().ok(), Some(l));
        assert_eq!(l.to_string(), l.as_str());
        assert_eq!(
            serde_json::to_value(l).ok(),
            Some(serde_json::json!(l.as_str()))
        );
    }
    assert_eq!(
        "forever"
            .parse::<Lifetime>()
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("unknown lifetime `forever` (expected once, recent or retain)")
    );
}

#[test]
fn prj1_records_are_references_with_source_links() {
    let record = AttachmentRecord {
        id: "a1".into(),
        source: call("c1"),
        url: "artifact://codemode/page.png".into(),
        media_type: "image/png".into(),
        bytes: 1234,
        dimensions: Some((640, 480)),
        lifetime: Lifetime::Retain,
        seq: 7,
        created_at: "2025-01-01T00:00:00Z".into(),
    };
    insta::assert_json_snapshot!("prj1_record", record);
    // Table: serialized lifetime -> parsed lifetime; absent means once.
    let cases = [
        (None, Lifetime::Once),
        (Some("once"), Lifetime::Once),
        (Some("recent"), Lifetime::Recent),
        (Some("retain"), Lifetime::Retain),
    ];
    for (lifetime, want) in cases {
        let mut v = serde_json::json!({
            "id": "a", "source": {"kind": "message", "message_id": "m1"}, "url": "asset://x",
            "media_type": "image/png", "bytes": 1, "seq": 1, "created_at": "t"
        });
        if let Some(l) = lifetime {
            v["lifetime"] = l.into();
        }
        let r: AttachmentRecord = serde_json::from_value(v).unwrap();
        assert_eq!(r.lifetime, want);
        assert_eq!(r.source, msg("m1"));
        let back: AttachmentRecord =
            serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
    // Projection reads records and never writes a display choice into them.
    let mut w = World::new(cfg());
    w.image("a", Lifetime::Once);
    let before = w.records.clone();
    w.succeed();
    assert_eq!(w.records, before);
}

#[test]
fn prj2_message_image_input_gates_platform_images_only() {
    // (messageImageInput, source, media type, shown)
    let cases = [
        (true, msg("m1"), "image/png", true),
        (false, msg("m1"), "image/png", false),
        (false, call("c1"), "image/png", true),
        (true, call("c1"), "image/png", true),
        (false, msg("m1"), "audio/ogg", true),
    ];
    for (gate, source, media, shown) in cases {
        let mut w = World::new(AttachmentConfig {
            message_image_input: gate,
            ..cfg()
        });
        w.add_full("a", source.clone(), media, Lifetime::Once, 10, None);
        let p = w.project();
        assert_eq!(embedded(&p) == ["a"], shown, "{gate} {source:?} {media}");
        if !shown {
            assert!(p.messages.is_empty(), "no reason either: {p:?}");
        }
    }
}

#[test]
fn prj3_a_message_only_when_something_to_deliver() {
    // (setup, expected message ids)
    type Setup = fn(&mut World);
    let cases: [(&str, Setup, &[&str]); 6] = [
        ("nothing", |_| {}, &[]),
        (
            "one image",
            |w| w.image("a", Lifetime::Once),
            &["att-call-c-a"],
        ),
        (
            "terminal reason",
            |w| {
                w.image("a", Lifetime::Once);
                w.verdicts.insert(
                    "a".into(),
                    Verdict::Unsupported {
                        reason: "broken".into(),
                    },
                );
            },
            &["att-call-c-a"],
        ),
        (
            "consumed once",
            |w| {
                w.image("a", Lifetime::Once);
                w.succeed();
            },
            &[],
        ),
        (
            "two records of one source share a message",
            |w| {
                w.add_full("a", call("c1"), "image/png", Lifetime::Once, 10, None);
                w.add_full("b", call("c1"), "image/png", Lifetime::Once, 10, None);
            },
            &["att-call-c1"],
        ),
        (
            "viewed retain left out by the budget is silent",
            |w| {
                w.config.max_image_count = 1;
                w.image("r", Lifetime::Retain);
                w.succeed();
                w.image("n", Lifetime::Once);
            },
            &["att-call-c-n"],
        ),
    ];
    for (name, setup, want) in cases {
        let mut w = World::new(cfg());
        setup(&mut w);
        let ids: Vec<String> = w.project().messages.into_iter().map(|m| m.id).collect();
        assert_eq!(ids, want, "{name}");
    }
}

#[test]
fn prj4_once_until_one_persisted_request() {
    use Step::{Fail, Ok};
    // (steps, whether the image is embedded in each request)
    let cases: [(&[Step], &[bool]); 4] = [
        (&[Ok, Ok], &[true, false]),
        (&[Fail, Fail, Ok, Ok], &[true, true, true, false]),
        (&[Fail, Ok, Fail, Ok], &[true, true, false, false]),
        (&[Fail], &[true]),
    ];
    for (steps, want) in cases {
        let mut w = World::new(cfg());
        w.image("a", Lifetime::Once);
        let got: Vec<bool> = run(&mut w, steps)
            .iter()
            .map(|p| embedded(p) == ["a"])
            .collect();
        assert_eq!(got, want, "{steps:?}");
    }
    // The pending change of a once image consumes it; a fail commits nothing.
    let mut w = World::new(cfg());
    w.image("a", Lifetime::Once);
    let p = w.fail();
    assert_eq!(p.pending.consumed(), ["a"]);
    assert_eq!(w.state, DeliveryState::new());
}

#[test]
fn prj6_retain_every_request_while_source_active() {
    use Step::{Fail, Ok};
    let steps = [Ok, Fail, Ok, Ok, Ok];
    let mut w = World::new(cfg());
    w.image("r", Lifetime::Retain);
    for p in run(&mut w, &steps) {
        assert_eq!(embedded(&p), ["r"]);
    }
    // Retain ignores the recent count entirely.
    let mut w = World::new(AttachmentConfig {
        recent_image_count: 0,
        image_prune_batch_size: 1,
        ..cfg()
    });
    for id in ["r1", "r2", "r3"] {
        w.image(id, Lifetime::Retain);
        w.succeed();
    }
    assert_eq!(embedded(&w.project()), ["r1", "r2", "r3"]);
}

#[test]
fn prj7_recent_and_retain_end_with_their_source() {
    // (lifetime, source) — after a viewed request the source leaves; nothing brings it back.
    let cases = [
        (Lifetime::Recent, call("c1")),
        (Lifetime::Retain, call("c1")),
        (Lifetime::Recent, msg("m1")),
        (Lifetime::Retain, msg("m1")),
    ];
    for (lifetime, source) in cases {
        let mut w = World::new(cfg());
        w.add_full("a", source.clone(), "image/png", lifetime, 10, None);
        assert_eq!(embedded(&w.succeed()), ["a"]);
        assert!(w.state.record("a").viewed);
        w.inactive.insert(source.clone());
        let p = w.succeed();
        assert!(p.messages.is_empty(), "{lifetime:?} {source:?}");
        assert!(
            w.state.record("a").viewed,
            "the persisted state stays, unused"
        );
        assert!(w.succeed().messages.is_empty());
    }
}

#[test]
fn prj8_budgets_and_selection_order() {
    struct Case {
        name: &'static str,
        config: AttachmentConfig,
        /// (id, lifetime, bytes, viewed before the request)
        images: &'static [(&'static str, Lifetime, u64, bool)],
        embedded: &'static [&'static str],
        released: &'static [&'static str],
        waiting: &'static [&'static str],
    }
    use Lifetime::{Once, Recent, Retain};
    let count = |n| AttachmentConfig {
        max_image_count: n,
        recent_image_count: 10,
        ..cfg()
    };
    let bytes = |total| AttachmentConfig {
        max_total_image_bytes: total,
        max_image_bytes: total,
        recent_image_count: 10,
        ..cfg()
    };
    let cases = [
        Case {
            name: "count: first in arrival order, the rest wait",
            config: count(2),
            images: &[
                ("a", Once, 1, false),
                ("b", Once, 1, false),
                ("c", Once, 1, false),
            ],
            embedded: &["a", "b"],
            released: &[],
            waiting: &["c"],
        },
        Case {
            name: "bytes: a skipped image does not block a smaller later one",
            config: bytes(10),
            images: &[
                ("a", Once, 6, false),
                ("b", Once, 6, false),
                ("c", Once, 3, false),
            ],
            embedded: &["a", "c"],
            released: &[],
            waiting: &["b"],
        },
        Case {
            name: "unviewed, then viewed retain, then viewed recent newest first",
            config: count(4),
            images: &[
                ("r1", Recent, 1, true),
                ("k1", Retain, 1, true),
                ("r2", Recent, 1, true),
                ("r3", Recent, 1, true),
                ("k2", Retain, 1, true),
                ("n1", Once, 1, false),
            ],
            // n1, k1, k2 and the newest recent (r3); r2, r1 are released.
            embedded: &["k1", "r3", "k2", "n1"],
            released: &["r1", "r2"],
            waiting: &[],
        },
        Case {
            name: "viewed retain not carried stays silent and is not released",
            config: count(1),
            images: &[("k1", Retain, 1, true), ("n1", Once, 1, false)],
            embedded: &["n1"],
            released: &[],
            waiting: &[],
        },
        Case {
            name: "unviewed recent only waits",
            config: count(1),
            images: &[("a", Recent, 1, false), ("b", Recent, 1, false)],
            embedded: &["a"],
            released: &[],
            waiting: &["b"],
        },
    ];
    for case in cases {
        let mut w = World::new(case.config.clone());
        let mut viewed = Vec::new();
        for &(id, lifetime, b, v) in case.images {
            w.add_full(id, call(&format!("c-{id}")), "image/png", lifetime, b, None);
            if v {
                viewed.push(id);
            }
        }
        w.mark_viewed(&viewed);
        let p = w.project();
        let mut got = embedded(&p);
        got.sort();
        let mut want: Vec<String> = case.embedded.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(got, want, "{}", case.name);
        assert_eq!(p.pending.released(), case.released, "{}", case.name);
        let waiting: Vec<String> = reasons(&p)
            .iter()
            .filter(|t| t.contains("It will follow in a later request"))
            .cloned()
            .collect();
        let want_waiting: Vec<String> = case.waiting.iter().map(|id| w.url(id)).collect();
        assert_eq!(
            waiting.len(),
            want_waiting.len(),
            "{}: {waiting:?}",
            case.name
        );
        for (t, url) in waiting.iter().zip(&want_waiting) {
            assert!(
                t.starts_with(&format!("[attachment: {url}]")),
                "{}: {t}",
                case.name
            );
        }
        let n: u64 = p
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|c| match c {
                ishiki_projection::AttachmentContent::Media { bytes, .. } => Some(*bytes),
                ishiki_projection::AttachmentContent::Text(_) => None,
            })
            .sum();
        assert!(n <= case.config.max_total_image_bytes, "{}", case.name);
        assert!(
            embedded(&p).len() <= case.config.max_image_count,
            "{}",
            case.name
        );
    }
}

#[test]
fn prj8_released_recent_never_returns_and_retain_comes_back() {
    let mut w = World::new(AttachmentConfig {
        max_image_count: 2,
        recent_image_count: 10,
        ..cfg()
    });
    w.image("r1", Lifetime::Recent);
    w.image("k1", Lifetime::Retain);
    assert_eq!(embedded(&w.succeed()), ["r1", "k1"]);
    // Two new once images take both slots: r1 is released, k1 only skipped.
    w.image("n1", Lifetime::Once);
    w.image("n2", Lifetime::Once);
    let p = w.succeed();
    assert_eq!(embedded(&p), ["n1", "n2"]);
    assert_eq!(p.pending.released(), ["r1"]);
    // Capacity is back: k1 returns, r1 does not.
    assert_eq!(embedded(&w.succeed()), ["k1"]);
    assert!(w.state.record("r1").released);
}

#[test]
fn prj9_terminal_verdicts_are_stated_once() {
    let small = AttachmentConfig {
        max_image_bytes: 100,
        max_total_image_bytes: 50,
        max_image_dimension: 64,
        ..cfg()
    };
    // (name, media type, bytes, dims, verdict, image input, audio input, reason fragment)
    type Row = (
        &'static str,
        &'static str,
        u64,
        Option<(u32, u32)>,
        Verdict,
        bool,
        bool,
        &'static str,
    );
    let cases: [Row; 8] = [
        (
            "capability off",
            "image/png",
            10,
            None,
            Verdict::Available,
            false,
            true,
            "image input is off",
        ),
        (
            "unsupported",
            "image/png",
            10,
            None,
            Verdict::Unsupported {
                reason: "broken PNG header".into(),
            },
            true,
            true,
            "broken PNG header",
        ),
        (
            "not downloaded",
            "image/png",
            10,
            None,
            Verdict::NotDownloaded {
                reason: "over assets.autoDownloadMaxBytes".into(),
            },
            true,
            true,
            "not downloaded",
        ),
        (
            "over maxImageBytes",
            "image/png",
            101,
            None,
            Verdict::Available,
            true,
            true,
            "maxImageBytes",
        ),
        (
            "over maxTotalImageBytes",
            "image/png",
            60,
            None,
            Verdict::Available,
            true,
            true,
            "maxTotalImageBytes",
        ),
        (
            "over maxImageDimension",
            "image/png",
            10,
            Some((65, 10)),
            Verdict::Available,
            true,
            true,
            "65x10 pixels",
        ),
        (
            "audio off",
            "audio/ogg",
            10,
            None,
            Verdict::Available,
            true,
            false,
            "does not accept audio",
        ),
        (
            "other type",
            "application/pdf",
            10,
            None,
            Verdict::Available,
            true,
            true,
            "application/pdf",
        ),
    ];
    for (name, media, bytes, dims, verdict, image_input, audio_input, fragment) in cases {
        for lifetime in [Lifetime::Once, Lifetime::Recent, Lifetime::Retain] {
            let mut w = World::new(small.clone());
            w.image_input = image_input;
            w.audio_input = audio_input;
            w.add_full("a", call("c1"), media, lifetime, bytes, dims);
            w.verdicts.insert("a".into(), verdict.clone());
            let failed = w.fail();
            let p = w.succeed();
            assert_eq!(failed, p, "{name}: a failed step changes nothing");
            let r = reasons(&p);
            assert_eq!(r.len(), 1, "{name}");
            assert!(r[0].contains(fragment), "{name}: {}", r[0]);
            assert!(
                r[0].starts_with("[attachment: artifact://t/a."),
                "{name}: {}",
                r[0]
            );
            assert!(embedded(&p).is_empty(), "{name}");
            assert_eq!(p.pending.reason_delivered(), ["a"], "{name}");
            assert!(
                w.succeed().messages.is_empty(),
                "{name} {lifetime:?}: stated once"
            );
        }
    }
}

#[test]
fn prj10_non_terminal_is_retried() {
    let mut w = World::new(cfg());
    w.image("a", Lifetime::Once);
    w.verdicts.insert(
        "a".into(),
        Verdict::Unavailable {
            reason: "timeout".into(),
        },
    );
    for _ in 0..3 {
        let p = w.succeed();
        assert!(embedded(&p).is_empty());
        assert!(reasons(&p)[0].contains("timeout"));
        assert!(p.pending.is_empty(), "nothing consumed: {p:?}");
    }
    w.verdicts.clear();
    assert_eq!(embedded(&w.succeed()), ["a"]);
    assert!(w.succeed().messages.is_empty());

    // Until the source disappears.
    let mut w = World::new(cfg());
    w.image("a", Lifetime::Retain);
    w.verdicts.insert(
        "a".into(),
        Verdict::Unavailable {
            reason: "source gone".into(),
        },
    );
    assert_eq!(w.succeed().messages.len(), 1);
    w.inactive.insert(call("c-a"));
    assert!(w.succeed().messages.is_empty());

    // Capacity: retried in arrival order.
    let mut w = World::new(AttachmentConfig {
        max_image_count: 1,
        ..cfg()
    });
    for id in ["a", "b", "c"] {
        w.image(id, Lifetime::Once);
    }
    let order: Vec<Vec<String>> = (0..4).map(|_| embedded(&w.succeed())).collect();
    assert_eq!(order, [vec!["a"], vec!["b"], vec!["c"], vec![]]);
}

#[test]
fn prj11_source_check_comes_first() {
    // Every verdict and lifetime: an inactive source shows nothing, not even a reason.
    let verdicts = [
        Verdict::Available,
        Verdict::Unavailable { reason: "x".into() },
        Verdict::Unsupported { reason: "x".into() },
        Verdict::NotDownloaded { reason: "x".into() },
    ];
    for verdict in verdicts {
        for source in [call("c1"), msg("m1")] {
            for image_input in [true, false] {
                let mut w = World::new(cfg());
                w.image_input = image_input;
                w.add_full("a", source.clone(), "image/png", Lifetime::Once, 10, None);
                w.verdicts.insert("a".into(), verdict.clone());
                w.inactive.insert(source.clone());
                let p = w.project();
                assert_eq!(
                    p,
                    Projection::default(),
                    "{verdict:?} {source:?} {image_input}"
                );
            }
        }
    }
}

#[test]
fn prj12_image_input_off_says_not_provided_and_behaves_as_once() {
    for lifetime in [Lifetime::Once, Lifetime::Recent, Lifetime::Retain] {
        let mut w = World::new(cfg());
        w.image_input = false;
        w.add_full("a", call("c1"), "image/png", lifetime, 10, None);
        w.add_full("s", call("c1"), "audio/ogg", lifetime, 10, None);
        let p = w.succeed();
        assert_eq!(embedded(&p), ["s"], "audio is not image input");
        let r = reasons(&p);
        assert_eq!(r.len(), 1);
        assert!(r[0].contains("visual content not provided"));
        let again = w.succeed();
        assert!(
            !all_text(&again).contains("a.png"),
            "{lifetime:?}: once only"
        );
    }
}

#[test]
fn prj13_state_round_trips_and_commit_applies_only_pending() {
    let mut w = World::new(AttachmentConfig {
        max_image_count: 1,
        ..cfg()
    });
    w.image("a", Lifetime::Recent);
    w.image("b", Lifetime::Once);
    w.image("t", Lifetime::Once);
    w.verdicts
        .insert("t".into(), Verdict::Unsupported { reason: "x".into() });
    let p = w.project();
    assert_eq!(p.pending.viewed(), ["a"]);
    assert!(p.pending.consumed().is_empty());
    assert_eq!(p.pending.reason_delivered(), ["t"]);

    // Fail: nothing moves.
    let before = w.state.clone();
    w.fail();
    assert_eq!(w.state, before);

    // Commit: exactly the listed records change.
    w.state.commit(&p.pending);
    let ids: Vec<(String, bool, bool, bool, bool)> = w
        .state
        .iter()
        .map(|(id, s)| {
            (
                id.to_owned(),
                s.viewed,
                s.consumed,
                s.released,
                s.reason_delivered,
            )
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("a".to_owned(), true, false, false, false),
            ("t".to_owned(), false, false, false, true)
        ]
    );

    // Serde round trip (restart): same state, same next projection.
    let json = serde_json::to_string(&w.state).unwrap();
    insta::assert_snapshot!("prj13_state_json", json);
    let restored: DeliveryState = serde_json::from_str(&json).unwrap();
    assert_eq!(restored, w.state);
    let next = w.project();
    w.state = restored;
    assert_eq!(w.project(), next);

    // The pending change itself round-trips too (a runtime may persist it instead).
    let json = serde_json::to_string(&next.pending).unwrap();
    let back: ishiki_projection::PendingChange = serde_json::from_str(&json).unwrap();
    assert_eq!(back, next.pending);

    // Committing an empty change changes nothing.
    let before = w.state.clone();
    w.state.commit(&Projection::default().pending);
    assert_eq!(w.state, before);
}

#[test]
fn prj14_stable_order_ids_and_timestamps() {
    let mut w = World::new(AttachmentConfig {
        recent_image_count: 10,
        max_image_count: 10,
        ..cfg()
    });
    w.add_full("k1", call("c1"), "image/png", Lifetime::Retain, 10, None);
    w.add_full("m1", msg("m1"), "image/png", Lifetime::Retain, 10, None);
    let first = w.succeed();
    // Nothing removed or newly selected: the next request repeats the messages exactly.
    assert_eq!(w.project().messages, first.messages);
    // A new record arrives after; the earlier messages are unchanged and keep their place.
    w.add_full("k2", call("c2"), "image/png", Lifetime::Recent, 10, None);
    let second = w.succeed();
    assert_eq!(second.messages[..2], first.messages[..]);
    assert_eq!(second.messages[2].id, "att-call-c2");
    // Same inputs, same output, many times over.
    let third = w.project();
    for _ in 0..5 {
        assert_eq!(w.project(), third);
    }

    // created_at is the source's earliest record even after that record is consumed.
    let mut w = World::new(cfg());
    w.add_full("o", call("c1"), "image/png", Lifetime::Once, 10, None);
    w.add_full("k", call("c1"), "image/png", Lifetime::Retain, 10, None);
    let a = w.succeed();
    let b = w.succeed();
    assert_eq!(a.messages[0].created_at, "2025-01-01T00:00:01Z");
    assert_eq!(b.messages[0].created_at, a.messages[0].created_at);
    assert_eq!(b.messages[0].id, a.messages[0].id);
    assert_eq!(embedded(&b), ["k"]);

    // Messages follow the history order of their sources, not the arrival order of records.
    let mut w = World::new(cfg());
    w.add_full("x", call("c1"), "image/png", Lifetime::Once, 10, None);
    w.add_full("y", call("c2"), "image/png", Lifetime::Once, 10, None);
    w.records.swap(0, 1);
    let ids: Vec<String> = w.project().messages.into_iter().map(|m| m.id).collect();
    assert_eq!(ids, ["att-call-c2", "att-call-c1"]);
}

/// A stranger builds records and inputs without spelling out every field: the constructors
/// give the documented defaults, and what they give projects exactly like the literal form.
#[test]
fn constructors_give_the_documented_defaults() {
    let source = SourceLink::ToolResult {
        call_id: "c1".into(),
    };
    let record = AttachmentRecord::new("a1", source.clone(), "asset://x", "image/png", 2048)
        .with_dimensions(800, 600)
        .with_lifetime(Lifetime::Recent)
        .at(7, "2025-01-01T00:00:00Z");
    assert_eq!(
        record,
        AttachmentRecord {
            id: "a1".into(),
            source: source.clone(),
            url: "asset://x".into(),
            media_type: "image/png".into(),
            bytes: 2048,
            dimensions: Some((800, 600)),
            lifetime: Lifetime::Recent,
            seq: 7,
            created_at: "2025-01-01T00:00:00Z".into(),
        }
    );
    let bare = AttachmentRecord::new("a2", source, "asset://y", "image/png", 1);
    assert_eq!(
        (
            bare.dimensions,
            bare.lifetime,
            bare.seq,
            bare.created_at.as_str()
        ),
        (None, Lifetime::Once, 0, "")
    );

    let records = vec![record];
    let state = DeliveryState::new();
    let config = AttachmentConfig::default();
    let built = project(&ProjectionInput::new(&records, &state, &config));
    let literal = project(&ProjectionInput {
        records: &records,
        active: &|_| true,
        verdict: &|_| Verdict::Available,
        state: &state,
        config: &config,
        image_input: true,
        audio_input: false,
    });
    assert_eq!(built, literal);
    assert_eq!(embedded(&built), ["a1"], "{built:?}");
    // A model without image input: the effective capability is off whatever the profile says.
    let blind = project(
        &ProjectionInput::new(&records, &state, &config).model_input(ModelInput::default()),
    );
    assert!(embedded(&blind).is_empty(), "{blind:?}");
    // A source that left the context is not shown.
    let gone = project(&ProjectionInput::new(&records, &state, &config).active(&|_| false));
    assert!(gone.messages.is_empty());
}
