//! A tool's display representation (OUT-2) and the media references the outlet hands back
//! (OUT-3).

use serde::{Deserialize, Serialize};

/// A tool's display representation, after the tool's own `toModelOutput` decided it (OUT-2):
/// text and media parts in order.
///
/// The outlet joins text parts verbatim; each media part becomes a marker on a line of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDisplay {
    /// The parts, in display order.
    pub parts: Vec<DisplayPart>,
}

impl ToolDisplay {
    /// An empty display.
    pub fn new() -> Self {
        Self::default()
    }

    /// A display of one text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().with_text(text)
    }

    /// Appends a text part.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.parts.push(DisplayPart::Text(text.into()));
        self
    }

    /// Appends a media part.
    pub fn with_media(mut self, media: Media) -> Self {
        self.parts.push(DisplayPart::Media(media));
        self
    }
}

impl From<String> for ToolDisplay {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

impl From<&str> for ToolDisplay {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

/// One part of a [`ToolDisplay`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DisplayPart {
    /// Text, shown as is (and paged when the whole display is over budget).
    Text(String),
    /// Media, archived and replaced by its marker (OUT-3).
    Media(Media),
}

/// Media bytes in a display or an attachment list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    /// The media type, e.g. `image/png`; when empty, it is sniffed from the bytes.
    pub media_type: String,
    /// The bytes: what counts (CM-7).
    pub data: Vec<u8>,
    /// Where the bytes came from, if known. An already persisted `artifact://` or `asset://`
    /// URL is reused and no artifact is created; any other URL (a live `workspace://` file …)
    /// is snapshotted into an artifact, as are bytes without a URL (CM-7).
    pub url: Option<String>,
}

impl Media {
    /// Media of a declared type without a known URL: its bytes are archived.
    pub fn new(media_type: impl Into<String>, data: Vec<u8>) -> Self {
        Self {
            media_type: media_type.into(),
            data,
            url: None,
        }
    }

    /// Media whose type the outlet takes from the bytes (magic numbers), for callers that
    /// have no declared type.
    pub fn sniffed(data: Vec<u8>) -> Self {
        Self::new(String::new(), data)
    }

    /// The same media, known to come from `url`.
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }
}

/// A media item as the model and the attachment records know it: where it is persisted and
/// what it is (OUT-3, PRJ-1).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MediaRef {
    /// The persisted URL: `artifact://<tool>/<name>` or a reused `artifact://` / `asset://`.
    pub url: String,
    /// The media type.
    pub media_type: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Width and height in pixels, for images whose header could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<(u32, u32)>,
}

/// The marker that stands for a media item in the text (OUT-3):
/// `[attachment: URL; media/type; N bytes; WxH]`, the dimensions only for images whose header
/// could be read.
///
/// ```
/// use ishiki_outlet::{MediaRef, marker};
/// let r = MediaRef {
///     url: "artifact://screenshot/0123456789abcdef.png".into(),
///     media_type: "image/png".into(),
///     bytes: 1234,
///     dimensions: Some((64, 48)),
/// };
/// assert_eq!(
///     marker(&r),
///     "[attachment: artifact://screenshot/0123456789abcdef.png; image/png; 1234 bytes; 64x48]"
/// );
/// ```
pub fn marker(r: &MediaRef) -> String {
    let mut out = format!(
        "[attachment: {}; {}; {} bytes",
        r.url, r.media_type, r.bytes
    );
    if let Some((w, h)) = r.dimensions {
        out.push_str(&format!("; {w}x{h}"));
    }
    out.push(']');
    out
}
