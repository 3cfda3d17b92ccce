//! Shared fixtures: a temporary sandbox with a secret outside its root, and read helpers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use ishiki_resources::{
    FileScheme, LocalScheme, ReadResult, ReadSource, ResourceCenter, ResourceError, WorkspaceScheme,
};
use url::Url;

/// The text of the file outside the root that no URL may ever read.
pub(crate) const SECRET: &str = "SECRET outside the root";

/// A temporary directory holding `root/` (the sandbox) and `outside/secret.txt`.
pub(crate) struct Sandbox {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) outside: PathBuf,
    pub(crate) workspace: Arc<WorkspaceScheme>,
    pub(crate) local: Arc<LocalScheme>,
    pub(crate) center: ResourceCenter,
}

impl Sandbox {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("home/workspace")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        std::fs::write(
            root.join("home/workspace/notes.txt"),
            "TODO: a\nplain\nTODO: b\n",
        )
        .unwrap();
        #[cfg(unix)]
        make_symlinks(&root, &outside);
        let workspace = Arc::new(WorkspaceScheme::new(&root).unwrap());
        let local = Arc::new(LocalScheme::new(vec![
            (String::new(), root.clone()),
            ("named".to_owned(), root.clone()),
        ]));
        let center = ResourceCenter::new();
        center.register_file_scheme(workspace.clone());
        center.register_file_scheme(local.clone());
        Self {
            dir,
            root,
            outside,
            workspace,
            local,
            center,
        }
    }

    /// The canonical root, for prefix checks.
    pub(crate) fn canonical_root(&self) -> PathBuf {
        std::fs::canonicalize(&self.root).unwrap()
    }

    /// Every file below `outside/` with its content, to show nothing was written there.
    pub(crate) fn outside_listing(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.outside).unwrap() {
            let entry = entry.unwrap();
            let content = std::fs::read_to_string(entry.path()).unwrap_or_default();
            out.push((entry.file_name().to_string_lossy().into_owned(), content));
        }
        out.sort();
        out
    }

    /// `text` with the temporary directory's path replaced by `[tmp]`.
    pub(crate) fn redact(&self, text: &str) -> String {
        let canonical = std::fs::canonicalize(self.dir.path()).unwrap();
        text.replace(&canonical.display().to_string(), "[tmp]")
            .replace(&self.dir.path().display().to_string(), "[tmp]")
    }
}

/// Symlinks inside the root: some pointing out, some looping, one staying inside.
#[cfg(unix)]
fn make_symlinks(root: &Path, outside: &Path) {
    use std::os::unix::fs::symlink;
    let home = root.join("home");
    symlink("../../outside", home.join("out")).unwrap();
    symlink(outside.join("secret.txt"), home.join("secret_link")).unwrap();
    symlink("../../outside/secret.txt", home.join("rel_secret")).unwrap();
    symlink("/etc", home.join("etc_link")).unwrap();
    symlink("/", home.join("root_link")).unwrap();
    symlink(outside.join("not-there.txt"), home.join("dangling_out")).unwrap();
    symlink("loop_b", root.join("loop_a")).unwrap();
    symlink("loop_a", root.join("loop_b")).unwrap();
    symlink("self_loop", root.join("self_loop")).unwrap();
    symlink("chain2", root.join("chain1")).unwrap();
    symlink("../outside", root.join("chain2")).unwrap();
    symlink("workspace", home.join("in_link")).unwrap();
    symlink("workspace/notes.txt", home.join("notes_link")).unwrap();
}

/// The text and source of a text result; panics on media.
pub(crate) fn text(result: ReadResult) -> (String, Option<ReadSource>) {
    match result {
        ReadResult::Text { text, source } => (text, source),
        ReadResult::File { media_type, .. } => panic!("expected text, got {media_type}"),
    }
}

/// A FileScheme serving one fixed byte string at every URL.
#[derive(Debug)]
pub(crate) struct Memory {
    pub(crate) scheme: &'static str,
    pub(crate) bytes: Vec<u8>,
}

#[async_trait]
impl FileScheme for Memory {
    fn scheme(&self) -> &str {
        self.scheme
    }

    async fn load(&self, _url: &Url) -> Result<Vec<u8>, ResourceError> {
        Ok(self.bytes.clone())
    }
}

/// A current-thread runtime for tests that are not `async` themselves (proptest bodies).
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
