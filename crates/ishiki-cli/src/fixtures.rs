//! Fixture contents: the bytes of a scenario's files and images.
//!
//! Everything here is a pure function of its spec, so a scenario's files are the same on
//! every run and every machine. Images are real encodings made with the `image` crate (a
//! 16×16-step colour gradient, so every format, GIF included, encodes it exactly); `bytes`
//! pads an encoding with data every decoder skips, and `corrupt` writes a valid header
//! followed by garbage.

use std::fmt;

use base64::Engine as _;
use image::{ExtendedColorType, ImageEncoder};
use serde::{Deserialize, Serialize};

/// The largest image, in pixels, the runner will encode (about 120 MB of pixels in memory).
/// A bigger size is still available as a header with `corrupt: true`.
pub const MAX_PIXELS: u64 = 40_000_000;

/// The largest fixture file, in bytes.
pub const MAX_FILE_BYTES: u64 = 1 << 30;

/// How many garbage bytes follow the header of a corrupt image without `bytes`.
const CORRUPT_GARBAGE: usize = 64;

/// The contents of a `workspace` or `local` file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FileSpec {
    /// `{ text: STRING }`.
    Text(String),
    /// `{ lines: { count: N, text: "… {n} …" } }`.
    Lines(LinesSpec),
    /// `{ image: IMAGE }`.
    Image(ImageSpec),
    /// `{ base64: STRING }`: raw bytes.
    Base64(String),
}

/// `N` lines, each the template with `{n}` replaced by the 1-based line number, plus `\n`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinesSpec {
    /// How many lines.
    pub count: u64,
    /// The line template.
    pub text: String,
}

/// `IMAGE` = `{ width, height, format, bytes?, corrupt? }`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Encoding.
    pub format: ImageFormat,
    /// Pad the file to exactly this many bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Write a valid header followed by garbage.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub corrupt: bool,
}

/// An image encoding a fixture can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    /// PNG.
    Png,
    /// Baseline JPEG.
    Jpeg,
    /// GIF89a.
    Gif,
    /// Lossless WebP.
    Webp,
}

impl ImageFormat {
    /// The media type of this format.
    pub fn media_type(self) -> &'static str {
        match self {
            ImageFormat::Png => "image/png",
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Gif => "image/gif",
            ImageFormat::Webp => "image/webp",
        }
    }

    /// The name as written in a scenario.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpeg",
            ImageFormat::Gif => "gif",
            ImageFormat::Webp => "webp",
        }
    }

    /// The largest width or height the format can store.
    fn max_dimension(self) -> u32 {
        match self {
            ImageFormat::Png => i32::MAX.unsigned_abs(),
            ImageFormat::Jpeg | ImageFormat::Gif => u32::from(u16::MAX),
            ImageFormat::Webp => 16_384,
        }
    }
}

/// What is wrong with a fixture spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FixtureErrorKind {
    /// Width or height zero or over the format's or the runner's limit.
    Dimensions,
    /// `bytes` cannot be reached by padding (too small, or a size the format cannot have).
    Padding,
    /// A file over [`MAX_FILE_BYTES`].
    TooLarge,
    /// `base64` that does not decode.
    Base64,
    /// The encoder refused (should not happen for valid dimensions).
    Encode,
}

/// A fixture that cannot be generated; the message names the offending field relative to the
/// spec (`bytes`, `width`); the scenario loader prefixes where the spec is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureError {
    kind: FixtureErrorKind,
    field: &'static str,
    message: String,
}

impl FixtureError {
    fn new(kind: FixtureErrorKind, field: &'static str, message: String) -> Self {
        Self {
            kind,
            field,
            message,
        }
    }

    /// What is wrong.
    pub fn kind(&self) -> FixtureErrorKind {
        self.kind
    }

