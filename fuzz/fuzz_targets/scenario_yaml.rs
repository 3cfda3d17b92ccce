//! The scenario file (SCENARIO.md): any text parses or fails with an error naming the field;
//! never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(error) = ishiki_cli::scenario::parse(text, std::path::Path::new("/nonexistent")) {
        let shown = error.to_string();
        assert!(!shown.is_empty());
        assert!(!shown.contains("budget breached"), "{shown}");
    }
});
