//! Path escapes (RES-4, SEC-2): a table-driven corpus refused by `workspace://` and `local://`,
//! and a proptest over random segment sequences that never resolves outside the root.

use ishiki_resources::{ReadResult, ResourceErrorKind};
use proptest::prelude::*;
use url::Url;

use super::common::{SECRET, Sandbox, runtime, text};

/// Paths after `<scheme>:///` (or `local://named/`) that must be refused as escapes.
const CORPUS: &[&str] = &[
    // Dot segments, plain and percent-encoded (URL parsing would silently remove them).
    "../outside/secret.txt",
    "home/../../outside/secret.txt",
    "home/workspace/../../../outside/secret.txt",
    "home/workspace/notes.txt/../../../../outside/secret.txt",
    "..",
    ".",
    "home/./workspace/notes.txt",
    "%2e%2e/outside/secret.txt",
    "%2E%2E/outside/secret.txt",
    ".%2e/outside/secret.txt",
    "%2e./outside/secret.txt",
    "%2e/home",
    "home/%2e%2e/%2e%2e/outside/secret.txt",
    "../outside/secret.txt?lines=1-2",
    // Double- and triple-encoded dots, slashes and backslashes.
    "%252e%252e/outside/secret.txt",
    "%252E%252E/outside/secret.txt",
    "home/%25252e%25252e/x",
    "%252f",
    "home%252f..%252f..%252foutside",
    "%u002e%u002e/outside/secret.txt",
    "%c0%ae%c0%ae/outside/secret.txt",
    // Encoded separators.
    "..%2foutside%2fsecret.txt",
    "%2e%2e%2foutside%2fsecret.txt",
    "home%2f..%2f..%2foutside",
    "home/%2e%2e%2f%2e%2e%2foutside",
    "%2fetc%2fpasswd",
    "%2Fetc/passwd",
    "%2e%2e%5coutside%5csecret.txt",
    "..%5coutside%5csecret.txt",
    // Backslashes.
    "..\\outside\\secret.txt",
    "home\\..\\..\\outside",
    "\\outside\\secret.txt",
    "home/a\\b",
    // NUL and control characters, raw and encoded.
    "home/notes.txt%00.png",
    "home/%00",
    "%00/../outside",
    ".%00./outside",
    "home/workspace/notes.txt%0a",
    "home/.\t./outside",
    "home/.\n./outside",
    "home/x%7f",
    // Absolute paths and drive letters.
    "/etc/passwd",
    "//etc/passwd",
    "home//etc/passwd",
    "C:/Windows/win.ini",
    "c:%5cwindows",
    // Unicode look-alikes of dots, slashes, backslashes and percent signs.
    "\u{2024}\u{2024}/outside/secret.txt",
    "\u{2025}/outside/secret.txt",
    "\u{2026}/outside",
    "\u{FF0E}\u{FF0E}/outside/secret.txt",
    "\u{FE52}\u{FE52}/outside",
    "home\u{2215}..\u{2215}..\u{2215}outside",
    "home\u{FF0F}secret",
    "home\u{2044}x",
    "home\u{29F8}x",
    "home\u{FF3C}x",
    "\u{FF05}2e\u{FF05}2e/outside",
    "%E2%80%A5/outside",
    "%EF%BC%8E%EF%BC%8E/outside",
    // Symlinks that leave the root, and loops.
    #[cfg(unix)]
    "home/out/secret.txt",
    #[cfg(unix)]
    "home/out",
    #[cfg(unix)]
    "home/secret_link",
    #[cfg(unix)]
    "home/rel_secret",
    #[cfg(unix)]
    "home/etc_link/passwd",
    #[cfg(unix)]
    "home/root_link/etc/passwd",
    #[cfg(unix)]
    "chain1/secret.txt",
    #[cfg(unix)]
    "loop_a",
    #[cfg(unix)]
    "loop_b/x",
    #[cfg(unix)]
    "self_loop/x",
];

fn url_forms(path: &str) -> [String; 3] {
    [
        format!("workspace:///{path}"),
        format!("local:///{path}"),
        format!("local://named/{path}"),
    ]
}