    /// The offending field of the spec (`image.bytes`, `base64`, …).
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The message without the field.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for FixtureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FixtureError {}

/// The bytes of a file spec.
pub fn file_bytes(spec: &FileSpec) -> Result<Vec<u8>, FixtureError> {
    match spec {
        FileSpec::Text(text) => Ok(text.as_bytes().to_vec()),
        FileSpec::Lines(lines) => lines_text(lines).map(String::into_bytes),
        FileSpec::Image(image) => image_bytes(image).map_err(|e| FixtureError {
            field: image_field(e.field),
            ..e
        }),
        FileSpec::Base64(data) => base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| FixtureError::new(FixtureErrorKind::Base64, "base64", base64_problem(&e))),
    }
}

/// A base64 error in the scenario's words (the crate's own end with a period and count
/// symbols in decimal code points).
fn base64_problem(e: &base64::DecodeError) -> String {
    use base64::DecodeError;
    match e {
        DecodeError::InvalidByte(at, b) => format!(
            "invalid base64: character {at} is '{}', not in the base64 alphabet",
            char::from(*b).escape_default()
        ),
        DecodeError::InvalidLength(n) => {
            format!("invalid base64: {n} symbols do not make whole bytes (truncated?)")
        }
        DecodeError::InvalidLastSymbol(at, b) => format!(
            "invalid base64: the last symbol '{}' at {at} does not end a byte (truncated?)",
            char::from(*b).escape_default()
        ),
        DecodeError::InvalidPadding => "invalid base64: missing or wrong `=` padding".to_owned(),
    }
}

/// Prefixes an image field with `image.` for errors about a file's `{ image: … }`.
fn image_field(field: &'static str) -> &'static str {
    match field {
        "width" => "image.width",
        "height" => "image.height",
        "bytes" => "image.bytes",
        "format" => "image.format",
        _ => "image",
    }
}

/// The text of a `lines` spec.
pub fn lines_text(spec: &LinesSpec) -> Result<String, FixtureError> {
    // Every line is at least its "\n"; estimate with the widest line number.
    let widest = spec.text.len() as u64 + 20 * spec.text.matches("{n}").count() as u64 + 1;
    if spec.count.saturating_mul(widest) > MAX_FILE_BYTES {
        return Err(FixtureError::new(
            FixtureErrorKind::TooLarge,
            "lines.count",
            format!(
                "{} lines would exceed the fixture limit of {MAX_FILE_BYTES} bytes",
                spec.count
            ),
        ));
    }
    let mut out = String::new();
    for n in 1..=spec.count {
        out.push_str(&spec.text.replace("{n}", &n.to_string()));
        out.push('\n');
    }
    Ok(out)
}

/// The bytes of an image spec.
pub fn image_bytes(spec: &ImageSpec) -> Result<Vec<u8>, FixtureError> {
    check_dimensions(spec)?;
    if let Some(n) = spec.bytes
        && n > MAX_FILE_BYTES
    {
        return Err(FixtureError::new(
            FixtureErrorKind::TooLarge,
            "bytes",
            format!("{n} exceeds the fixture limit of {MAX_FILE_BYTES} bytes"),
        ));
    }
    if spec.corrupt {
        return Ok(corrupt_image(spec));
    }
    let pixels = u64::from(spec.width) * u64::from(spec.height);
    if pixels > MAX_PIXELS {
        return Err(FixtureError::new(
            FixtureErrorKind::Dimensions,
            "width",
            format!(
                "{}x{} is {pixels} pixels, over the runner's limit of {MAX_PIXELS} for a valid image (a header alone needs `corrupt: true`)",
                spec.width, spec.height
            ),
        ));
    }
    let encoded = encode(spec)?;
    match spec.bytes {
        None => Ok(encoded),
        Some(n) => pad(encoded, spec.format, n),
    }
}

fn check_dimensions(spec: &ImageSpec) -> Result<(), FixtureError> {
    let max = spec.format.max_dimension();
    for (field, value) in [("width", spec.width), ("height", spec.height)] {
        if value == 0 {
            return Err(FixtureError::new(
                FixtureErrorKind::Dimensions,
                field,
                "must be at least 1".to_owned(),
            ));
        }
        if value > max {
            return Err(FixtureError::new(
                FixtureErrorKind::Dimensions,
                field,
                format!(
                    "{value} is over the {} limit of {max}",
                    spec.format.as_str()
                ),
            ));
        }
    }
    Ok(())
}

/// The gradient every fixture image shows: 16 steps of red across, 16 of green down, so at
/// most 256 colours (GIF keeps them exactly) and distinct sizes give distinct images.
fn gradient(width: u32, height: u32) -> Vec<u8> {
    let (w, h) = (u64::from(width), u64::from(height));
    let mut rgb = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        let g = (y * 16 / h) as u8 * 17;
        for x in 0..w {
            let r = (x * 16 / w) as u8 * 17;
            rgb.extend_from_slice(&[r, g, 0x80]);
        }
    }
    rgb
}

