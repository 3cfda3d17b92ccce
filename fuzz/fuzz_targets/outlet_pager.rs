//! The outlet pager (OUT-4, OUT-7): over any text and budget, pages are never empty, never
//! split a character, join back to the text exactly, and fit the budget when it is above the
//! documented minimum.
#![no_main]

use ishiki_outlet::{Budget, DEFAULT_READER, continue_line, first_page};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let lines = usize::from(data[0]) + 1;
    let units = usize::from(u16::from_le_bytes([data[1], data[2]])) + 1;
    let Ok(text) = std::str::from_utf8(&data[3..]) else {
        return;
    };
    let budget = Budget {
        max_lines: lines,
        max_units: units,
    };
    let total = text.len() as u64;
    let mut offset = 0;
    let mut joined = String::new();
    while offset < text.len() {
        let rest = &text[offset..];
        let cut = first_page(rest, budget, |c| {
            continue_line(
                DEFAULT_READER,
                "artifact://fuzz/0123456789abcdef.txt",
                (offset + c) as u64,
                total,
            )
        });
        assert!(cut.body_len > 0 && cut.body_len <= rest.len(), "a page advances");
        assert!(rest.is_char_boundary(cut.body_len), "a cut never splits a character");
        if let Some(line) = &cut.continue_line {
            let minimum = ishiki_outlet::utf16_len(line) + 3;
            if budget.max_units >= minimum && budget.max_lines >= 3 {
                assert!(budget.fits(&cut.page_text(rest)), "the page fits its budget");
            }
        } else {
            assert_eq!(cut.body_len, rest.len(), "only the last page has no Continue line");
        }
        joined.push_str(&rest[..cut.body_len]);
        offset += cut.body_len;
    }
    assert_eq!(joined, text);
});