#[tokio::test]
async fn res4_escape_corpus_is_refused_by_workspace_and_local() {
    assert!(CORPUS.len() >= 50, "{} cases", CORPUS.len());
    let sandbox = Sandbox::new();
    let before = sandbox.outside_listing();
    for path in CORPUS {
        for url in url_forms(path) {
            let err = sandbox.center.read(&url).await.unwrap_err();
            assert_eq!(err.kind(), ResourceErrorKind::Escape, "{url:?}: {err}");
            let shown: String = url
                .chars()
                .flat_map(|c| {
                    if c.is_control() {
                        c.escape_default().collect::<Vec<_>>()
                    } else {
                        vec![c]
                    }
                })
                .collect();
            // The center names the URL as typed when the text check refuses it, and as parsed
            // (non-ASCII percent-encoded) when a path check does.
            let parsed = Url::parse(&url).map(String::from).unwrap_or_default();
            assert!(
                err.message()
                    .starts_with(&format!("`{shown}` is refused: "))
                    || err
                        .message()
                        .starts_with(&format!("`{parsed}` is refused: ")),
                "{url:?}: {err}"
            );
            let resolved = if url.starts_with("workspace") {
                sandbox.workspace.resolve(&url)
            } else {
                sandbox.local.resolve(&url)
            };
            assert_eq!(
                resolved.map_err(|e| e.kind()),
                Err(ResourceErrorKind::Escape),
                "{url:?}"
            );
            // An already parsed URL skips the text check; whatever parsing made of it must
            // still not read the secret.
            if let Ok(parsed) = Url::parse(&url)
                && let Ok(result) = sandbox.center.read_url(&parsed).await
            {
                assert_ne!(text(result).0, SECRET, "{url:?}");
            }
            if url.starts_with("workspace") {
                let err = sandbox.workspace.write(&url, b"pwned").unwrap_err();
                assert_eq!(
                    err.kind(),
                    ResourceErrorKind::Escape,
                    "write {url:?}: {err}"
                );
            }
        }
        if !path.contains('?') && !path.starts_with('/') {
            let err = sandbox
                .workspace
                .write(&format!("/{path}"), b"pwned")
                .unwrap_err();
            assert!(
                matches!(err.kind(), ResourceErrorKind::Escape),
                "write path /{path:?}: {err}"
            );
        }
    }
    assert_eq!(sandbox.outside_listing(), before, "nothing written outside");
}

#[cfg(unix)]
#[test]
fn res4_writes_never_follow_symlinks_out() {
    let sandbox = Sandbox::new();
    let before = sandbox.outside_listing();
    for target in [
        "/home/out/new.txt",
        "/home/secret_link",
        "/home/rel_secret",
        "/home/dangling_out",
        "/chain1/new.txt",
        "/loop_a",
        "/loop_b/new.txt",
        "/home/root_link/tmp/new.txt",
    ] {
        let err = sandbox.workspace.write(target, b"pwned").unwrap_err();
        assert_eq!(err.kind(), ResourceErrorKind::Escape, "{target}: {err}");
    }
    assert_eq!(sandbox.outside_listing(), before);
    assert_eq!(
        std::fs::read_to_string(sandbox.outside.join("secret.txt")).unwrap(),
        SECRET
    );
}

