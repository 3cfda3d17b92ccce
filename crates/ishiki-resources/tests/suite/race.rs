//! Swap races (SEC-2, RES-4): a process that can write the workspace (the agent's own shell)
//! swaps a checked file and a checked directory for symlinks out of the root, over and over,
//! while reads and writes run. A check-then-open-by-name walk loses this race; resolving every
//! path beneath an open directory handle cannot.
//!
//! The swaps are `renameat2(RENAME_EXCHANGE)`: each name always exists, so a writer never
//! recreates a directory in a gap between two renames. Linux only (the exchange is).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ishiki_resources::ReadResult;

use super::common::{SECRET, Sandbox, runtime};

/// What the swapped names hold while they are inside the root.
const INSIDE: &str = "inside the root";
/// Swap rounds at least (each round swaps out and back), and at most.
const MIN_ROUNDS: u64 = 20_000;
const MAX_ROUNDS: u64 = 2_000_000;
/// Reads (rounds of four URLs) and writes that must overlap the swapping.
const MIN_READS: u64 = 2_000;
const MIN_WRITES: u64 = 300;

/// Atomically exchanges the directory entries `a` and `b`.
#[allow(unsafe_code)]
fn exchange(a: &Path, b: &Path) {
    let a = CString::new(a.as_os_str().as_bytes()).expect("no NUL in a test path");
    let b = CString::new(b.as_os_str().as_bytes()).expect("no NUL in a test path");
    // SAFETY: both pointers are valid NUL-terminated strings for the duration of the call;
    // `renameat2` reads them and nothing else.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("a listable directory")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn sec2_symlink_swaps_during_reads_and_writes_never_reach_outside() {
    use std::os::unix::fs::symlink;

    let sandbox = Sandbox::new();
    let root = &sandbox.root;
    // Outside: `secret.txt` (from the fixture) and `dir/file.txt`, both holding the secret.
    let outside_dir = sandbox.outside.join("dir");
    std::fs::create_dir(&outside_dir).expect("outside/dir");
    std::fs::write(outside_dir.join("file.txt"), SECRET).expect("outside/dir/file.txt");
    // Inside: `swap/file.txt` (a file) and `swapdir/` (a directory holding `file.txt`), each
    // with a parked symlink out of the root to exchange places with.
    std::fs::create_dir(root.join("swap")).expect("swap/");
    std::fs::write(root.join("swap/file.txt"), INSIDE).expect("swap/file.txt");
    symlink(
        sandbox.outside.join("secret.txt"),
        root.join("swap/parked_link"),
    )
    .expect("swap/parked_link");
    std::fs::create_dir(root.join("swapdir")).expect("swapdir/");
    std::fs::write(root.join("swapdir/file.txt"), INSIDE).expect("swapdir/file.txt");
    symlink("../outside/dir", root.join("parked_dir_link")).expect("parked_dir_link");
    let outside_before = sandbox.outside_listing();
    let outside_dir_before = file_names(&outside_dir);

    let urls = [
        "workspace:///swap/file.txt",
        "workspace:///swapdir/file.txt",
        "local:///swap/file.txt",
        "local://named/swapdir/file.txt",
    ];
    let done = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let writes = AtomicU64::new(0);
    let reads_outside = AtomicU64::new(0);
    let mut rounds = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = runtime();
            while !done.load(Ordering::Acquire) {
                for url in urls {
                    if let Ok(ReadResult::Text { text, .. }) = rt.block_on(sandbox.center.read(url))
                        && text == SECRET
                    {
                        reads_outside.fetch_add(1, Ordering::Relaxed);
                    }
                }
                reads.fetch_add(1, Ordering::Release);
            }
        });
        s.spawn(|| {
            let mut i = 0u64;
            while !done.load(Ordering::Acquire) {
                // Refusals are expected while the directory is a symlink out; only where the
                // bytes land counts, checked below.
                let _ = sandbox
                    .workspace
                    .write(&format!("/swapdir/w{i}.txt"), INSIDE.as_bytes());
                i += 1;
                writes.fetch_add(1, Ordering::Release);
            }
        });
        // The swapping "shell": bounded by rounds, never by time.
        while rounds < MAX_ROUNDS {
            for _ in 0..2 {
                exchange(&root.join("swap/file.txt"), &root.join("swap/parked_link"));
                exchange(&root.join("swapdir"), &root.join("parked_dir_link"));
            }
            rounds += 1;
            if rounds >= MIN_ROUNDS
                && reads.load(Ordering::Acquire) >= MIN_READS
                && writes.load(Ordering::Acquire) >= MIN_WRITES
            {
                break;
            }
        }
        done.store(true, Ordering::Release);
    });

    let reads = reads.load(Ordering::Acquire);
    let writes = writes.load(Ordering::Acquire);
    assert!(
        reads >= MIN_READS && writes >= MIN_WRITES,
        "the swapping ran {rounds} rounds alongside only {reads} read rounds and {writes} writes"
    );
    let landed_outside: Vec<String> = file_names(&outside_dir)
        .into_iter()
        .filter(|n| !outside_dir_before.contains(n))
        .collect();
    let reads_outside = reads_outside.load(Ordering::Acquire);
    assert_eq!(
        (reads_outside, landed_outside.len()),
        (0, 0),
        "over {rounds} swap rounds, {reads} read rounds and {writes} writes: {reads_outside} reads returned a file outside the root, and these writes landed outside: {landed_outside:?}"
    );
    assert_eq!(sandbox.outside_listing(), outside_before);
    assert_eq!(
        std::fs::read_to_string(outside_dir.join("file.txt")).expect("outside/dir/file.txt"),
        SECRET
    );
    // Every swap was undone: the names resolve inside again, and the writes that were let
    // through are in the real directory.
    let rt = runtime();
    for url in urls {
        let read = rt.block_on(sandbox.center.read(url));
        assert!(
            matches!(&read, Ok(ReadResult::Text { text, .. }) if text == INSIDE),
            "{url}: {read:?}"
        );
    }
    assert!(
        file_names(&root.join("swapdir")).len() > 1,
        "no write reached the directory inside"
    );
}
