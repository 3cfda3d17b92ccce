//! Unit tests of the private helpers; behaviour is tested in `tests/suite/assembly.rs`.

use super::decode::max_of;
use super::decode_profile::{ATTACHMENT_KEYS, ENABLE_KEYS};
use super::diagnostic::suggest;
use super::tree::Path;

#[test]
fn max_of_matches_the_type() {
    assert_eq!(max_of::<u32>(), i128::from(u32::MAX));
    assert_eq!(max_of::<u64>(), i128::from(u64::MAX));
    assert_eq!(max_of::<usize>(), i128::try_from(usize::MAX).unwrap_or(0));
}

#[test]
fn suggestions_cover_case_and_typos() {
    assert_eq!(suggest("image_input", ATTACHMENT_KEYS), Some("imageInput"));
    assert_eq!(
        suggest("maxImageCnt", ATTACHMENT_KEYS),
        Some("maxImageCount")
    );
    assert_eq!(suggest("enabled", ENABLE_KEYS), Some("enable"));
    assert_eq!(suggest("zzz", ENABLE_KEYS), None);
}

#[test]
fn paths_quote_names_with_dots() {
    let path = Path::root()
        .key("models")
        .key("gpt-4.1")
        .key("input")
        .index(2);
    assert_eq!(path.to_string(), "models.\"gpt-4.1\".input[2]");
}