fn encode(spec: &ImageSpec) -> Result<Vec<u8>, FixtureError> {
    let (w, h) = (spec.width, spec.height);
    let rgb = gradient(w, h);
    let mut out = Vec::new();
    let result =
        match spec.format {
            ImageFormat::Png => image::codecs::png::PngEncoder::new(&mut out).write_image(
                &rgb,
                w,
                h,
                ExtendedColorType::Rgb8,
            ),
            ImageFormat::Jpeg => image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 85)
                .write_image(&rgb, w, h, ExtendedColorType::Rgb8),
            ImageFormat::Gif => image::codecs::gif::GifEncoder::new(&mut out).write_image(
                &rgb,
                w,
                h,
                ExtendedColorType::Rgb8,
            ),
            ImageFormat::Webp => image::codecs::webp::WebPEncoder::new_lossless(&mut out)
                .write_image(&rgb, w, h, ExtendedColorType::Rgb8),
        };
    result.map_err(|e| {
        FixtureError::new(
            FixtureErrorKind::Encode,
            "format",
            format!("cannot encode a {w}x{h} {}: {e}", spec.format.as_str()),
        )
    })?;
    Ok(out)
}

fn padding_error(format: ImageFormat, target: u64, base: usize, why: &str) -> FixtureError {
    FixtureError::new(
        FixtureErrorKind::Padding,
        "bytes",
        format!(
            "cannot pad this {} to exactly {target} bytes: {why} (unpadded it is {base} bytes)",
            format.as_str()
        ),
    )
}

/// Pads an encoded image to exactly `target` bytes with data decoders skip.
fn pad(image: Vec<u8>, format: ImageFormat, target: u64) -> Result<Vec<u8>, FixtureError> {
    let base = image.len();
    let target_len = usize::try_from(target)
        .map_err(|_| padding_error(format, target, base, "too large for this machine"))?;
    if target_len == base {
        return Ok(image);
    }
    if target_len < base {
        return Err(padding_error(
            format,
            target,
            base,
            "it is smaller than the image",
        ));
    }
    let gap = target_len - base;
    let padded = match format {
        ImageFormat::Png => pad_png(image, gap),
        ImageFormat::Jpeg => pad_jpeg(image, gap),
        ImageFormat::Gif => pad_gif(image, gap),
        ImageFormat::Webp => pad_webp(image, gap),
    }
    .map_err(|why| padding_error(format, target, base, why))?;
    debug_assert_eq!(padded.len(), target_len);
    Ok(padded)
}

/// A private ancillary chunk (`isHk`: ancillary, private, safe to copy) before `IEND`.
fn pad_png(mut image: Vec<u8>, gap: usize) -> Result<Vec<u8>, &'static str> {
    if gap < 12 {
        return Err("a PNG chunk takes at least 12 bytes");
    }
    // A PNG written by the encoder ends with the 12-byte IEND chunk.
    let iend = image.len().checked_sub(12).ok_or("no IEND chunk")?;
    // `bytes` is capped at MAX_FILE_BYTES (1 GiB), below PNG's 2^31 - 1 limit on chunk
    // data, so one chunk always suffices.
    let chunk = png_chunk(b"isHk", &vec![0; gap - 12]);
    image.splice(iend..iend, chunk);
    Ok(image)
}

