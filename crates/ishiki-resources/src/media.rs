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
/// bytes is `text/plain`; unknown binary is `application/octet-stream`.
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
    } else if is_id3(b) || (b.len() >= 2 && b[0] == 0xFF && (b[1] & 0xE0) == 0xE0) {
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
        "text/plain" => "txt",
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
