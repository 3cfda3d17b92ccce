//! Media sniffing from magic bytes and image dimensions from headers, without decoding.

use ishiki_resources::{MediaInfo, extension_for, image_dimensions, sniff};
use proptest::prelude::*;

fn encode(format: image::ImageFormat, width: u32, height: u32) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let img = image::RgbaImage::from_fn(width, height, |x, y| {
        image::Rgba([(x * 7) as u8, (y * 13) as u8, 90, 255])
    });
    match format {
        // JPEG has no alpha channel.
        image::ImageFormat::Jpeg => image::DynamicImage::ImageRgba8(img)
            .to_rgb8()
            .write_to(&mut out, format)
            .unwrap(),
        _ => img.write_to(&mut out, format).unwrap(),
    }
    out.into_inner()
}

fn samples() -> Vec<(&'static str, Vec<u8>, (u32, u32))> {
    vec![
        (
            "image/png",
            encode(image::ImageFormat::Png, 31, 17),
            (31, 17),
        ),
        (
            "image/jpeg",
            encode(image::ImageFormat::Jpeg, 40, 9),
            (40, 9),
        ),
        ("image/gif", encode(image::ImageFormat::Gif, 3, 5), (3, 5)),
        (
            "image/webp",
            encode(image::ImageFormat::WebP, 12, 34),
            (12, 34),
        ),
    ]
}

#[test]
fn res7_images_are_sniffed_with_header_dimensions() {
    for (media_type, bytes, dims) in samples() {
        assert_eq!(
            sniff(&bytes),
            MediaInfo {
                media_type: media_type.to_owned(),
                dimensions: Some(dims),
            }
        );
        assert_eq!(image_dimensions(&bytes), Some(dims));
    }
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn push_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    let mut chunk = kind.to_vec();
    chunk.extend_from_slice(data);
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(&chunk);
    out.extend_from_slice(&crc32(&chunk).to_be_bytes());
}

/// A PNG that is little more than a header claiming `width`×`height` (RGBA): decoding it would
/// need 3.6 GB, reading its dimensions needs the first chunk.
fn header_only_png(width: u32, height: u32) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    push_chunk(&mut out, b"IHDR", &ihdr);
    // The start of a zlib stream: enough for a decoder to reach the image data.
    push_chunk(&mut out, b"IDAT", &[0x78, 0x9c]);
    push_chunk(&mut out, b"IEND", &[]);
    out
}

#[test]
fn res7_a_decompression_bomb_header_answers_without_decoding() {
    let bomb = header_only_png(30_000, 30_000);
    assert_eq!(
        sniff(&bomb),
        MediaInfo {
            media_type: "image/png".into(),
            dimensions: Some((30_000, 30_000)),
        }
    );
}

#[test]
fn res7_corrupt_images_have_no_dimensions() {
    for (media_type, bytes, _) in samples() {
        // Long enough for the magic bytes, too short for any header with dimensions.
        let cut = if media_type == "image/gif" { 10 } else { 12 };
        let truncated = &bytes[..cut];
        let info = sniff(truncated);
        assert_eq!(info.media_type, media_type);
        assert_eq!(info.dimensions, None, "{media_type}");
    }
    let mut garbage = b"\x89PNG\r\n\x1a\n".to_vec();
    garbage.extend_from_slice(&[0xAB; 64]);
    assert_eq!(sniff(&garbage).dimensions, None);
    assert_eq!(sniff(&[0xFF, 0xD8, 0xFF]).dimensions, None);
}

#[test]
fn res7_other_media_and_text() {
    let cases: &[(&[u8], &str)] = &[
        (b"RIFF\x24\0\0\0WAVEfmt ", "audio/wav"),
        (b"ID3\x03\0\0\0\0\0\x0f", "audio/mpeg"),
        (&[0xFF, 0xFB, 0x90, 0x00], "audio/mpeg"),
        (b"OggS\0\x02", "audio/ogg"),
        (b"fLaC\0\0\0\x22", "audio/flac"),
        (b"%PDF-1.7\n", "application/pdf"),
        (b"", "text/plain"),
        ("plain 文本\n".as_bytes(), "text/plain"),
        (b"ID3 tags are metadata", "text/plain"),
        (b"OggS is a capture pattern", "text/plain"),
        (b"fLaC notes", "text/plain"),
        (b"nul\0inside", "application/octet-stream"),
        (&[0xC3, 0x28], "application/octet-stream"),
    ];
    for (bytes, media_type) in cases {
        let info = sniff(bytes);
        assert_eq!(info.media_type, *media_type, "{bytes:?}");
        assert_eq!(info.dimensions, None);
    }
    // The extension follows the sniffed type, never the other way round.
    for (media_type, ext) in [
        ("image/png", "png"),
        ("image/jpeg", "jpg"),
        ("image/gif", "gif"),
        ("image/webp", "webp"),
        ("audio/wav", "wav"),
        ("audio/mpeg", "mp3"),
        ("audio/ogg", "ogg"),
        ("audio/flac", "flac"),
        ("application/pdf", "pdf"),
        ("text/plain", "txt"),
        ("application/json", "json"),
        ("application/octet-stream", "bin"),
    ] {
        assert_eq!(extension_for(media_type), ext);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The header reader (no codec) agrees with the encoder on every size, in all four formats.
    #[test]
    fn res7_header_dimensions_match_the_encoded_size(
        which in 0usize..4,
        width in 1u32..300,
        height in 1u32..300,
    ) {
        let format = [
            image::ImageFormat::Png,
            image::ImageFormat::Jpeg,
            image::ImageFormat::Gif,
            image::ImageFormat::WebP,
        ][which];
        prop_assert_eq!(
            image_dimensions(&encode(format, width, height)),
            Some((width, height))
        );
    }

    #[test]
    fn sec3_sniffing_mangled_images_never_panics(
        which in 0usize..4,
        cut in 0usize..400,
        flips in proptest::collection::vec((0usize..400, any::<u8>()), 0..6),
    ) {
        let (media_type, mut bytes, _) = samples().swap_remove(which);
        for (at, value) in flips {
            if at < bytes.len() {
                bytes[at] = value;
            }
        }
        bytes.truncate(cut.max(1));
        let info = sniff(&bytes);
        prop_assert!(!info.media_type.is_empty());
        if info.media_type != media_type {
            prop_assert!(info.dimensions.is_none() || info.media_type.starts_with("image/"));
        }
    }

    #[test]
    fn sec3_sniffing_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = sniff(&bytes);
        let _ = image_dimensions(&bytes);
    }
}