/// One PNG chunk: length, type, data, CRC of type and data.
fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut chunk = Vec::with_capacity(12 + data.len());
    // Chunk data stays below MAX_FILE_BYTES (1 GiB), so its length fits in u32.
    chunk.extend_from_slice(&(data.len() as u32).to_be_bytes());
    chunk.extend_from_slice(kind);
    chunk.extend_from_slice(data);
    let crc = crc32(&chunk[4..]);
    chunk.extend_from_slice(&crc.to_be_bytes());
    chunk
}

/// CRC-32 (ISO 3309, as PNG uses it), bitwise: fixture chunks are few and small.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                0xEDB8_8320 ^ (crc >> 1)
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Comment (`COM`) segments right after `SOI`.
fn pad_jpeg(mut image: Vec<u8>, gap: usize) -> Result<Vec<u8>, &'static str> {
    const MAX_SEGMENT: usize = 2 + 0xFFFF;
    if gap < 4 {
        return Err("a JPEG comment segment takes at least 4 bytes");
    }
    let count = gap.div_ceil(MAX_SEGMENT);
    let mut segments = Vec::with_capacity(gap);
    for i in 0..count {
        // Spread evenly: with count = ceil(gap / MAX) each piece is between 4 and MAX bytes.
        let size = gap / count + usize::from(i < gap % count);
        let length = (size - 2) as u16;
        segments.extend_from_slice(&[0xFF, 0xFE]);
        segments.extend_from_slice(&length.to_be_bytes());
        segments.resize(segments.len() + size - 4, 0);
    }
    image.splice(2..2, segments);
    Ok(image)
}

/// One comment extension before the trailer.
fn pad_gif(mut image: Vec<u8>, gap: usize) -> Result<Vec<u8>, &'static str> {
    // 0x21 0xFE, sub-blocks of 1 + (1..=255) bytes, then a 0 terminator: 3 bytes, or 5 and up.
    if gap < 3 || gap == 4 {
        return Err("a GIF comment extension takes 3 bytes, or 5 and more");
    }
    if image.last() != Some(&0x3B) {
        return Err("no GIF trailer");
    }
    let trailer = image.len() - 1;
    let blocks_total = gap - 3;
    let count = blocks_total.div_ceil(256);
    let mut ext = Vec::with_capacity(gap);
    ext.extend_from_slice(&[0x21, 0xFE]);
    for i in 0..count {
        // Each sub-block is 2..=256 bytes: its length byte and 1..=255 bytes of text.
        let size = blocks_total / count + usize::from(i < blocks_total % count);
        ext.push((size - 1) as u8);
        ext.resize(ext.len() + size - 1, b' ');
    }
    ext.push(0);
    image.splice(trailer..trailer, ext);
    Ok(image)
}

/// An unknown RIFF chunk after the image; the file becomes extended WebP (`VP8X`), the form
/// in which the container allows unknown chunks.
fn pad_webp(mut image: Vec<u8>, gap: usize) -> Result<Vec<u8>, &'static str> {
    if image.len() < 30 || &image[0..4] != b"RIFF" || &image[8..12] != b"WEBP" {
        return Err("not a RIFF WebP file");
    }
    if !gap.is_multiple_of(2) {
        return Err("RIFF chunks are padded to even sizes, so a WebP file's size is even");
    }
    let extended = &image[12..16] == b"VP8X";
    let vp8x_len = if extended { 0 } else { 18 };
    if gap < vp8x_len + 8 {
        return Err(if extended {
            "an unknown WebP chunk takes at least 8 bytes"
        } else {
            "the VP8X header and an unknown chunk take at least 26 bytes"
        });
    }
    if !extended {
        let (w, h) = webp_lossless_dimensions(&image).ok_or("not a lossless WebP")?;
        let mut vp8x = Vec::with_capacity(18);
        vp8x.extend_from_slice(b"VP8X");
        vp8x.extend_from_slice(&10u32.to_le_bytes());
        vp8x.extend_from_slice(&[0, 0, 0, 0]);
        vp8x.extend_from_slice(&(w - 1).to_le_bytes()[..3]);
        vp8x.extend_from_slice(&(h - 1).to_le_bytes()[..3]);
        image.splice(12..12, vp8x);
    }
    let data = gap - vp8x_len - 8;
    let data_len = u32::try_from(data).map_err(|_| "padding over 4 GiB")?;
    image.extend_from_slice(b"ishk");
    image.extend_from_slice(&data_len.to_le_bytes());
    image.resize(image.len() + data, 0);
    let riff_size = u32::try_from(image.len() - 8).map_err(|_| "file over 4 GiB")?;
    image[4..8].copy_from_slice(&riff_size.to_le_bytes());
    Ok(image)
}

