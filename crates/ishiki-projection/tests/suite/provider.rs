//! Provider image limits (issue 15): enforced with the profile's budgets, the stricter one
//! applying, with terminal reasons stated once and budget shortfalls waiting (PRJ-8, PRJ-9).

use ishiki_projection::{AttachmentConfig, ImageLimits, Lifetime, Verdict};

use super::world::{World, call, embedded, reasons};

/// A profile that allows far more than any provider, served by `limits`.
fn generous(limits: ImageLimits) -> AttachmentConfig {
    AttachmentConfig {
        max_image_bytes: 100_000_000,
        max_total_image_bytes: 400_000_000,
        max_image_count: 200,
        max_image_dimension: 20_000,
        provider_limits: limits,
        ..AttachmentConfig::default()
    }
}

fn add(w: &mut World, id: &str, bytes: u64, dims: (u32, u32)) {
    w.add_full(
        id,
        call(&format!("c-{id}")),
        "image/png",
        Lifetime::Once,
        bytes,
        Some(dims),
    );
}

#[test]
fn prj9_an_image_over_a_provider_limit_gets_its_reason_once() {
    let mut w = World::new(generous(ImageLimits::anthropic()));
    add(&mut w, "wide", 1000, (8001, 10));
    // 3.75 MiB + 1 byte of file is just over Anthropic's 5 MiB of base64.
    add(&mut w, "heavy", 3_932_161, (100, 100));
    add(&mut w, "fits", 3_932_160, (8000, 8000));
    let first = w.succeed();
    assert_eq!(embedded(&first), ["fits"]);
    let text = reasons(&first).join("\n");
    insta::assert_snapshot!("provider_reasons", text);
    assert!(reasons(&w.succeed()).is_empty(), "stated once");
}

#[test]
fn prj9_the_stricter_profile_limit_keeps_its_own_reason() {
    let mut w = World::new(AttachmentConfig {
        provider_limits: ImageLimits::anthropic(),
        ..AttachmentConfig::default()
    });
    add(&mut w, "wide", 1000, (9000, 10));
    let text = reasons(&w.project()).join("\n");
    assert!(
        text.contains("maxImageDimension (1568 px per side)"),
        "{text}"
    );
}

#[test]
fn prj8_the_provider_count_and_request_bytes_are_budgets() {
    let limits = ImageLimits {
        provider: "openai".into(),
        images: Some(2),
        request_bytes: Some(8),
        ..ImageLimits::default()
    };
    let mut w = World::new(generous(limits));
    // 3 bytes are 4 of base64: two fit the 8 bytes and the 2 slots; the third waits.
    for id in ["a", "b", "c"] {
        add(&mut w, id, 3, (10, 10));
    }
    let first = w.succeed();
    assert_eq!(embedded(&first), ["a", "b"]);
    assert_eq!(
        reasons(&first),
        [format!(
            "[attachment: {}] image not provided in this request: its image slots (the openai \
             limit of 2 images per request) are all taken. It will follow in a later request.",
            w.url("c")
        )]
    );
    assert_eq!(embedded(&w.succeed()), ["c"]);

    let limits = ImageLimits {
        provider: "openai".into(),
        request_bytes: Some(8),
        ..ImageLimits::default()
    };
    let mut w = World::new(generous(limits));
    add(&mut w, "a", 4, (10, 10));
    add(&mut w, "b", 3, (10, 10));
    let first = w.succeed();
    assert_eq!(embedded(&first), ["a"]);
    assert_eq!(
        reasons(&first),
        [format!(
            "[attachment: {}] image not provided in this request: it needs 4 bytes of base64 and \
             only 0 bytes of the openai limit of 8 bytes per request is left. It will follow in \
             a later request.",
            w.url("b")
        )]
    );
    assert_eq!(embedded(&w.succeed()), ["b"]);
}

#[test]
fn prj8_a_request_with_a_large_image_holds_at_most_the_many_images_count() {
    let limits = ImageLimits {
        many_images: Some(2),
        many_images_dimension: Some(50),
        ..ImageLimits::anthropic()
    };
    let mut w = World::new(generous(limits));
    add(&mut w, "s1", 10, (10, 10));
    add(&mut w, "s2", 10, (10, 10));
    add(&mut w, "big", 10, (60, 10));
    add(&mut w, "s3", 10, (10, 10));
    let first = w.succeed();
    // s1, s2 fill the many-images count: the large one waits, the small s3 still fits.
    assert_eq!(embedded(&first), ["s1", "s2", "s3"]);
    assert_eq!(
        reasons(&first),
        [format!(
            "[attachment: {}] image not provided in this request: anthropic accepts images over \
             50 px per side only in requests with at most 2 images, and this request is full. It \
             will follow in a later request.",
            w.url("big")
        )]
    );
    assert_eq!(embedded(&w.succeed()), ["big"]);
}

#[test]
fn prj9_a_provider_refusal_is_terminal_and_stated_once() {
    let mut w = World::new(AttachmentConfig::default());
    w.image("a", Lifetime::Recent);
    w.verdicts.insert(
        "a".into(),
        Verdict::Rejected {
            reason: "image exceeds 5 MB maximum".into(),
        },
    );
    let first = w.succeed();
    assert!(embedded(&first).is_empty());
    assert_eq!(
        reasons(&first),
        [format!(
            "[attachment: {}] not provided: the provider refused the request that carried it \
             (image exceeds 5 MB maximum). Tools can still read the URL.",
            w.url("a")
        )]
    );
    assert!(w.succeed().messages.is_empty(), "stated once");
}
