//! Raw read results (RES-7) and the serializable read source of FileSchemes (RES-3).

use serde::{Deserialize, Serialize};

/// The raw, structured result of reading a resource URL (RES-7).
///
/// This is what codemode programs see. Only the outlet turns it into pages or attachments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ReadResult {
    /// Text: the full text of the requested range.
    Text {
        /// The text.
        text: String,
        /// Present when the text comes from a FileScheme: enough to read the next page later.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<ReadSource>,
    },
    /// Media or other binary content.
    File {
        /// The URL that was read.
        url: String,
        /// The media type, sniffed from the bytes (not the extension alone).
        #[serde(rename = "mediaType")]
        media_type: String,
        /// The bytes; base64 on the wire.
        #[serde(with = "base64_bytes")]
        data: Vec<u8>,
        /// Where the bytes came from, when the handler can say.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<ReadSource>,
    },
}

/// Where a FileScheme's text came from: enough to read the next page later (RES-3, OUT-6).
///
/// A FileScheme first selects the requested view of its file (`?lines=A-B`, `?view=numbered`),
/// then `?offset=N` skips the first N bytes of that view. `url` is the read's URL without its
/// `offset` parameter, so a continuation is `url` plus the new offset; the scheme interprets it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadSource {
    /// The URL that was read, without `offset` (range, view and other parameters kept).
    pub url: String,
    /// Byte offset of the returned text within the selected view.
    pub offset: u64,
    /// Length in bytes of the whole selected view.
    pub total: u64,
    /// True when the source is an immutable snapshot (an artifact): re-reading gives the same
    /// bytes (OUT-8). False for a live file, which may change between reads.
    pub snapshot: bool,
}

impl ReadSource {
    /// The URL that reads the view from `offset + consumed` on: the continuation after the
    /// caller showed `consumed` bytes of the returned text.
    pub fn continue_url(&self, consumed: u64) -> String {
        let at = self.offset.saturating_add(consumed);
        let (base, fragment) = match self.url.split_once('#') {
            Some((base, fragment)) => (base, Some(fragment)),
            None => (self.url.as_str(), None),
        };
        let separator = if base.contains('?') { '&' } else { '?' };
        let mut out = format!("{base}{separator}offset={at}");
        if let Some(fragment) = fragment {
            out.push('#');
            out.push_str(fragment);
        }
        out
    }
}

mod base64_bytes {
    //! Bytes as a standard base64 string.
    use base64::DecodeError;
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text.as_bytes()).map_err(|e| {
            // The base64 crate's own messages are capitalised and end with a period.
            let why = match e {
                DecodeError::InvalidByte(at, _) => format!("invalid character at offset {at}"),
                DecodeError::InvalidLength(len) => format!("invalid length {len}"),
                DecodeError::InvalidLastSymbol(at, _) => {
                    format!("invalid last character at offset {at}")
                }
                DecodeError::InvalidPadding => "invalid padding".to_owned(),
            };
            serde::de::Error::custom(format!("data is not valid base64: {why}"))
        })
    }
}
