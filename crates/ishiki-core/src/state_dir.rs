//! The state directory (history, artifacts, assets) as the runtime opens it (SEC-2, SEC-4):
//!
//! - never reachable by the model: a state directory (or any other store location the embedder
//!   declares: an object store's directory, a database's socket directory) inside the workspace
//!   root or a `local://` root is refused at start, and so is a root inside a store;
//! - one runtime at a time: an exclusive lock on `ishiki.lock` for the runtime's lifetime,
//!   refusing a second opener with the holder's pid (a second runtime would answer the first
//!   one's live calls as interrupted);
//! - never silently restarted: a directory that held a conversation (the marker file written
//!   at first open, artifacts or assets) whose history store is missing, empty or without its
//!   tables is an error, not a new session.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{RuntimeError, RuntimeErrorKind};
use crate::store::{Durability, HistoryStore};
#[cfg(feature = "sqlite")]
use crate::store::{SqliteStore, StoreError, StoreErrorKind};

/// The lock file; it holds the pid of the runtime that has the lock.
pub(crate) const LOCK_FILE: &str = "ishiki.lock";
/// Written after the history store is first created: from then on the directory holds a
/// conversation, and a missing or empty history store is a loss, not a fresh start.
pub(crate) const MARKER_FILE: &str = "ishiki.conversation";
/// The SQLite history store.
#[cfg(feature = "sqlite")]
pub(crate) const HISTORY_FILE: &str = "history.sqlite";
/// The state's own stores (directory, what it is): no root the model can reach may lie inside.
const STORES: [(&str, &str); 2] = [("artifacts", "artifact store"), ("assets", "asset store")];

/// `path` made absolute with symlinks resolved as far as it exists; the rest (not created yet)
/// is appended with `.` and `..` applied lexically.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = std::fs::canonicalize(existing) {
            let mut out = canonical;
            for component in rest.iter().rev() {
                match component {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::CurDir => {}
                    other => out.push(other.as_os_str()),
                }
            }
            return out;
        }
        let (Some(parent), Some(last)) = (existing.parent(), existing.components().next_back())
        else {
            return absolute;
        };
        rest.push(last);
        existing = parent;
    }
}

/// A place a store keeps its data, checked by [`check_stores`]: the state directory (whose
/// default workspace may lie inside it, but no root inside its artifact or asset store), or a
/// store outside it (an object store's directory, a database's socket directory, a token
/// store), which no root may share in either direction.
#[derive(Debug, Clone)]
pub(crate) enum StoreLocation {
    /// The state directory.
    State(PathBuf),
    /// `(what the store is, its directory)`.
    Other(String, PathBuf),
}

fn inside_root(
    what: &str,
    path: &Path,
    root_what: &str,
    root: &Path,
    what_for: &str,
) -> RuntimeError {
    RuntimeError::new(
        RuntimeErrorKind::Config,
        format!(
            "{what} {} is inside {root_what} {}, where the model could read and change {what_for}; keep {what} outside every workspace and local root",
            path.display(),
            root.display()
        ),
    )
}

fn root_inside(
    root_what: &str,
    root: &Path,
    what: &str,
    path: &Path,
    what_for: &str,
) -> RuntimeError {
    RuntimeError::new(
        RuntimeErrorKind::Config,
        format!(
            "{root_what} {} is inside {}, {what}, where the model could change {what_for}; choose a root outside it",
            root.display(),
            path.display()
        ),
    )
}

