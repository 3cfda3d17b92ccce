//! Media type from magic bytes, and image dimensions from the header without decoding.

use std::io::Cursor;

/// What the bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaInfo {
    /// The media type, e.g. `image/png`, `text/plain`, `application/octet-stream`.
    pub media_type: String,
    /// Width and height in pixels, for images whose header could be read.
    pub dimensions: Option<(u32, u32)>,
}

/// Sniffs the media type from magic bytes (never from a file name). Valid UTF-8 without NUL
/// bytes is `text/plain`; UTF-16 with a byte-order mark is `text/plain; charset=utf-16le` (or
/// `…be`); unknown binary is `application/octet-stream`. MP3 needs an ID3v2 tag or an MPEG
/// audio frame header with valid fields (and, when the bytes go on, a second frame where the
/// first one ends), so text that happens to start with `FF Ex` is not audio.
pub fn sniff(bytes: &[u8]) -> MediaInfo {
    let media_type = sniff_type(bytes);
    let dimensions = if media_type.starts_with("image/") {
        image_dimensions(bytes)
    } else {
        None
    };
    MediaInfo {
        media_type: media_type.to_owned(),
        dimensions,
    }
}

fn sniff_type(b: &[u8]) -> &'static str {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
        "image/jpeg"
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        "image/gif"
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        "image/webp"
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WAVE" {
        "audio/wav"
    } else if let Some(charset) = utf16_text(b) {
        charset
    } else if is_id3(b) || is_mpeg_audio(b) {
        "audio/mpeg"
    } else if b.len() >= 5 && b.starts_with(b"OggS") && b[4] == 0 {
        "audio/ogg"
    } else if b.len() >= 5 && b.starts_with(b"fLaC") && b[4] & 0x7F == 0 {
        "audio/flac"
    } else if b.starts_with(b"%PDF-") {
        "application/pdf"
    } else if !b.contains(&0) && std::str::from_utf8(b).is_ok() {
        "text/plain"
    } else {
        "application/octet-stream"
    }
}

/// An ID3v2 tag: `ID3`, a major version 2–4, a revision byte. Checking more than the three
/// letters keeps a text starting with "ID3" text.
fn is_id3(b: &[u8]) -> bool {
    b.len() >= 10 && b.starts_with(b"ID3") && (2..=4).contains(&b[3]) && b[4] != 0xFF
}

/// UTF-16 text: a byte-order mark, an even length, and valid UTF-16 without NUL characters.
fn utf16_text(b: &[u8]) -> Option<&'static str> {
    let (little, media_type) = match b {
        [0xFF, 0xFE, ..] => (true, UTF16LE),
        [0xFE, 0xFF, ..] => (false, UTF16BE),
        _ => return None,
    };
    decode_utf16(b, little).map(|_| media_type)
}

/// `text/plain` in UTF-16, little-endian.
pub const UTF16LE: &str = "text/plain; charset=utf-16le";
/// `text/plain` in UTF-16, big-endian.
pub const UTF16BE: &str = "text/plain; charset=utf-16be";

/// Decodes UTF-16 text after its byte-order mark; `None` when it is not valid or holds NUL.
pub(crate) fn decode_utf16(b: &[u8], little: bool) -> Option<String> {
    let body = b.get(2..)?;
    if body.len() % 2 != 0 {
        return None;
    }
    let units = body.chunks_exact(2).map(|pair| {
        if little {
            u16::from_le_bytes([pair[0], pair[1]])
        } else {
            u16::from_be_bytes([pair[0], pair[1]])
        }
    });
    let mut text = String::with_capacity(body.len() / 2);
    for c in char::decode_utf16(units) {
        match c {
            Ok('\0') | Err(_) => return None,
            Ok(c) => text.push(c),
        }
    }
    Some(text)
}

