//! Shared helpers: stores, naive reference measures, and the page checker every paging test
//! uses to state OUT-4 and OUT-7 once.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ishiki_outlet::{Budget, Emitted};
use ishiki_resources::{ArtifactStore, DiskArtifactStore, ResourceError, ResourceErrorKind};

/// A disk artifact store in its own temporary directory.
pub(crate) struct TempStore {
    pub(crate) store: Arc<DiskArtifactStore>,
    _dir: tempfile::TempDir,
}

impl TempStore {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(DiskArtifactStore::open(dir.path()).unwrap());
        Self { store, _dir: dir }
    }

    /// How many artifacts exist (files under the root, temporary files excluded).
    pub(crate) fn count(&self) -> usize {
        count_files(self.store.root())
    }
}

fn count_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let path = e.path();
            if path.is_dir() {
                count_files(&path)
            } else if e.file_name().to_string_lossy().starts_with(".tmp") {
                0
            } else {
                1
            }
        })
        .sum()
}

/// Drives a future to its end on a runtime of its own, for the synchronous proptest bodies.
pub(crate) trait Wait: std::future::Future + Sized {
    fn wait(self) -> Self::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a test runtime")
            .block_on(self)
    }
}

impl<F: std::future::Future> Wait for F {}

/// A store that fails every write, counting attempts.
#[derive(Debug, Default)]
pub(crate) struct FailingStore {
    pub(crate) puts: AtomicUsize,
}

#[async_trait::async_trait]
impl ArtifactStore for FailingStore {
    async fn put(&self, _: &str, _: &[u8], _: &str) -> Result<String, ResourceError> {
        self.puts.fetch_add(1, Ordering::SeqCst);
        Err(ResourceError::new(ResourceErrorKind::Io, "disk full"))
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, ResourceError> {
        Err(ResourceError::new(
            ResourceErrorKind::NotFound,
            format!("no artifact at `{url}`"),
        ))
    }
}

/// Lines of a page as a reader counts them: the `\n`s, plus a last line without one.
pub(crate) fn naive_lines(text: &str) -> usize {
    text.lines().count()
}

pub(crate) fn naive_units(text: &str) -> usize {
    text.encode_utf16().count()
}

/// Checks one page against OUT-4 and the page format, and returns its body.
///
/// A page with a continuation is `body + "\n" + line`, the line starting `[Continue` and naming
/// the continuation URL; the body is not empty (every continuation advances) and ends on a line
/// end unless it has none at all (pages prefer line ends).
pub(crate) fn check_page(page: &Emitted, budget: Budget) -> String {
    assert!(
        naive_units(&page.text) <= budget.max_units,
        "page of {} units over {budget:?}: {:?}",
        naive_units(&page.text),
        page.text
    );
    assert!(
        naive_lines(&page.text) <= budget.max_lines,
        "page of {} lines over {budget:?}: {:?}",
        naive_lines(&page.text),
        page.text
    );
    match &page.continuation {
        None => page.text.clone(),
        Some(next) => {
            let (body, line) = page.text.rsplit_once('\n').unwrap();
            assert!(line.starts_with("[Continue"), "no Continue line: {line:?}");
            assert!(
                line.contains(&next.url),
                "{line:?} does not name {}",
                next.url
            );
            assert_eq!(body, page.body());
            assert!(!body.is_empty(), "a continuation must advance");
            assert!(
                body.ends_with('\n') || !body.contains('\n'),
                "a page cut mid-line although a line end fits: {body:?}"
            );
            body.to_owned()
        }
    }
}

/// The `offset` parameter of a continuation URL, and the URL without it.
pub(crate) fn split_offset(url: &str) -> (String, u64) {
    let (base, offset) = url.rsplit_once("?offset=").unwrap();
    (base.to_owned(), offset.parse().unwrap())
}