/// The one check of every store location against every root the model can reach (SEC-2): a
/// store inside a root (or equal to it) is refused, and so is a root inside a store. `roots`
/// are `(what the root is, its directory)`. Paths are compared resolved, symlinks followed as
/// far as they exist.
pub(crate) fn check_stores(
    stores: &[StoreLocation],
    roots: &[(String, PathBuf)],
) -> Result<(), RuntimeError> {
    for (root_what, root) in roots {
        let root = resolved(root);
        for store in stores {
            match store {
                StoreLocation::State(state) => {
                    let state = resolved(state);
                    if state.starts_with(&root) {
                        return Err(inside_root(
                            "the state directory",
                            &state,
                            root_what,
                            &root,
                            "its history",
                        ));
                    }
                    for (sub, name) in STORES {
                        let sub = state.join(sub);
                        if root.starts_with(&sub) {
                            return Err(root_inside(
                                root_what,
                                &root,
                                &format!("the state directory's {name}"),
                                &sub,
                                "stored media",
                            ));
                        }
                    }
                }
                StoreLocation::Other(what, dir) => {
                    let dir = resolved(dir);
                    if dir.starts_with(&root) {
                        return Err(inside_root(what, &dir, root_what, &root, "what it holds"));
                    }
                    if root.starts_with(&dir) {
                        return Err(root_inside(root_what, &root, what, &dir, "what it holds"));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Which directory the state directory was when the runtime opened it (device and inode), so
/// a rename or deletion while it runs is noticed before anything more is written: history
/// would go on in the moved directory while new artifacts landed under the old path.
#[derive(Debug)]
pub(crate) struct StateIdentity {
    dir: PathBuf,
    #[cfg(unix)]
    id: (u64, u64),
}

impl StateIdentity {
    /// The identity of `dir` now.
    pub(crate) fn of(dir: &Path) -> Result<Self, RuntimeError> {
        let metadata = std::fs::metadata(dir).map_err(|e| {
            RuntimeError::new(
                RuntimeErrorKind::Io,
                format!("cannot read the state directory {}: {e}", dir.display()),
            )
        })?;
        #[cfg(not(unix))]
        let _ = metadata;
        Ok(Self {
            dir: dir.to_path_buf(),
            #[cfg(unix)]
            id: {
                use std::os::unix::fs::MetadataExt as _;
                (metadata.dev(), metadata.ino())
            },
        })
    }

    /// Fails when the state directory is no longer the directory opened at start (moved,
    /// deleted or replaced), naming it; nothing may be committed then.
    pub(crate) fn check(&self) -> Result<(), RuntimeError> {
        let gone = |how: &str| {
            RuntimeError::new(
                RuntimeErrorKind::Io,
                format!(
                    "the state directory {} was {how} while the runtime ran; stopping so that no history or artifact is written to the wrong place (move it back, or start again from where it is now)",
                    self.dir.display()
                ),
            )
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            match std::fs::metadata(&self.dir) {
                Ok(m) if (m.dev(), m.ino()) == self.id => Ok(()),
                Ok(_) => Err(gone("replaced by another directory")),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(gone("moved or deleted")),
                Err(e) => Err(RuntimeError::new(
                    RuntimeErrorKind::Io,
                    format!(
                        "cannot read the state directory {}: {e}",
                        self.dir.display()
                    ),
                )),
            }
        }
        #[cfg(not(unix))]
        {
            if self.dir.is_dir() {
                Ok(())
            } else {
                Err(gone("moved or deleted"))
            }
        }
    }
}

/// The exclusive lock on a state directory; dropping it (closing the file) releases it.
#[derive(Debug)]
pub(crate) struct StateLock {
    file: Option<File>,
    /// This lock's entry in [`HELD`].
    key: PathBuf,
}

impl Drop for StateLock {
    fn drop(&mut self) {
        // The file first: once the entry is gone, an opener of this process may take it.
        drop(self.file.take());
        held().remove(&self.key);
    }
}

/// The state directories that runtimes of this process hold. The file lock alone cannot say
/// so: a child process being started by any thread of this one holds a copy of every open
/// file (so of the lock) from its fork until its exec, and a directory a runtime of this
/// process just released can look held by "this process" for that moment.
static HELD: std::sync::Mutex<BTreeSet<PathBuf>> = std::sync::Mutex::new(BTreeSet::new());

fn held() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    // The set is only inserted into and removed from: a panic elsewhere cannot leave it
    // half-changed.
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long an opener waits for a child process of this one to let go of a lock that no
/// runtime of this process holds (starting a process takes milliseconds; this is generous).
const INHERITED_LOCK_WAIT: Duration = Duration::from_secs(2);

/// Takes the state directory's lock, or names the runtime that holds it.
pub(crate) fn lock(dir: &Path) -> Result<StateLock, RuntimeError> {
    let busy = |holder: &str| {
        RuntimeError::new(
            RuntimeErrorKind::Busy,
            format!(
                "the state directory {} is in use by another runtime ({holder}); a state directory serves one runtime at a time",
                dir.display()
            ),
        )
    };
    let key = resolved(dir);
    if !held().insert(key.clone()) {
        return Err(busy(&format!("pid {}, this process", std::process::id())));
    }
    // From here the entry is this opener's: dropping the lock, or failing, removes it.
    let mut lock = StateLock { file: None, key };
    let path = dir.join(LOCK_FILE);
    let cannot = |e: &dyn std::fmt::Display| {
        RuntimeError::new(
            RuntimeErrorKind::Io,
            format!("cannot lock the state directory {}: {e}", dir.display()),
        )
    };
    // Not truncated on open: until the lock is ours, the file holds the holder's pid.
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| cannot(&e))?;
    let waiting_since = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                // Read from the start each time: a read moves the file's position.
                let mut text = String::new();
                let holder = match file
                    .rewind()
                    .and_then(|()| (&file).take(32).read_to_string(&mut text))
                {
                    Ok(_) => text.trim().parse::<u32>().ok(),
                    Err(_) => None,
                };
                match holder {
                    // No runtime of this process holds it (that was checked above): a child
                    // process being started holds a copy until its exec closes it.
                    Some(pid) if pid == std::process::id() => {
                        if waiting_since.elapsed() >= INHERITED_LOCK_WAIT {
                            return Err(busy(&format!(
                                "pid {pid}, this process: a child process of this one has kept a copy of the lock for {} s",
                                INHERITED_LOCK_WAIT.as_secs()
                            )));
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Some(pid) => return Err(busy(&format!("pid {pid}"))),
                    None => return Err(busy("pid unknown")),
                }
            }
            Err(TryLockError::Error(e)) => return Err(cannot(&e)),
        }
    }
    file.set_len(0).map_err(|e| cannot(&e))?;
    file.rewind().map_err(|e| cannot(&e))?;
    file.write_all(format!("{}\n", std::process::id()).as_bytes())
        .map_err(|e| cannot(&e))?;
    lock.file = Some(file);
    Ok(lock)
}

/// What shows that `dir` held a conversation, if anything does.
pub(crate) fn conversation_evidence(dir: &Path) -> Result<Option<String>, RuntimeError> {
    if dir.join(MARKER_FILE).exists() {
        return Ok(Some(format!("its marker file {MARKER_FILE} is there")));
    }
    for (store, _) in STORES {
        match std::fs::read_dir(dir.join(store)) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Ok(Some(format!("its {store} are still there")));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(RuntimeError::new(
                    RuntimeErrorKind::Io,
                    format!("cannot read the state directory's {store}: {e}"),
                ));
            }
        }
    }
    Ok(None)
}

/// Without the `sqlite` feature there is no embedded store: the builder must be given one.
#[cfg(not(feature = "sqlite"))]
pub(crate) fn open_history(
    _dir: &Path,
    _durability: Durability,
    _evidence: Option<String>,
) -> Result<Box<dyn HistoryStore>, RuntimeError> {
    Err(RuntimeError::new(
        RuntimeErrorKind::Config,
        "no history store: ishiki-core was built without its `sqlite` feature, so pass one with \
         RuntimeBuilder::store",
    ))
}

/// Opens the SQLite history store of `dir`: created when the directory never held a
/// conversation, otherwise required to hold one. Writes the marker file once it exists.
#[cfg(feature = "sqlite")]
pub(crate) fn open_history(
    dir: &Path,
    durability: Durability,
    evidence: Option<String>,
) -> Result<Box<dyn HistoryStore>, RuntimeError> {
    let path = dir.join(HISTORY_FILE);
    let cannot = |e: &StoreError| RuntimeError::store("cannot open the history store", e);
    let store = match evidence {
        None => SqliteStore::open(&path, durability).map_err(|e| cannot(&e))?,
        Some(evidence) => SqliteStore::open_existing(&path, durability).map_err(|e| {
            if e.kind() == StoreErrorKind::Missing {
                RuntimeError::new(RuntimeErrorKind::Damaged, format!(
                    "the state directory {} held a conversation ({evidence}), but {e}: refusing to start a new conversation over it; restore the history store, or choose another state directory",
                    dir.display()
                ))
            } else {
                cannot(&e)
            }
        })?,
    };
    let marker = dir.join(MARKER_FILE);
    if !marker.exists() {
        let written = File::create(&marker).and_then(|mut f| {
            f.write_all(
                b"this directory holds an ishiki conversation: history.sqlite, artifacts, assets\n",
            )?;
            f.sync_all()
        });
        written.map_err(|e| {
            RuntimeError::new(
                RuntimeErrorKind::Io,
                format!(
                    "cannot write {} in the state directory: {e}",
                    marker.display()
                ),
            )
        })?;
    }
    Ok(Box::new(store))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_paths_follow_what_exists_and_apply_the_rest_lexically() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let real = std::fs::canonicalize(dir.path()).expect("canonical");
        assert_eq!(resolved(dir.path()), real);
        assert_eq!(
            resolved(&dir.path().join("a/b/../c/./d")),
            real.join("a/c/d")
        );
        #[cfg(unix)]
        {
            std::fs::create_dir(dir.path().join("target")).expect("target");
            std::os::unix::fs::symlink("target", dir.path().join("link")).expect("link");
            assert_eq!(
                resolved(&dir.path().join("link/new")),
                real.join("target/new")
            );
        }
    }

    /// Any thread of the process may be starting a child process at any moment; each child
    /// holds a copy of the lock until its exec. A released directory is still free to open.
    #[test]
    fn a_released_lock_is_free_again_while_other_threads_start_processes() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = tempfile::tempdir().expect("a temporary directory");
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let spawner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut started = 0_u32;
                while !stop.load(Ordering::SeqCst) {
                    if std::process::Command::new("true").status().is_ok() {
                        started += 1;
                    }
                }
                started
            })
        };
        let mut refused = Vec::new();
        for _ in 0..2000 {
            match lock(dir.path()) {
                Ok(held) => {
                    // While held, a second opener of this process is refused at once.
                    let second = lock(dir.path()).expect_err("held");
                    assert_eq!(second.kind(), RuntimeErrorKind::Busy, "{second}");
                    drop(held);
                }
                Err(e) => refused.push(e.to_string()),
            }
        }
        stop.store(true, Ordering::SeqCst);
        let started = spawner.join().expect("the spawning thread");
        assert!(started > 0, "no process was started meanwhile");
        assert!(
            refused.is_empty(),
            "{} refused: {:?}",
            refused.len(),
            refused.first()
        );
    }
}