/// The length in bytes of the MPEG audio frame whose 4-byte header starts `b`, when every
/// header field is valid (sync, version, layer, bitrate, sample rate).
fn mpeg_frame_length(b: &[u8]) -> Option<usize> {
    let [h0, h1, h2, _h3] = *b.get(..4)? else {
        return None;
    };
    if h0 != 0xFF || h1 & 0xE0 != 0xE0 {
        return None;
    }
    let version = (h1 >> 3) & 0b11; // 0: MPEG 2.5, 1: reserved, 2: MPEG 2, 3: MPEG 1
    let layer = (h1 >> 1) & 0b11; // 0: reserved, 1: III, 2: II, 3: I
    let bitrate_index = usize::from(h2 >> 4);
    let rate_index = usize::from((h2 >> 2) & 0b11);
    let padding = (h2 >> 1) & 1;
    if version == 1 || layer == 0 || bitrate_index == 0 || bitrate_index == 15 || rate_index == 3 {
        return None;
    }
    const V1: [[u32; 15]; 3] = [
        [
            0, 32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448,
        ],
        [
            0, 32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384,
        ],
        [
            0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320,
        ],
    ];
    const V2: [[u32; 15]; 3] = [
        [
            0, 32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256,
        ],
        [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
        [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
    ];
    let layer_row = usize::from(3 - layer); // 0: I, 1: II, 2: III
    let kbps = if version == 3 { V1 } else { V2 }[layer_row][bitrate_index];
    let rate = match version {
        3 => [44_100_u32, 48_000, 32_000][rate_index],
        2 => [22_050_u32, 24_000, 16_000][rate_index],
        _ => [11_025_u32, 12_000, 8_000][rate_index],
    };
    let bps = kbps * 1000;
    let padding = u32::from(padding);
    let length = match layer_row {
        0 => (12 * bps / rate + padding) * 4,
        1 => 144 * bps / rate + padding,
        _ if version == 3 => 144 * bps / rate + padding,
        _ => 72 * bps / rate + padding,
    };
    usize::try_from(length).ok().filter(|&n| n >= 4)
}

/// An MPEG audio stream without an ID3 tag: a valid frame header and, if the bytes go on past
/// that frame, another valid header right where it ends.
fn is_mpeg_audio(b: &[u8]) -> bool {
    let Some(length) = mpeg_frame_length(b) else {
        return false;
    };
    match b.get(length..) {
        Some(next) if next.len() >= 4 => mpeg_frame_length(next).is_some(),
        _ => true,
    }
}

/// The media type to use for bytes a tool or program declared as `declared`: the bytes
/// decide (issue 13). When the sniffed type is an image, audio or PDF, it wins over any
/// declaration (GIF bytes declared `image/png` are `image/gif`). Bytes declared as image or
/// audio that are neither get their sniffed type (text or `application/octet-stream`), so
/// they are described instead of shown. Any other declaration (say `text/csv` over
/// `text/plain`) is kept; an empty one is replaced by the sniffed type.
pub fn media_type_of(declared: &str, bytes: &[u8]) -> String {
    let sniffed = sniff_type(bytes);
    let media =
        |t: &str| t.starts_with("image/") || t.starts_with("audio/") || t == "application/pdf";
    if media(sniffed) || media(declared.trim()) || declared.trim().is_empty() {
        sniffed.to_owned()
    } else {
        declared.trim().to_owned()
    }
}

/// Width and height from the image header only: a decompression bomb answers in microseconds.
pub fn image_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    image::ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .ok()?
        .into_dimensions()
        .ok()
}

/// The file extension used for a media type in artifact names.
pub fn extension_for(media_type: &str) -> &'static str {
    match media_type {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "audio/wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "audio/flac" => "flac",
        "application/pdf" => "pdf",
        "text/plain" | UTF16LE | UTF16BE => "txt",
        "application/json" => "json",
        _ => "bin",
    }
}

/// Decodes an image fully, under limits, to tell a broken one from a good one (a valid header
/// with garbage behind it has dimensions but cannot be shown). Images larger than
/// `max_dimension` on a side are refused before any pixel is decoded.
pub fn check_image(bytes: &[u8], max_dimension: u32) -> Result<(u32, u32), String> {
    let mut reader = image::ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| format!("the image cannot be read: {e}"))?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(max_dimension);
    limits.max_image_height = Some(max_dimension);
    limits.max_alloc = Some(512 * 1024 * 1024);
    reader.limits(limits);
    let decoded = reader
        .decode()
        .map_err(|e| format!("the image is broken and cannot be decoded: {e}"))?;
    Ok((decoded.width(), decoded.height()))
}