/// Width and height from a simple-format lossless WebP's `VP8L` header.
fn webp_lossless_dimensions(image: &[u8]) -> Option<(u32, u32)> {
    if image.get(12..16)? != b"VP8L" || *image.get(20)? != 0x2F {
        return None;
    }
    let bits = u32::from_le_bytes(image.get(21..25)?.try_into().ok()?);
    Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
}

/// Deterministic garbage: an xorshift stream, its first bytes chosen so no decoder can take
/// them for what should follow the header.
fn garbage(len: usize) -> Vec<u8> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut out: Vec<u8> = (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    // 0xFF 0xFF is neither a valid zlib header nor a GIF block nor a JPEG marker start.
    for b in out.iter_mut().take(2) {
        *b = 0xFF;
    }
    out
}

/// A valid header for the format and dimensions, then garbage, `spec.bytes` long in all
/// (never shorter than the header).
fn corrupt_image(spec: &ImageSpec) -> Vec<u8> {
    let header = corrupt_header(spec);
    let total = spec
        .bytes
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(header.len() + CORRUPT_GARBAGE)
        .max(header.len());
    let mut out = header;
    let tail = garbage(total - out.len());
    out.extend_from_slice(&tail);
    // Sizes stay below MAX_FILE_BYTES (checked by the caller), so they fit in u32.
    match spec.format {
        ImageFormat::Png => {
            let idat = (out.len() - 41) as u32;
            out[33..37].copy_from_slice(&idat.to_be_bytes());
        }
        ImageFormat::Webp => {
            let riff = (out.len() - 8) as u32;
            let chunk = (out.len() - 20) as u32;
            out[4..8].copy_from_slice(&riff.to_le_bytes());
            out[16..20].copy_from_slice(&chunk.to_le_bytes());
        }
        ImageFormat::Jpeg | ImageFormat::Gif => {}
    }
    out
}

