//! OUT-4 and OUT-7 as properties: for arbitrary Unicode text and any budget that admits the
//! Continue line, pages fit, advance, never split a character, carry an anchor until the last,
//! and join back to the input — through FileScheme paging and through the artifact path.

use ishiki_outlet::{Budget, Outlet, ToolDisplay, continue_line, first_page, utf16_len};
use ishiki_resources::{ArtifactStore as _, ReadSource};
use proptest::collection::vec;
use proptest::prelude::*;

use super::common::{TempStore, Wait, check_page, split_offset};

const FILE_URL: &str = "workspace:///home/workspace/notes.txt";
/// An artifact URL as long as the outlet's: `artifact://t/<16 hex>.txt`.
const ARTIFACT_URL_SHAPE: &str = "artifact://t/0123456789abcdef.txt";

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z ]{0,30}",
        2 => Just("\n".to_owned()),
        1 => Just("\r\n".to_owned()),
        1 => Just("\n\n\n".to_owned()),
        2 => "[😀𝔘\u{10000}-\u{10FFFF}]{1,6}",
        2 => "[中文éß\u{FFFF}\u{0800}]{1,6}",
        2 => any::<char>().prop_map(String::from),
    ]
}

/// One line of 100,000 UTF-16 units: ASCII, astral or mixed, with or without a line end.
fn long_line() -> impl Strategy<Value = String> {
    (0..3u8, any::<bool>()).prop_map(|(kind, newline)| {
        let mut s = match kind {
            0 => "a".repeat(100_000),
            1 => "😀".repeat(50_000),
            _ => "ab😀中".repeat(20_000),
        };
        if newline {
            s.push('\n');
        }
        s
    })
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => vec(piece(), 0..120).prop_map(|p| p.concat()),
        1 => Just(String::new()),
        1 => long_line(),
    ]
}

/// A budget that admits the Continue line of `url_shape` for a text of `len` bytes, plus the
/// separator and one character (the documented minimum), plus some room.
fn budget_for(url_shape: &str, len: usize, extra_units: usize, extra_lines: usize) -> Budget {
    let worst = continue_line(
        ishiki_outlet::DEFAULT_READER,
        &format!("{url_shape}?offset={len}"),
        len as u64,
        len as u64,
    );
    Budget {
        max_lines: 3 + extra_lines,
        max_units: utf16_len(&worst) + 3 + extra_units,
    }
}

/// Pages `text` as a FileScheme read would: each page is the rest of the text from the last
/// continuation's offset, with the source URL.
fn page_file(outlet: &Outlet, text: &str) -> Vec<String> {
    let budget = outlet.budget();
    let mut bodies = Vec::new();
    let mut offset = 0usize;
    loop {
        let source = ReadSource {
            url: FILE_URL.to_owned(),
            offset: offset as u64,
            total: text.len() as u64,
            snapshot: false,
        };
        let page = outlet.emit_read_text(&text[offset..], &source);
        let body = check_page(&page, budget);
        offset += body.len();
        bodies.push(body);
        match page.continuation {
            None => break,
            Some(next) => assert_eq!(next.url, format!("{FILE_URL}?offset={offset}")),
        }
    }
    assert_eq!(offset, text.len(), "the last page ends the range");
    bodies
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn out7_file_pages_fit_advance_and_join_to_the_input(
        text in text(),
        extra_units in prop_oneof![0usize..64, 0usize..3000],
        extra_lines in 0usize..60,
    ) {
        let store = TempStore::new();
        let budget = budget_for(FILE_URL, text.len(), extra_units, extra_lines);
        let outlet = Outlet::new(store.store.clone()).with_budget(budget);
        let bodies = page_file(&outlet, &text);
        prop_assert_eq!(bodies.concat(), text);
        // OUT-6: FileScheme pages never archive.
        prop_assert_eq!(store.count(), 0);
    }

    #[test]
    fn out5_out7_artifact_pages_fit_advance_and_join_to_the_input(
        text in text(),
        extra_units in prop_oneof![0usize..64, 0usize..3000],
        extra_lines in 0usize..60,
    ) {
        let store = TempStore::new();
        let budget = budget_for(ARTIFACT_URL_SHAPE, text.len(), extra_units, extra_lines);
        let outlet = Outlet::new(store.store.clone()).with_budget(budget);
        let first = outlet.emit("t", ToolDisplay::text(text.clone())).wait().unwrap();
        let mut bodies = vec![check_page(&first, budget)];
        let mut next = first.continuation.clone();
        if next.is_none() {
            // Within budget: unchanged, and nothing archived.
            prop_assert_eq!(&first.text, &text);
            prop_assert_eq!(store.count(), 0);
        }
        while let Some(cont) = next {
            // The later pages are reads of the one artifact (OUT-5), as the artifact FileScheme
            // serves them: the text from the offset, with a snapshot source.
            let (url, offset) = split_offset(&cont.url);
            prop_assert!(url.starts_with("artifact://t/") && url.ends_with(".txt"));
            let all = String::from_utf8(store.store.get(&url).wait().unwrap()).unwrap();
            prop_assert_eq!(&all, &text);
            let source = ReadSource { url, offset, total: all.len() as u64, snapshot: true };
            let page = outlet.emit_read_text(&all[offset as usize..], &source);
            bodies.push(check_page(&page, budget));
            next = page.continuation;
            prop_assert_eq!(store.count(), 1);
        }
        prop_assert_eq!(bodies.concat(), text);
    }

    /// A Continue line whose length jumps around with the cut still yields progress, a char
    /// boundary and an end: the core never loops, whatever the line function does.
    #[test]
    fn out7_first_page_advances_with_any_continue_line(
        text in text(),
        max_units in 0usize..200,
        max_lines in 0usize..8,
        salt in any::<u64>(),
    ) {
        let budget = Budget { max_lines, max_units };
        let mut offset = 0;
        let mut pages = 0;
        loop {
            let rest = &text[offset..];
            let cut = first_page(rest, budget, |c| {
                "x".repeat(((c as u64).wrapping_mul(salt) % 97) as usize)
            });
            prop_assert!(rest.is_char_boundary(cut.body_len));
            offset += cut.body_len;
            pages += 1;
            if cut.continue_line.is_none() {
                break;
            }
            prop_assert!(cut.body_len > 0, "a continuation must advance");
        }
        prop_assert_eq!(offset, text.len());
        prop_assert!(pages <= text.chars().count().max(1));
    }
}