#[test]
fn gif_jpeg_and_webp_declared_as_png_get_their_own_type() {
    for (media_type, bytes, _) in samples() {
        assert_eq!(
            ishiki_resources::media_type_of("image/png", &bytes),
            media_type
        );
    }
    // Bytes that are no media at all are not an image, whatever they are declared as.
    assert_eq!(
        ishiki_resources::media_type_of("image/png", &[0x00, 0x01, 0x02]),
        "application/octet-stream"
    );
    // A more precise text type is kept; an empty one is sniffed.
    assert_eq!(
        ishiki_resources::media_type_of("text/csv", b"a,b\n1,2\n"),
        "text/csv"
    );
    assert_eq!(ishiki_resources::media_type_of("", b"plain"), "text/plain");
}

fn utf16(text: &str, little: bool) -> Vec<u8> {
    let mut out = if little {
        vec![0xFF, 0xFE]
    } else {
        vec![0xFE, 0xFF]
    };
    for unit in text.encode_utf16() {
        out.extend_from_slice(&if little {
            unit.to_le_bytes()
        } else {
            unit.to_be_bytes()
        });
    }
    out
}

#[test]
fn utf16_text_is_sniffed_as_text_not_audio() {
    let text = "hello world — こんにちは\n".repeat(40);
    assert_eq!(
        sniff(&utf16(&text, true)).media_type,
        "text/plain; charset=utf-16le"
    );
    assert_eq!(
        sniff(&utf16(&text, false)).media_type,
        "text/plain; charset=utf-16be"
    );
    // Short UTF-16 text too: its byte-order mark looks like an MPEG frame sync.
    assert_eq!(
        sniff(&utf16("hi", true)).media_type,
        "text/plain; charset=utf-16le"
    );
}

/// An MPEG-1 Layer III frame: 128 kbps, 44.1 kHz, no padding, 417 bytes.
fn mp3_frame() -> Vec<u8> {
    let mut frame = vec![0xFF, 0xFB, 0x90, 0x00];
    frame.resize(417, 0x55);
    frame
}

#[test]
fn mp3_needs_a_valid_frame_header_and_a_next_frame_where_the_first_ends() {
    let two = [mp3_frame(), mp3_frame()].concat();
    assert_eq!(sniff(&two).media_type, "audio/mpeg");
    // A plausible header followed by bytes with no frame where it ends is not MP3.
    let mut broken = mp3_frame();
    broken.extend_from_slice(&[0x20; 100]);
    assert_ne!(sniff(&broken).media_type, "audio/mpeg");
    // Reserved version, reserved layer, bad bitrate and reserved sample rate are refused.
    for header in [
        [0xFF, 0xEB, 0x90, 0x00],
        [0xFF, 0xF9, 0x90, 0x00],
        [0xFF, 0xFB, 0xF0, 0x00],
        [0xFF, 0xFB, 0x9C, 0x00],
    ] {
        assert_ne!(sniff(&header).media_type, "audio/mpeg", "{header:x?}");
    }
}

#[tokio::test]
async fn a_utf16_file_is_read_as_its_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("notes.txt"), utf16("héllo\nworld\n", true)).expect("file");
    let center = ishiki_resources::ResourceCenter::new();
    center.register_file_scheme(std::sync::Arc::new(
        ishiki_resources::WorkspaceScheme::new(dir.path()).expect("workspace"),
    ));
    match center.read("workspace:///notes.txt").await.expect("read") {
        ishiki_resources::ReadResult::Text { text, .. } => assert_eq!(text, "héllo\nworld\n"),
        other => panic!("read as a file: {other:?}"),
    }
}
