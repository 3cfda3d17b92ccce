//! Test harness: every test body runs against the local file-system backend and against a real
//! S3 server — moto's standalone server, installed into `<repo>/.tools/venv` on demand (under
//! a file lock, as `cargo xtask tools` does) and started on 127.0.0.1 by the tests themselves.

mod artifacts;
mod assets;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use ishiki_objects::Objects;

/// The pinned moto release (keep in step with `xtask/src/main.rs`).
const MOTO: &str = "moto[server]==5.2.5";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `<repo>/.tools/venv/bin/moto_server`, installed the first time a test needs it.
fn moto_server() -> PathBuf {
    static SERVER: OnceLock<PathBuf> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            let tools = repo_root().join(".tools");
            let venv = tools.join("venv");
            let server = venv.join("bin/moto_server");
            let marker = venv.join(format!(".installed-{MOTO}"));
            let installed = || server.is_file() && marker.is_file();
            if installed() {
                return server;
            }
            std::fs::create_dir_all(&tools).expect("cannot create <repo>/.tools");
            let lock = std::fs::File::create(tools.join(".install.lock"))
                .expect("cannot create <repo>/.tools/.install.lock");
            lock.lock()
                .expect("cannot lock <repo>/.tools/.install.lock");
            if !installed() {
                let run = |cmd: &mut Command, what: &str| {
                    let output = cmd
                        .output()
                        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
                    assert!(
                        output.status.success(),
                        "{what} failed:\n{}",
                        String::from_utf8_lossy(&output.stderr)
                    );
                };
                if !venv.join("bin/pip").is_file() {
                    run(
                        Command::new("python3").args(["-m", "venv"]).arg(&venv),
                        "python3 -m venv (Python 3 is needed for the S3 tests)",
                    );
                }
                run(
                    Command::new(venv.join("bin/pip")).args([
                        "install",
                        "--quiet",
                        "--disable-pip-version-check",
                        MOTO,
                    ]),
                    &format!("pip install {MOTO}"),
                );
                std::fs::write(&marker, "").expect("cannot write the install marker");
            }
            drop(lock);
            server
        })
        .clone()
}

/// A running moto server; stopped when the last test holding it is done.
#[derive(Debug)]
pub(crate) struct Moto {
    child: Child,
    endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shared server (started if no running test holds one).
fn moto() -> Arc<Moto> {
    static RUNNING: Mutex<Weak<Moto>> = Mutex::new(Weak::new());
    let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(moto) = running.upgrade() {
        return moto;
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = Command::new(moto_server())
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start moto_server");
    // Werkzeug announces "Running on http://…" on stderr once it listens; the thread keeps
    // draining the request log afterwards so the pipe never fills.
    let stderr = child.stderr.take().expect("piped stderr");
    let (ready, listening) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut log = String::new();
        let mut lines = BufReader::new(stderr).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if line.contains("Running on") {
                let _ = ready.send(Ok(()));
                break;
            }
            log.push_str(&line);
            log.push('\n');
        }
        let _ = ready.send(Err(log));
        lines.for_each(drop);
    });
    let moto = Arc::new(Moto {
        child,
        endpoint: format!("http://127.0.0.1:{port}"),
    });
    match listening.recv_timeout(Duration::from_secs(120)) {
        Ok(Ok(())) => {}
        Ok(Err(log)) => panic!("moto_server stopped before listening:\n{log}"),
        Err(e) => panic!("moto_server did not start listening: {e}"),
    }
    *running = Arc::downgrade(&moto);
    moto
}

/// Creates `bucket` (moto accepts an unsigned CreateBucket).
fn create_bucket(endpoint: &str, bucket: &str) {
    let host = endpoint.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).expect("connect to moto");
    write!(
        stream,
        "PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .expect("send CreateBucket");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read CreateBucket");
    assert!(
        response.starts_with("HTTP/1.1 200"),
        "CreateBucket {bucket} failed: {response}"
    );
}

/// One backend a test body runs against; holds what must outlive the test.
pub(crate) struct Backend {
    pub(crate) name: &'static str,
    pub(crate) objects: Objects,
    location: String,
    options: Vec<(&'static str, String)>,
    _dir: Option<tempfile::TempDir>,
    _moto: Option<Arc<Moto>>,
}

impl Backend {
    /// A second client for the same location, for a test's own runtime: the stores' client
    /// lives on the crate's i/o runtime and is not shared with the test's.
    fn reopen(&self) -> Objects {
        Objects::open_with(&self.location, self.options.clone()).expect("reopen")
    }

    /// Runs `work` with a fresh client on a runtime of the test's own.
    fn with_store<T>(
        &self,
        work: impl AsyncFnOnce(&dyn object_store::ObjectStore, &object_store::path::Path) -> T,
    ) -> T {
        let objects = self.reopen();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(work(&**objects.store(), objects.prefix()))
    }

    /// Every key under `<prefix>/<under>`, relative to the prefix, sorted.
    pub(crate) fn keys(&self, under: &str) -> Vec<String> {
        self.with_store(async |store, prefix| {
            let mut out = Vec::new();
            let mut pending = vec![prefix.clone().join(under)];
            while let Some(dir) = pending.pop() {
                let listing = store.list_with_delimiter(Some(&dir)).await.expect("list");
                for object in listing.objects {
                    let key = object.location.to_string();
                    let relative = key
                        .strip_prefix(&format!("{prefix}/"))
                        .unwrap_or(&key)
                        .to_owned();
                    out.push(relative);
                }
                pending.extend(listing.common_prefixes);
            }
            out.sort();
            out
        })
    }

    /// Writes `bytes` at `<prefix>/<key>` behind the stores' back (unconditionally).
    pub(crate) fn put_raw(&self, key: &str, bytes: &[u8]) {
        let bytes = bytes.to_vec();
        self.with_store(async |store, prefix| {
            let key = object_store::path::Path::parse(key).expect("key");
            let path: object_store::path::Path = prefix.parts().chain(key.parts()).collect();
            store
                .put_opts(&path, bytes.into(), object_store::PutOptions::default())
                .await
                .expect("raw put");
        });
    }
}

/// The local file-system backend and an S3 bucket of its own on moto.
pub(crate) fn backends() -> Vec<Backend> {
    static BUCKET: AtomicU64 = AtomicU64::new(0);
    let dir = tempfile::tempdir().expect("tempdir");
    let local_location = dir.path().display().to_string();
    let local = Objects::open(&local_location).expect("local objects");
    let moto = moto();
    let bucket = format!(
        "ishiki-{}-{}",
        std::process::id(),
        BUCKET.fetch_add(1, Ordering::Relaxed)
    );
    create_bucket(&moto.endpoint, &bucket);
    let location = format!("s3://{bucket}/conversations/a");
    let options = vec![
        ("aws_endpoint", moto.endpoint.clone()),
        ("aws_access_key_id", "test".to_owned()),
        ("aws_secret_access_key", "test".to_owned()),
        ("aws_region", "us-east-1".to_owned()),
        ("aws_allow_http", "true".to_owned()),
    ];
    let s3 = Objects::open_with(&location, options.clone()).expect("s3 objects");
    vec![
        Backend {
            name: "local",
            objects: local,
            location: local_location,
            options: Vec::new(),
            _dir: Some(dir),
            _moto: None,
        },
        Backend {
            name: "s3",
            objects: s3,
            location,
            options,
            _dir: None,
            _moto: Some(moto),
        },
    ]
}