#[cfg(unix)]
#[tokio::test]
async fn res4_symlinks_inside_the_root_are_followed() {
    let sandbox = Sandbox::new();
    for url in [
        "workspace:///home/in_link/notes.txt",
        "workspace:///home/notes_link",
        "local:///home/in_link/notes.txt",
    ] {
        assert_eq!(
            text(sandbox.center.read(url).await.unwrap()).0,
            "TODO: a\nplain\nTODO: b\n",
            "{url}"
        );
    }
    // Writing through an inside symlink writes its target and keeps the link.
    let url = sandbox
        .workspace
        .write("/home/notes_link", b"rewritten")
        .unwrap();
    assert_eq!(url, "workspace:///home/notes_link");
    assert_eq!(
        std::fs::read_to_string(sandbox.root.join("home/workspace/notes.txt")).unwrap(),
        "rewritten"
    );
    assert!(
        std::fs::symlink_metadata(sandbox.root.join("home/notes_link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    sandbox
        .workspace
        .write("workspace:///home/in_link/deep/new.txt", b"x")
        .unwrap();
    assert!(sandbox.root.join("home/workspace/deep/new.txt").is_file());
}

#[tokio::test]
async fn res4_workspace_writes_and_reads_back() {
    let sandbox = Sandbox::new();
    let url = sandbox
        .workspace
        .write("/home/workspace/a b/任务.txt", "TODO: 写".as_bytes())
        .unwrap();
    assert_eq!(
        url,
        "workspace:///home/workspace/a%20b/%E4%BB%BB%E5%8A%A1.txt"
    );
    assert_eq!(text(sandbox.center.read(&url).await.unwrap()).0, "TODO: 写");
    assert_eq!(
        sandbox.workspace.write(&url, b"again").unwrap(),
        url,
        "a URL and the path it names write the same file"
    );
    assert_eq!(
        std::fs::read(sandbox.root.join("home/workspace/a b/任务.txt")).unwrap(),
        b"again"
    );
    let leftovers: Vec<_> = std::fs::read_dir(sandbox.root.join("home/workspace/a b"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "no temporary files left: {leftovers:?}");
    // Reading is refused above the size limit, writes to a directory are refused.
    let small = ishiki_resources::WorkspaceScheme::new(&sandbox.root)
        .unwrap()
        .with_max_read_bytes(3);
    let center = ishiki_resources::ResourceCenter::new();
    center.register_file_scheme(std::sync::Arc::new(small));
    assert_eq!(
        center.read(&url).await.unwrap_err().kind(),
        ResourceErrorKind::TooLarge
    );
    assert_eq!(
        sandbox
            .workspace
            .write("/home/workspace", b"x")
            .unwrap_err()
            .kind(),
        ResourceErrorKind::NotAllowed
    );
    assert_eq!(
        sandbox
            .center
            .read("workspace:///home/workspace/missing.txt")
            .await
            .unwrap_err()
            .kind(),
        ResourceErrorKind::NotFound
    );
}

/// Segments the proptest draws from: harmless names, every escape trick, and the symlinks of
/// the sandbox fixture.
const PIECES: &[&str] = &[
    "home",
    "workspace",
    "notes.txt",
    "outside",
    "secret.txt",
    "new",
    "..",
    ".",
    "",
    "%2e%2e",
    "%2E.",
    ".%2e",
    "%2e",
    "%252e%252e",
    "%2f",
    "a%2fb",
    "%5c",
    "\\",
    "..\\..",
    "%00",
    "%c0%ae",
    "\u{2025}",
    "\u{FF0E}",
    "out",
    "secret_link",
    "rel_secret",
    "dangling_out",
    "etc_link",
    "root_link",
    "loop_a",
    "self_loop",
    "chain1",
    "chain2",
    "in_link",
    "notes_link",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn sec2_random_segments_never_resolve_outside_the_root(
        picks in proptest::collection::vec(0..PIECES.len(), 0..8),
        scheme in 0usize..3,
    ) {
        let sandbox = Sandbox::new();
        let root = sandbox.canonical_root();
        let path: Vec<&str> = picks.iter().map(|&i| PIECES[i]).collect();
        let path = path.join("/");
        let url = url_forms(&path)[scheme].clone();
        let resolved = if scheme == 0 {
            sandbox.workspace.resolve(&url)
        } else {
            sandbox.local.resolve(&url)
        };
        if let Ok(found) = resolved {
            let canonical = std::fs::canonicalize(&found).unwrap();
            prop_assert!(canonical.starts_with(&root), "{url:?} resolved to {found:?}");
        }
        let rt = runtime();
        let reads = [
            rt.block_on(sandbox.center.read(&url)),
            match Url::parse(&url) {
                Ok(parsed) => rt.block_on(sandbox.center.read_url(&parsed)),
                Err(_) => Ok(ReadResult::Text { text: String::new(), source: None }),
            },
        ];
        for read in reads {
            if let Ok(ReadResult::Text { text, .. }) = read {
                prop_assert_ne!(text, SECRET, "{:?} read the secret", url);
            }
        }
        let before = sandbox.outside_listing();
        if scheme == 0 {
            let _ = sandbox.workspace.write(&url, b"pwned");
        }
        let _ = sandbox.workspace.write(&format!("/{path}"), b"pwned");
        prop_assert_eq!(sandbox.outside_listing(), before);
    }
}

#[cfg(unix)]
#[tokio::test]
async fn res4_relative_symlinks_may_climb_inside_but_absolute_ones_are_refused() {
    use std::os::unix::fs::symlink;
    let sandbox = Sandbox::new();
    let root = sandbox.canonical_root();
    // Up and back down, never above the root: followed.
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    symlink("../../home/workspace/notes.txt", root.join("a/b/up")).unwrap();
    assert_eq!(
        text(sandbox.center.read("workspace:///a/b/up").await.unwrap()).0,
        "TODO: a\nplain\nTODO: b\n"
    );
    // Absolute, even to a file inside the root: refused, like `openat2(RESOLVE_BENEATH)`.
    symlink(root.join("home/workspace/notes.txt"), root.join("a/abs")).unwrap();
    for url in ["workspace:///a/abs", "local:///a/abs"] {
        let err = sandbox.center.read(url).await.unwrap_err();
        assert_eq!(
            (err.kind(), err.message()),
            (
                ResourceErrorKind::Escape,
                format!("`{url}` is refused: the symlink `/a/abs` is absolute (only relative symlinks that stay inside the root are followed)").as_str()
            )
        );
    }
    let err = sandbox.workspace.write("/a/abs", b"x").unwrap_err();
    assert_eq!(err.kind(), ResourceErrorKind::Escape, "{err}");
    assert_eq!(
        std::fs::read_to_string(root.join("home/workspace/notes.txt")).unwrap(),
        "TODO: a\nplain\nTODO: b\n"
    );
}
