//! `cargo xtask bench` rows for the outlet: paging a 256 MiB text page by page, beside a
//! `memchr` line count of the same buffer in the same run (the floor: a pager reads every byte
//! at least once, so it cannot beat counting lines by much). Two rows: the pure paging core
//! ([`first_page`], where every page ends) and the whole exit ([`Outlet::emit_read_text`], which
//! also copies each page into the text the model gets).
//!
//! Prints `BENCH\t<measurement>\t<value>\t<target>` rows; extra arguments (cargo passes
//! `--bench`) are ignored.

#![allow(clippy::print_stdout, clippy::unwrap_used)] // a bench binary reports on stdout

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ishiki_outlet::{Budget, Outlet, continue_line, first_page};
use ishiki_resources::{ArtifactStore, ReadSource, ResourceError, ResourceErrorKind};

const SIZE: usize = 256 << 20;

/// A store that refuses everything: FileScheme paging must never archive (OUT-6).
#[derive(Debug)]
struct NoStore;

#[async_trait::async_trait]
impl ArtifactStore for NoStore {
    async fn put(&self, _: &str, _: &[u8], _: &str) -> Result<String, ResourceError> {
        Err(ResourceError::new(
            ResourceErrorKind::NotAllowed,
            "the bench archives nothing",
        ))
    }

    async fn get(&self, _: &str) -> Result<Vec<u8>, ResourceError> {
        Err(ResourceError::new(
            ResourceErrorKind::NotFound,
            "the bench archives nothing",
        ))
    }
}

/// A log-like text: lines of varied length, mostly ASCII with some CJK and astral characters,
/// and now and then a line longer than a page.
fn text() -> String {
    let mut s = String::with_capacity(SIZE + 4096);
    let mut n: u64 = 0;
    while s.len() < SIZE {
        n += 1;
        let width = (n.wrapping_mul(2_654_435_761) % 120) as usize;
        s.push_str("entry ");
        s.push_str(&n.to_string());
        s.push_str(": ");
        match n % 16 {
            0 => s.push_str("完成了 ✓ 😀 "),
            7 => s.push_str("warning: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 "),
            _ => {}
        }
        if n.is_multiple_of(50_000) {
            s.push_str(&"x".repeat(100_000));
        }
        for i in 0..width {
            s.push(char::from(b'a' + (i % 26) as u8));
        }
        s.push('\n');
    }
    s
}

fn best_of(runs: usize, mut f: impl FnMut() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut out = 0;
    for _ in 0..runs {
        let start = Instant::now();
        out = black_box(f());
        best = best.min(start.elapsed());
    }
    (best, out)
}

fn mb_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

fn main() {
    let text = text();
    let bytes = text.len();
    let budget = Budget::default();
    let outlet = Outlet::new(Arc::new(NoStore)).with_budget(budget);
    let url = "workspace:///home/workspace/big.log";

    let (floor, lines) = best_of(5, || memchr::memchr_iter(b'\n', text.as_bytes()).count());

    // The pure core: where every page ends, with the real Continue line.
    let (core, core_pages) = best_of(5, || {
        let mut offset = 0usize;
        let mut pages = 0usize;
        loop {
            let cut = first_page(&text[offset..], budget, |c| {
                let at = (offset + c) as u64;
                continue_line(
                    ishiki_outlet::DEFAULT_READER,
                    &format!("{url}?offset={at}"),
                    at,
                    bytes as u64,
                )
            });
            pages += 1;
            offset += cut.body_len;
            if cut.continue_line.is_none() {
                break;
            }
        }
        assert_eq!(offset, bytes, "the pages must cover the text");
        pages
    });

    // The whole exit: each page as the model gets it (its text copied into a String).
    let (emit, pages) = best_of(3, || {
        let mut offset = 0usize;
        let mut pages = 0usize;
        loop {
            let source = ReadSource {
                url: url.to_owned(),
                offset: offset as u64,
                total: bytes as u64,
                snapshot: false,
            };
            let page = outlet.emit_read_text(&text[offset..], &source);
            pages += 1;
            offset += page.body().len();
            if page.continuation.is_none() {
                break;
            }
        }
        assert_eq!(offset, bytes, "the pages must cover the text");
        pages
    });
    assert_eq!(core_pages, pages);

    let floor_rate = mb_per_s(bytes, floor);
    let core_rate = mb_per_s(bytes, core);
    let emit_rate = mb_per_s(bytes, emit);
    eprintln!(
        "outlet: {} MiB, {lines} lines, {pages} pages; memchr count {:.1} ms, first_page {:.1} ms, emit_read_text {:.1} ms",
        bytes >> 20,
        floor.as_secs_f64() * 1e3,
        core.as_secs_f64() * 1e3,
        emit.as_secs_f64() * 1e3,
    );
    println!("BENCH\toutlet: memchr line count of 256 MiB (floor)\t{floor_rate:.0} MB/s\t—");
    println!(
        "BENCH\toutlet: page 256 MiB (first_page)\t{core_rate:.0} MB/s = {:.0} % of floor\t≥ 50 % of floor",
        core_rate / floor_rate * 100.0
    );
    println!(
        "BENCH\toutlet: page 256 MiB with page texts (emit_read_text)\t{emit_rate:.0} MB/s = {:.0} % of floor\t—",
        emit_rate / floor_rate * 100.0
    );
}
