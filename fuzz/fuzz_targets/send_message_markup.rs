//! `send_message` element-mode markup (SEND-1, SEND-2): never panics, and what it rebuilds is
//! safe markup — tokenized again, the safe HTML has only formatting tags without attributes,
//! and every image piece is rebuilt as `<img src="…" …/>` with only the kept attributes.
#![no_main]

use ishiki_core::markup::{FORMATTING_TAGS, IMG_ATTRIBUTES, MAX_REPORTS, Piece, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(message) = std::str::from_utf8(data) else {
        return;
    };
    let markup = parse(message);
    assert!(markup.removed.len() <= MAX_REPORTS + 1);
    for piece in &markup.pieces {
        match piece {
            Piece::Html(html) => {
                // Re-parsing safe HTML gives back the same HTML and removes nothing.
                let again = parse(html);
                assert!(again.removed.is_empty(), "{html:?} -> {:?}", again.removed);
                assert!(
                    again.pieces.iter().all(|p| matches!(p, Piece::Html(_))),
                    "{html:?} holds an image"
                );
                for tag in html.split('<').skip(1) {
                    let name: String = tag
                        .trim_start_matches('/')
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric())
                        .collect();
                    assert!(
                        FORMATTING_TAGS.contains(&name.as_str()),
                        "<{name}> in {html:?}"
                    );
                }
            }
            Piece::Image { attributes, .. } => {
                let again = parse(&format!("<img src=\"x\"{attributes}/>"));
                assert!(again.removed.is_empty(), "{attributes:?}");
                for key in attributes.split('"').step_by(2) {
                    let key = key.trim().trim_end_matches('=');
                    assert!(key.is_empty() || IMG_ATTRIBUTES.contains(&key), "{key:?}");
                }
            }
        }
    }
});
