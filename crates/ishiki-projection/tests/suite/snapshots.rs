//! insta snapshots of what the model reads: every verdict, and image input off.

use ishiki_projection::{AttachmentConfig, Lifetime, Verdict};

use super::world::{World, call, msg, render};

struct Case {
    name: &'static str,
    media_type: &'static str,
    bytes: u64,
    dimensions: Option<(u32, u32)>,
    verdict: Verdict,
    image_input: bool,
    audio_input: bool,
    /// Setup before the request (e.g. other images taking the budget).
    config: fn(&mut AttachmentConfig),
}

fn cases() -> Vec<Case> {
    let none: fn(&mut AttachmentConfig) = |_| {};
    let base = || Case {
        name: "",
        media_type: "image/png",
        bytes: 204_800,
        dimensions: Some((800, 600)),
        verdict: Verdict::Available,
        image_input: true,
        audio_input: true,
        config: none,
    };
    vec![
        Case {
            name: "available",
            ..base()
        },
        Case {
            name: "unavailable",
            verdict: Verdict::Unavailable {
                reason: "read timed out after 10 s".into(),
            },
            ..base()
        },
        Case {
            name: "unsupported",
            media_type: "image/x-icon",
            verdict: Verdict::Unsupported {
                reason: "the image encoding is not supported".into(),
            },
            ..base()
        },
        Case {
            name: "not_downloaded",
            bytes: 31_457_280,
            verdict: Verdict::NotDownloaded {
                reason: "30 MiB is over assets.autoDownloadMaxBytes (20 MiB)".into(),
            },
            ..base()
        },
        Case {
            name: "over_max_image_bytes",
            bytes: 6_400_000,
            ..base()
        },
        Case {
            name: "over_max_total_image_bytes",
            bytes: 4_000_000,
            config: |c| c.max_total_image_bytes = 3_000_000,
            ..base()
        },
        Case {
            name: "over_max_image_dimension",
            dimensions: Some((2400, 1200)),
            ..base()
        },
        Case {
            name: "no_capacity_count",
            config: |c| c.max_image_count = 1,
            ..base()
        },
        Case {
            name: "no_capacity_bytes",
            config: |c| c.max_total_image_bytes = 205_000,
            ..base()
        },
        Case {
            name: "image_input_off",
            image_input: false,
            ..base()
        },
        Case {
            name: "audio_input_off",
            media_type: "audio/ogg",
            dimensions: None,
            audio_input: false,
            ..base()
        },
        Case {
            name: "unsupported_media_type",
            media_type: "application/pdf",
            dimensions: None,
            ..base()
        },
    ]
}

/// One request: for the capacity cases an earlier image from another source takes the budget.
fn request(case: &Case, vision: bool) -> String {
    let mut config = AttachmentConfig::default();
    (case.config)(&mut config);
    if vision {
        config.vision_model = Some("vision-main".into());
    }
    let mut w = World::new(config);
    w.image_input = case.image_input;
    w.audio_input = case.audio_input;
    if case.name.starts_with("no_capacity") {
        w.image("first", Lifetime::Once);
    }
    w.add_full(
        "a1",
        call("c1"),
        case.media_type,
        Lifetime::Once,
        case.bytes,
        case.dimensions,
    );
    w.verdicts.insert("a1".into(), case.verdict.clone());
    render(&w.project())
}

#[test]
fn prj9_prj10_snapshot_every_verdict() {
    for case in cases() {
        insta::assert_snapshot!(format!("verdict_{}", case.name), request(&case, false));
    }
}

#[test]
fn prj9_snapshot_every_verdict_with_vision_model() {
    for case in cases() {
        insta::assert_snapshot!(
            format!("verdict_{}_vision", case.name),
            request(&case, true)
        );
    }
}

#[test]
fn prj12_snapshot_image_input_off() {
    // A platform message with two images, a recent tool screenshot and a retain page.
    for vision in [false, true] {
        let config = AttachmentConfig {
            vision_model: vision.then(|| "vision-main".to_owned()),
            ..AttachmentConfig::default()
        };
        let mut w = World::new(config);
        w.image_input = false;
        let id1 = "0190f9f3-3ff8-7000-8000-000000000001";
        let id2 = "0190f9f3-3ff8-7000-8000-000000000002";
        for id in [id1, id2] {
            w.add_full(
                id,
                msg("m1"),
                "image/jpeg",
                Lifetime::Once,
                90_000,
                Some((1024, 768)),
            );
            if let Some(r) = w.records.last_mut() {
                r.url = format!("asset://{id}");
            }
        }
        w.add_full(
            "shot",
            call("c2"),
            "image/png",
            Lifetime::Recent,
            52_000,
            Some((1280, 720)),
        );
        w.add_full(
            "page",
            call("c3"),
            "image/png",
            Lifetime::Retain,
            300_000,
            Some((1200, 1500)),
        );
        let first = w.succeed();
        let name = if vision {
            "image_input_off_vision"
        } else {
            "image_input_off"
        };
        insta::assert_snapshot!(name, render(&first));
        assert!(
            w.succeed().messages.is_empty(),
            "every lifetime behaves as once"
        );
    }
}
