//! URL parsing and path checks (RES-1, SEC-2): any URL text read through the workspace and
//! local schemes either fails with an error or returns what lies inside their roots, never the
//! file that sits next to the roots.
#![no_main]

use std::sync::{Arc, OnceLock};

use ishiki_resources::{LocalScheme, ReadResult, ResourceCenter, WorkspaceScheme};
use libfuzzer_sys::fuzz_target;

const SECRET: &str = "SECRET-OUTSIDE-THE-ROOT";

struct Fixture {
    center: ResourceCenter,
    runtime: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("sub")).expect("root");
        std::fs::write(root.join("a.txt"), "inside\nline 2\n").expect("file");
        std::fs::write(root.join("sub/b.txt"), "deeper\n").expect("file");
        std::fs::write(dir.path().join("secret.txt"), SECRET).expect("secret");
        let local = dir.path().join("local");
        std::fs::create_dir_all(&local).expect("local");
        std::fs::write(local.join("c.txt"), "local file\n").expect("file");
        let center = ResourceCenter::new();
        center.register_file_scheme(Arc::new(WorkspaceScheme::new(&root).expect("workspace")));
        center.register_file_scheme(Arc::new(LocalScheme::new(vec![(String::new(), local)])));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        Fixture {
            center,
            runtime,
            _dir: dir,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(tail) = std::str::from_utf8(data) else {
        return;
    };
    let f = fixture();
    for scheme in ["workspace://", "local://"] {
        let url = format!("{scheme}{tail}");
        let _ = ishiki_resources::parse_url(&url);
        if let Ok(result) = f.runtime.block_on(f.center.read(&url)) {
            let leaked = match &result {
                ReadResult::Text { text, .. } => text.contains(SECRET),
                ReadResult::File { data, .. } => data.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            };
            assert!(!leaked, "{url} read the file outside the root");
        }
    }
});
