//! Declared media types are checked against the bytes (issue 13): a tool or program that
//! labels GIF bytes `image/png` gets an `image/gif` attachment, and bytes that are no media at
//! all never become an image attachment.

use ishiki_outlet::{Media, Outlet};

use super::common::TempStore;

/// A 1×1 GIF header: enough for sniffing and header dimensions.
const GIF: &[u8] = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;";

#[tokio::test]
async fn a_declared_media_type_the_bytes_contradict_is_corrected() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone());
    let gif = outlet
        .attach(
            "shot",
            Media {
                media_type: "image/png".to_owned(),
                data: GIF.to_vec(),
                url: None,
            },
        )
        .await
        .expect("archived");
    assert_eq!(gif.media_type, "image/gif");
    assert!(gif.url.ends_with(".gif"), "{}", gif.url);

    let text = outlet
        .attach(
            "shot",
            Media {
                media_type: "image/png".to_owned(),
                data: b"not an image at all".to_vec(),
                url: None,
            },
        )
        .await
        .expect("archived");
    assert_eq!(text.media_type, "text/plain");
    assert_eq!(text.dimensions, None);
}
