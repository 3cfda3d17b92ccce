//! Media type from magic bytes, and image dimensions from the header without decoding.

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

/// Width and height of a PNG, JPEG, GIF or WebP image from its header only (no codec, so a
/// decompression bomb answers in microseconds); `None` for other bytes, other formats and
/// headers that are cut short or malformed. Zero is never a dimension.
pub fn image_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
    let (width, height) = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        png_dimensions(bytes)?
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        gif_dimensions(bytes)?
    } else if bytes.starts_with(&[0xFF, 0xD8]) {
        jpeg_dimensions(bytes)?
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        webp_dimensions(bytes)?
    } else {
        return None;
    };
    (width > 0 && height > 0).then_some((width, height))
}

fn be16(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_be_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
    ])))
}

fn le16(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from(u16::from_le_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
    ])))
}

fn le24(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
        *b.get(at + 2)?,
        0,
    ]))
}

/// The IHDR chunk comes first: length 13, type, width and height big-endian.
fn png_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    if b.get(12..16)? != b"IHDR" {
        return None;
    }
    let width = u32::from_be_bytes(b.get(16..20)?.try_into().ok()?);
    let height = u32::from_be_bytes(b.get(20..24)?.try_into().ok()?);
    Some((width, height))
}

/// The logical screen descriptor (7 bytes after the signature) must be whole.
fn gif_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    if b.len() < 13 {
        return None;
    }
    Some((le16(b, 6)?, le16(b, 8)?))
}

/// Walks the marker segments to the first start-of-frame (SOF0–SOF15 but DHT, JPG and DAC):
/// length, precision, then height and width big-endian.
fn jpeg_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    let mut at = 2;
    loop {
        if *b.get(at)? != 0xFF {
            return None;
        }
        let mut marker = *b.get(at + 1)?;
        while marker == 0xFF {
            at += 1;
            marker = *b.get(at + 1)?;
        }
        at += 2;
        match marker {
            // Markers without a length: TEM, RST0–7, SOI.
            0x01 | 0xD0..=0xD8 => continue,
            // End of image or start of scan before any frame header.
            0xD9 | 0xDA => return None,
            0xC0..=0xCF if !matches!(marker, 0xC4 | 0xC8 | 0xCC) => {
                if be16(b, at)? < 8 {
                    return None;
                }
                return Some((be16(b, at + 5)?, be16(b, at + 3)?));
            }
            _ => {
                let length = usize::try_from(be16(b, at)?).ok()?;
                if length < 2 {
                    return None;
                }
                at += length;
            }
        }
    }
}

/// The first chunk says which: `VP8 ` (lossy: frame tag, start code, 14-bit sizes), `VP8L`
/// (lossless: signature byte, 14-bit sizes minus one) or `VP8X` (extended: 24-bit sizes minus
/// one).
fn webp_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    match b.get(12..16)? {
        b"VP8 " => {
            if b.get(23..26)? != [0x9D, 0x01, 0x2A] {
                return None;
            }
            Some((le16(b, 26)? & 0x3FFF, le16(b, 28)? & 0x3FFF))
        }
        b"VP8L" => {
            if *b.get(20)? != 0x2F {
                return None;
            }
            let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        b"VP8X" => Some((le24(b, 24)? + 1, le24(b, 27)? + 1)),
        _ => None,
    }
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
/// `max_dimension` on a side are refused before any pixel is decoded. Feature `image` (the
/// PNG, JPEG, GIF and WebP codecs).
#[cfg(feature = "image")]
pub fn check_image(bytes: &[u8], max_dimension: u32) -> Result<(u32, u32), String> {
    let mut reader = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| format!("the image cannot be read: {e}"))?;
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(max_dimension);
    limits.max_image_height = Some(max_dimension);
    limits.max_alloc = Some(512 * 1024 * 1024);
    reader.limits(limits);
    let decoded = reader.decode().map_err(|e| match e {
        image::ImageError::Limits(_) => format!(
            "the image is larger than {max_dimension} pixels on a side, or too large to decode"
        ),
        e => format!("the image is broken and cannot be decoded: {e}"),
    })?;
    if decoded.width() == 0 || decoded.height() == 0 {
        return Err(format!(
            "the image is {}x{} pixels: it has nothing to show",
            decoded.width(),
            decoded.height()
        ));
    }
    Ok((decoded.width(), decoded.height()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RIFF/WEBP file whose first chunk is `kind` with `body`.
    fn webp(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
        let mut out = b"RIFF\0\0\0\0WEBP".to_vec();
        out.extend_from_slice(kind);
        out.extend_from_slice(&u32::try_from(body.len()).expect("small").to_le_bytes());
        out.extend_from_slice(body);
        out
    }

    /// Lossy and extended WebP headers, which the test encoder cannot write (it writes
    /// lossless only): sizes as the container specification lays them out.
    #[test]
    fn lossy_and_extended_webp_headers_give_their_sizes() {
        // Frame tag (3 bytes), start code, then 14-bit width and height with 2 scale bits.
        let mut lossy = vec![0x50, 0x01, 0x00, 0x9D, 0x01, 0x2A];
        lossy.extend_from_slice(&(640u16 | 0x4000).to_le_bytes());
        lossy.extend_from_slice(&480u16.to_le_bytes());
        assert_eq!(image_dimensions(&webp(b"VP8 ", &lossy)), Some((640, 480)));
        let mut bad_start = lossy.clone();
        bad_start[3] = 0;
        assert_eq!(image_dimensions(&webp(b"VP8 ", &bad_start)), None);
        // Flags and reserved (4 bytes), then 24-bit width and height minus one.
        let mut extended = vec![0x10, 0, 0, 0];
        extended.extend_from_slice(&[0x1F, 0x03, 0x00]);
        extended.extend_from_slice(&[0x0F, 0x27, 0x00]);
        assert_eq!(
            image_dimensions(&webp(b"VP8X", &extended)),
            Some((800, 10_000))
        );
        assert_eq!(image_dimensions(&webp(b"VP8X", &extended[..5])), None);
        assert_eq!(image_dimensions(&webp(b"ALPH", &extended)), None);
    }

    /// A JPEG's frame header may follow other segments and fill bytes; a scan or the end
    /// before any frame header means no dimensions.
    #[test]
    fn jpeg_frame_headers_are_found_past_other_segments() {
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0xAA, 0xBB, 0xFF, 0xFF];
        jpeg.extend_from_slice(&[0xC2, 0x00, 0x11, 0x08, 0x01, 0x2C, 0x00, 0xC8, 0x03]);
        assert_eq!(image_dimensions(&jpeg), Some((200, 300)));
        let scan_first = [0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x08, 0x01, 0x2C, 0x00, 0xC8];
        assert_eq!(image_dimensions(&scan_first), None);
        let zero_length = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x00, 0xFF, 0xC0];
        assert_eq!(image_dimensions(&zero_length), None);
        let zero_width = [
            0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x10, 0x00, 0x00,
        ];
        assert_eq!(image_dimensions(&zero_width), None);
    }
}
