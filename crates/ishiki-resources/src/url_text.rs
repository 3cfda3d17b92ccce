//! URL text: parsing a resource URL with an error that quotes it, and showing a URL or path in
//! a message (control characters escaped, long text cut).

use url::Url;

use crate::{ResourceError, ResourceErrorKind};

/// Parses a resource URL, keeping query and fragment, with an error that quotes the input.
pub fn parse_url(url: &str) -> Result<Url, ResourceError> {
    Url::parse(url).map_err(|e| {
        ResourceError::new(
            ResourceErrorKind::InvalidUrl,
            format!("`{}` is not a valid URL: {e}", truncate_for_message(url)),
        )
    })
}

pub(crate) fn truncate_for_message(text: &str) -> String {
    const MAX: usize = 200;
    if text.len() <= MAX {
        return text.to_owned();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The URL or path as shown in a message: control characters escaped, long text cut.
pub(crate) fn show(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    truncate_for_message(&out)
}