#[tokio::test]
async fn out7_empty_text_is_one_page_without_anchor() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone()).with_budget(Budget {
        max_lines: 3,
        max_units: 120,
    });
    assert_eq!(page_file(&outlet, ""), vec![String::new()]);
    let page = outlet.emit("t", ToolDisplay::text("")).await.unwrap();
    assert_eq!(page.text, "");
    assert_eq!(page.continuation, None);
}

#[test]
fn out7_long_line_is_read_to_its_end_across_pages() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone());
    let line = "😀".repeat(50_000) + "\nend\n";
    let bodies = page_file(&outlet, &line);
    assert_eq!(bodies.concat(), line);
    assert!(bodies.len() >= 4, "{} pages", bodies.len());
    // Mid-line cuts, each on a character: a body of whole emoji.
    assert!(bodies[0].chars().all(|c| c == '😀'));
}

#[test]
fn out4_default_budget_is_2000_lines_and_30000_units() {
    let text: String = (1..=4500).map(|n| format!("entry {n}: ok\n")).collect();
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone());
    assert_eq!(
        outlet.budget(),
        Budget {
            max_lines: 2000,
            max_units: 30_000
        }
    );
    let bodies = page_file(&outlet, &text);
    assert_eq!(bodies.concat(), text);
    // 1998 lines + the separator's blank line + the Continue line = 2000.
    assert_eq!(bodies[0].lines().count(), 1998);
    assert_eq!(bodies.len(), 3);
}

#[test]
fn out4_crlf_pages_end_after_the_line_feed() {
    let text = "row\r\n".repeat(50);
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone()).with_budget(Budget {
        max_lines: 12,
        max_units: 1000,
    });
    let bodies = page_file(&outlet, &text);
    assert_eq!(bodies.concat(), text);
    assert!(bodies.iter().all(|b| b.ends_with("\r\n")));
}

/// The Continue line names the embedder's reading tool when the outlet is told one, and
/// Ishiki's `read` otherwise.
#[tokio::test]
async fn the_continue_line_names_the_reader_the_outlet_was_given() {
    let store = TempStore::new();
    let budget = Budget {
        max_lines: 5,
        max_units: 30_000,
    };
    let long = "line\n".repeat(20);
    let default = Outlet::new(store.store.clone()).with_budget(budget);
    let page = default
        .emit("t", ToolDisplay::text(long.clone()))
        .await
        .unwrap();
    assert!(
        page.text.contains("\n[Continue: read {\"url\":"),
        "{}",
        page.text
    );

    let fetch = Outlet::new(store.store.clone())
        .with_budget(budget)
        .with_reader("fetch_resource");
    let page = fetch.emit("t", ToolDisplay::text(long)).await.unwrap();
    assert!(
        page.text.contains("\n[Continue: fetch_resource {\"url\":"),
        "{}",
        page.text
    );
    assert_eq!(check_page(&page, budget), "line\n".repeat(3));
}