/// The header `corrupt: true` writes: enough to tell the format and its claimed dimensions.
fn corrupt_header(spec: &ImageSpec) -> Vec<u8> {
    let (w, h) = (spec.width, spec.height);
    match spec.format {
        ImageFormat::Png => {
            let mut ihdr = Vec::with_capacity(13);
            ihdr.extend_from_slice(&w.to_be_bytes());
            ihdr.extend_from_slice(&h.to_be_bytes());
            // 8-bit RGB, deflate, adaptive filtering, no interlace.
            ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
            let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
            out.extend_from_slice(&png_chunk(b"IHDR", &ihdr));
            // An IDAT chunk header, its length fixed below: decoders read the header up to
            // the first IDAT, so the dimensions read; the "compressed" data is the garbage.
            out.extend_from_slice(b"\0\0\0\0IDAT");
            out
        }
        ImageFormat::Jpeg => {
            // SOI, then a baseline SOF0 for 3 components (dimensions fit u16: checked).
            let mut out = vec![0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 8];
            out.extend_from_slice(&(h as u16).to_be_bytes());
            out.extend_from_slice(&(w as u16).to_be_bytes());
            out.extend_from_slice(&[3, 1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0]);
            // A start of scan, so header readers finish; no quantization or Huffman tables
            // precede it, so the scan (the garbage) cannot be decoded.
            out.extend_from_slice(&[
                0xFF, 0xDA, 0x00, 0x0C, 3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0,
            ]);
            out
        }
        ImageFormat::Gif => {
            // Header and logical screen descriptor without a global colour table.
            let mut out = b"GIF89a".to_vec();
            out.extend_from_slice(&(w as u16).to_le_bytes());
            out.extend_from_slice(&(h as u16).to_le_bytes());
            out.extend_from_slice(&[0, 0, 0]);
            out
        }
        ImageFormat::Webp => {
            // RIFF sizes are fixed below; VP8L signature, then 14-bit width-1, height-1.
            let mut out = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2F".to_vec();
            let bits = (w - 1) | ((h - 1) << 14);
            out.extend_from_slice(&bits.to_le_bytes());
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::ImageReader;
    use proptest::prelude::*;
    use std::io::Cursor;

    const FORMATS: [ImageFormat; 4] = [
        ImageFormat::Png,
        ImageFormat::Jpeg,
        ImageFormat::Gif,
        ImageFormat::Webp,
    ];

    fn spec(width: u32, height: u32, format: ImageFormat) -> ImageSpec {
        ImageSpec {
            width,
            height,
            format,
            bytes: None,
            corrupt: false,
        }
    }

    fn reader(bytes: &[u8]) -> ImageReader<Cursor<&[u8]>> {
        ImageReader::new(Cursor::new(bytes))
            .with_guessed_format()
            .expect("cursor reads")
    }

    fn decode(bytes: &[u8]) -> image::ImageResult<(u32, u32)> {
        let img = reader(bytes).decode()?;
        Ok((img.width(), img.height()))
    }

    fn header_dimensions(bytes: &[u8]) -> Option<(u32, u32)> {
        reader(bytes).into_dimensions().ok()
    }

    #[test]
    fn images_decode_to_their_size_in_every_format() {
        for format in FORMATS {
            for (w, h) in [(1, 1), (64, 48), (33, 32), (3, 200)] {
                let bytes = image_bytes(&spec(w, h, format)).expect("encodes");
                assert_eq!(
                    reader(&bytes).format(),
                    Some(match format {
                        ImageFormat::Png => image::ImageFormat::Png,
                        ImageFormat::Jpeg => image::ImageFormat::Jpeg,
                        ImageFormat::Gif => image::ImageFormat::Gif,
                        ImageFormat::Webp => image::ImageFormat::WebP,
                    })
                );
                assert_eq!(decode(&bytes).expect("decodes"), (w, h), "{format:?}");
            }
        }
    }

    #[test]
    fn images_are_deterministic_and_differ_by_size() {
        for format in FORMATS {
            let a = image_bytes(&spec(32, 32, format)).expect("encodes");
            assert_eq!(a, image_bytes(&spec(32, 32, format)).expect("encodes"));
            assert_ne!(a, image_bytes(&spec(33, 32, format)).expect("encodes"));
        }
    }

    #[test]
    fn gif_keeps_the_gradient_exactly() {
        let bytes = image_bytes(&spec(40, 20, ImageFormat::Gif)).expect("encodes");
        let img = reader(&bytes).decode().expect("decodes").to_rgb8();
        assert_eq!(img.into_raw(), gradient(40, 20));
    }

    #[test]
    fn padded_images_have_exact_sizes_and_still_decode() {
        for format in FORMATS {
            let base = image_bytes(&spec(20, 10, format)).expect("encodes").len() as u64;
            let targets = [
                base,
                base + 26,
                base + 28,
                base + 1000,
                base + 200_002,
                base + 70_000 * 2,
            ];
            for n in targets {
                let padded = image_bytes(&ImageSpec {
                    bytes: Some(n),
                    ..spec(20, 10, format)
                })
                .expect("pads");
                assert_eq!(padded.len() as u64, n, "{format:?} to {n}");
                assert_eq!(
                    decode(&padded).expect("decodes"),
                    (20, 10),
                    "{format:?} to {n}"
                );
                assert_eq!(header_dimensions(&padded), Some((20, 10)));
            }
        }
    }

    #[test]
    fn small_gaps_pad_where_the_format_allows() {
        let with_gap = |format, gap| {
            let base = image_bytes(&spec(5, 5, format)).expect("encodes").len() as u64;
            image_bytes(&ImageSpec {
                bytes: Some(base + gap),
                ..spec(5, 5, format)
            })
        };
        assert!(with_gap(ImageFormat::Png, 11).is_err());
        assert!(with_gap(ImageFormat::Png, 12).is_ok());
        assert!(with_gap(ImageFormat::Jpeg, 3).is_err());
        assert!(with_gap(ImageFormat::Jpeg, 4).is_ok());
        assert!(with_gap(ImageFormat::Gif, 3).is_ok());
        assert!(with_gap(ImageFormat::Gif, 4).is_err());
        assert!(with_gap(ImageFormat::Gif, 5).is_ok());
        assert!(with_gap(ImageFormat::Webp, 24).is_err());
        assert!(with_gap(ImageFormat::Webp, 26).is_ok());
        assert!(with_gap(ImageFormat::Webp, 27).is_err());
        let ok = with_gap(ImageFormat::Gif, 5).expect("pads");
        assert_eq!(decode(&ok).expect("decodes"), (5, 5));
    }

    #[test]
    fn crc32_matches_known_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
    }

    #[test]
    fn png_padding_is_a_valid_private_chunk() {
        let padded = image_bytes(&ImageSpec {
            bytes: Some(1000),
            ..spec(4, 4, ImageFormat::Png)
        })
        .expect("pads");
        // Walk the chunks: each length fits, each CRC is right, IEND comes last.
        let mut at = 8;
        let mut kinds = Vec::new();
        while at < padded.len() {
            let len = u32::from_be_bytes(padded[at..at + 4].try_into().expect("4 bytes")) as usize;
            let body = &padded[at + 4..at + 8 + len];
            let crc = u32::from_be_bytes(
                padded[at + 8 + len..at + 12 + len]
                    .try_into()
                    .expect("4 bytes"),
            );
            assert_eq!(crc32(body), crc);
            kinds.push(String::from_utf8_lossy(&body[..4]).into_owned());
            at += 12 + len;
        }
        assert_eq!(at, padded.len());
        assert_eq!(kinds.last().map(String::as_str), Some("IEND"));
        assert_eq!(kinds[kinds.len() - 2], "isHk");
        assert!(padded.windows(4).any(|w| w == b"isHk"));
        assert!(padded.ends_with(&png_chunk(b"IEND", &[])));
    }

    #[test]
    fn corrupt_images_have_a_header_and_fail_to_decode() {
        for format in FORMATS {
            let bytes = image_bytes(&ImageSpec {
                corrupt: true,
                ..spec(640, 480, format)
            })
            .expect("writes");
            let header = corrupt_header(&spec(640, 480, format));
            assert_eq!(bytes.len(), header.len() + CORRUPT_GARBAGE);
            let mut unsized_copy = bytes.clone();
            // Chunk sizes are filled in once the length is known.
            match format {
                ImageFormat::Png => unsized_copy[33..37].fill(0),
                ImageFormat::Webp => {
                    unsized_copy[4..8].fill(0);
                    unsized_copy[16..20].fill(0);
                }
                ImageFormat::Jpeg | ImageFormat::Gif => {}
            }
            assert!(unsized_copy.starts_with(&header), "{format:?}");
            assert!(decode(&bytes).is_err(), "{format:?} decoded");
            assert_eq!(
                reader(&bytes).format().map(|f| f.to_mime_type()),
                Some(format.media_type())
            );
        }
        let png = image_bytes(&ImageSpec {
            corrupt: true,
            ..spec(30_000, 30_000, ImageFormat::Png)
        })
        .expect("a header alone may claim any size");
        assert_eq!(png[12..16], *b"IHDR");
        assert_eq!(png[16..24], [0, 0, 0x75, 0x30, 0, 0, 0x75, 0x30]);
        let sized = image_bytes(&ImageSpec {
            corrupt: true,
            bytes: Some(5000),
            ..spec(8, 8, ImageFormat::Webp)
        })
        .expect("writes");
        assert_eq!(sized.len(), 5000);
    }

    /// Header readers (`into_dimensions`) see the claimed size of a corrupt file in every
    /// format; only decoding fails.
    #[test]
    fn corrupt_headers_claim_their_dimensions() {
        for format in FORMATS {
            let bytes = image_bytes(&ImageSpec {
                corrupt: true,
                ..spec(640, 480, format)
            })
            .expect("writes");
            assert_eq!(header_dimensions(&bytes), Some((640, 480)), "{format:?}");
        }
    }

    #[test]
    fn files_of_every_kind() {
        assert_eq!(
            file_bytes(&FileSpec::Text("a\nb".into())).expect("ok"),
            b"a\nb"
        );
        let lines = FileSpec::Lines(LinesSpec {
            count: 3,
            text: "line {n} of {n}".into(),
        });
        assert_eq!(
            file_bytes(&lines).expect("ok"),
            b"line 1 of 1\nline 2 of 2\nline 3 of 3\n"
        );
        assert_eq!(
            file_bytes(&FileSpec::Lines(LinesSpec {
                count: 0,
                text: "x".into()
            }))
            .expect("ok"),
            b""
        );
        assert_eq!(
            file_bytes(&FileSpec::Base64("aGVsbG8=".into())).expect("ok"),
            b"hello"
        );
        let png = file_bytes(&FileSpec::Image(spec(3, 2, ImageFormat::Png))).expect("ok");
        assert_eq!(decode(&png).expect("decodes"), (3, 2));
    }

    #[test]
    fn bad_specs_name_the_field() {
        let errors = [
            file_bytes(&FileSpec::Base64("aGVsbG8".into())),
            file_bytes(&FileSpec::Base64("not base64!".into())),
            file_bytes(&FileSpec::Image(spec(0, 2, ImageFormat::Png))),
            file_bytes(&FileSpec::Image(spec(20_000, 2, ImageFormat::Webp))),
            file_bytes(&FileSpec::Image(spec(10_000, 10_000, ImageFormat::Png))),
            file_bytes(&FileSpec::Image(ImageSpec {
                bytes: Some(10),
                ..spec(32, 32, ImageFormat::Png)
            })),
            file_bytes(&FileSpec::Image(ImageSpec {
                bytes: Some(1_000_001),
                ..spec(32, 32, ImageFormat::Webp)
            })),
            file_bytes(&FileSpec::Lines(LinesSpec {
                count: u64::MAX,
                text: "x".into(),
            })),
        ];
        let text: Vec<String> = errors
            .into_iter()
            .map(|r| r.map(|_| "ok".to_owned()).unwrap_or_else(|e| e.to_string()))
            .collect();
        insta::assert_snapshot!(text.join("\n"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn padding_reaches_every_reachable_size(
            format_index in 0usize..4,
            w in 1u32..40,
            h in 1u32..40,
            gap in 0u64..600,
        ) {
            let format = FORMATS[format_index];
            let base = image_bytes(&spec(w, h, format)).expect("encodes").len() as u64;
            let result = image_bytes(&ImageSpec { bytes: Some(base + gap), ..spec(w, h, format) });
            let reachable = match format {
                ImageFormat::Png => gap == 0 || gap >= 12,
                ImageFormat::Jpeg => gap == 0 || gap >= 4,
                ImageFormat::Gif => gap == 0 || gap == 3 || gap >= 5,
                ImageFormat::Webp => gap == 0 || (gap >= 26 && gap % 2 == 0),
            };
            prop_assert_eq!(result.is_ok(), reachable);
            if let Ok(bytes) = result {
                prop_assert_eq!(bytes.len() as u64, base + gap);
                prop_assert_eq!(decode(&bytes).expect("decodes"), (w, h));
            }
        }
    }
}
