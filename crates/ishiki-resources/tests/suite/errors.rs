//! Every error message this crate can show a model or user, in one snapshot (SEC-3): each
//! produced by a real call, so a changed wording or kind shows up in review.

use std::sync::Arc;
use std::time::SystemTime;

use ishiki_resources::{
    ArtifactStore as _, AssetStore as _, DiskArtifactStore, DiskAssetStore, ResourceCenter,
    ResourceError, WorkspaceScheme, uuid_v7_at,
};
use uuid::Uuid;

use super::common::{Memory, Sandbox};

/// Collects `label: Kind: message` lines; the temporary directory is redacted.
struct Messages<'a> {
    sandbox: &'a Sandbox,
    lines: Vec<String>,
}

impl Messages<'_> {
    fn add<T: std::fmt::Debug>(&mut self, label: &str, result: Result<T, ResourceError>) {
        let err = result.expect_err(label);
        let line = format!("{label}\n  {:?}: {}", err.kind(), err.message());
        self.lines.push(self.sandbox.redact(&line));
    }
}

#[tokio::test]
async fn sec3_every_error_message() {
    let sandbox = Sandbox::new();
    let c = &sandbox.center;
    let ws = &sandbox.workspace;
    let artifacts_dir = sandbox.dir.path().join("artifacts");
    let artifacts = Arc::new(DiskArtifactStore::open(&artifacts_dir).unwrap());
    c.register_file_scheme(artifacts.clone());
    let assets = Arc::new(DiskAssetStore::open(sandbox.dir.path().join("assets")).unwrap());
    c.register_file_scheme(assets.clone());
    c.register_file_scheme(Arc::new(Memory {
        scheme: "mem",
        bytes: "é".as_bytes().to_vec(),
    }));
    let png_url = artifacts
        .put("codemode", b"\x89PNG\r\n\x1a\n", "png")
        .await
        .unwrap();
    let notes = "workspace:///home/workspace/notes.txt";
    let mut m = Messages {
        sandbox: &sandbox,
        lines: Vec::new(),
    };

    // The center.
    m.add("not a URL", c.read("notes.txt").await);
    m.add("unknown scheme", c.read("ftp://host/file").await);

    // FileScheme parameters (RES-3).
    m.add(
        "unknown parameter",
        c.read(&format!("{notes}?question=hi")).await,
    );
    m.add(
        "repeated parameter",
        c.read(&format!("{notes}?lines=1-2&lines=3-4")).await,
    );
    m.add(
        "offset not a number",
        c.read(&format!("{notes}?offset=ten")).await,
    );
    m.add(
        "offset past the end",
        c.read(&format!("{notes}?offset=99")).await,
    );
    m.add(
        "offset inside a character",
        c.read("mem:///x?offset=1").await,
    );
    m.add("lines malformed", c.read(&format!("{notes}?lines=5")).await);
    m.add("view unknown", c.read(&format!("{notes}?view=raw")).await);
    m.add(
        "parameters on media",
        c.read(&format!("{png_url}?offset=2")).await,
    );

    // Path safety (RES-4, SEC-2).
    m.add(
        "dot segment",
        c.read("workspace:///home/../etc/passwd").await,
    );
    m.add(
        "encoded dot segment",
        c.read("local:///%2e%2e/etc/passwd").await,
    );
    m.add(
        "control character in the text",
        c.read("workspace:///home/.\t./x").await,
    );
    m.add("empty segment", c.read("workspace:////etc/passwd").await);
    m.add(
        "encoded slash",
        c.read("workspace:///home%2f..%2fetc").await,
    );
    m.add("backslash", c.read("workspace:///home/a%5cb").await);
    m.add("NUL", c.read("workspace:///home/a%00.txt").await);
    m.add("double encoding", c.read("workspace:///%252e%252e/x").await);
    m.add("look-alike", c.read("workspace:///\u{2025}/x").await);
    m.add("drive letter", c.read("local:///C:/Windows").await);
    m.add("not UTF-8", c.read("workspace:///%c0%ae%c0%ae/x").await);
    #[cfg(unix)]
    {
        m.add(
            "symlink out",
            c.read("workspace:///home/out/secret.txt").await,
        );
        m.add("symlink loop", c.read("local:///loop_a").await);
        m.add(
            "dangling symlink",
            c.read("workspace:///home/dangling_out").await,
        );
        m.add(
            "write through a dangling symlink",
            ws.write("/home/dangling_out", b"x"),
        );
        let fifo = sandbox.root.join("home/fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success());
        if made {
            m.add("not a regular file", c.read("workspace:///home/fifo").await);
        } else {
            m.lines.push(
                "not a regular file\n  NotAllowed: `workspace:///home/fifo` is not a regular file"
                    .to_owned(),
            );
        }
    }
    m.add("directory", c.read("workspace:///home/workspace").await);
    m.add(
        "trailing slash",
        c.read("workspace:///home/workspace/").await,
    );
    m.add("missing file", c.read("workspace:///home/none.txt").await);
    let small = Arc::new(
        WorkspaceScheme::new(&sandbox.root)
            .unwrap()
            .with_max_read_bytes(4),
    );
    let limited = ResourceCenter::new();
    limited.register_file_scheme(small);
    m.add("too large", limited.read(notes).await);
    m.add(
        "workspace URL with a host",
        c.read("workspace://host/etc/passwd").await,
    );
    m.add("local root unknown", c.read("local://nowhere/x").await);
    m.add(
        "local URL with a port",
        c.read("local://named:8080/x").await,
    );
    let gone =
        ishiki_resources::LocalScheme::new(vec![("gone".into(), sandbox.dir.path().join("gone"))]);
    let center = ResourceCenter::new();
    center.register_file_scheme(Arc::new(gone));
    m.add("local root missing", center.read("local://gone/x").await);

    // Writes.
    m.add("write a relative path", ws.write("home/x.txt", b"x"));
    m.add("write another scheme", ws.write("local:///x.txt", b"x"));
    m.add(
        "write with a query",
        ws.write(&format!("{notes}?lines=1-2"), b"x"),
    );
    m.add("write a directory", ws.write("/home/workspace/", b"x"));
    m.add(
        "write below a file",
        ws.write("/home/workspace/notes.txt/x", b"x"),
    );
    let file_root = sandbox.dir.path().join("file");
    std::fs::write(&file_root, b"").unwrap();
    m.add(
        "workspace root unusable",
        WorkspaceScheme::new(file_root.join("sub")),
    );

    // Artifacts (RES-5).
    m.add(
        "artifact of another scheme",
        artifacts.get("asset://x").await,
    );
    m.add(
        "artifact without a name",
        artifacts.get("artifact://codemode").await,
    );
    m.add(
        "missing artifact",
        c.read("artifact://codemode/0000000000000000.txt").await,
    );
    let forged = sandbox.dir.path().join("artifacts/t");
    std::fs::create_dir_all(&forged).unwrap();
    std::fs::write(
        forged.join(ishiki_resources::store::artifact_name(b"b", "txt")),
        b"not b",
    )
    .unwrap();
    m.add(
        "artifact hash collision",
        artifacts.put("t", b"b", "txt").await,
    );
    m.add(
        "artifact store unusable",
        DiskArtifactStore::open(file_root.join("sub")),
    );

    // Assets (RES-6, RES-9).
    let v4 = Uuid::from_u128(0x0190_f9f3_3ff8_4000_8000_0000_0000_0001);
    m.add("asset id not a UUID", c.read("asset://photo-1").await);
    m.add("asset id v4", c.read(&format!("asset://{v4}")).await);
    m.add(
        "asset id nil",
        c.read(&format!("asset://{}", Uuid::nil())).await,
    );
    m.add(
        "asset URL with a path",
        c.read("asset://0190f9f3-3ff8-7000-8000-000000000001/x")
            .await,
    );
    m.add("bare asset id v4", assets.meta(&v4.to_string()).await);
    m.add(
        "missing asset",
        c.read("asset://0190f9f3-3ff8-7000-8000-000000000001").await,
    );
    m.add(
        "put_with_id v4",
        assets.put_with_id(v4, b"x", SystemTime::now()).await,
    );
    let id = uuid_v7_at(1_700_000_000_000, 9);
    assets
        .put_with_id(id, b"one", SystemTime::now())
        .await
        .unwrap();
    m.add(
        "asset rewritten",
        assets.put_with_id(id, b"two", SystemTime::now()).await,
    );
    let broken = uuid_v7_at(1_700_000_000_000, 10);
    std::fs::write(
        sandbox.dir.path().join(format!("assets/{broken}.json")),
        b"{",
    )
    .unwrap();
    m.add(
        "asset metadata unreadable",
        assets.meta(&broken.to_string()).await,
    );
    m.add(
        "asset store unusable",
        DiskAssetStore::open(file_root.join("sub")),
    );

    insta::assert_snapshot!("every_error_message", m.lines.join("\n"));
}

#[test]
fn sec3_messages_never_show_host_paths_for_urls() {
    let sandbox = Sandbox::new();
    let rt = super::common::runtime();
    for url in [
        "workspace:///home/none.txt",
        "workspace:///home/workspace",
        "local:///home/out/secret.txt",
        "local:///loop_a",
    ] {
        let err = rt.block_on(sandbox.center.read(url)).unwrap_err();
        let root = sandbox.dir.path().display().to_string();
        assert!(!err.message().contains(&root), "{err}");
    }
}
