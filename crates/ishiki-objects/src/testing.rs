//! A real S3 server for tests and benches (feature `test-server`): moto's standalone server,
//! installed into `<repo>/.tools/venv` on demand (under a file lock, as `cargo xtask tools`
//! does) and started on a free 127.0.0.1 port.
//!
//! - [`TestServer::shared`] is the one server of a process, started on first use; every
//!   server also starts a watchdog process that stops it once the process that started it is
//!   gone, however it ended (success, a panic, or SIGKILL), so nothing is left running.
//! - [`TestServer::bucket`] creates a fresh bucket and returns an `s3://` location in it;
//!   [`TestServer::open`] opens such a location with the server's endpoint and test
//!   credentials.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use crate::Objects;

/// The pinned moto release (keep in step with `xtask/src/main.rs`).
pub const MOTO: &str = "moto[server]==5.2.5";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `<repo>/.tools/venv/bin/moto_server`, installed the first time it is needed.
fn moto_server() -> Result<PathBuf, String> {
    static SERVER: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    SERVER.get_or_init(install).clone()
}

fn install() -> Result<PathBuf, String> {
    let tools = repo_root().join(".tools");
    let venv = tools.join("venv");
    let server = venv.join("bin/moto_server");
    let marker = venv.join(format!(".installed-{MOTO}"));
    let installed = || server.is_file() && marker.is_file();
    if installed() {
        return Ok(server);
    }
    std::fs::create_dir_all(&tools).map_err(|e| format!("cannot create <repo>/.tools: {e}"))?;
    let lock = std::fs::File::create(tools.join(".install.lock"))
        .map_err(|e| format!("cannot create <repo>/.tools/.install.lock: {e}"))?;
    lock.lock()
        .map_err(|e| format!("cannot lock <repo>/.tools/.install.lock: {e}"))?;
    if !installed() {
        let run = |cmd: &mut Command, what: &str| -> Result<(), String> {
            let output = cmd
                .output()
                .map_err(|e| format!("cannot run {what}: {e}"))?;
            if output.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{what} failed:\n{}",
                    String::from_utf8_lossy(&output.stderr)
                ))
            }
        };
        if !venv.join("bin/pip").is_file() {
            run(
                Command::new("python3").args(["-m", "venv"]).arg(&venv),
                "python3 -m venv (Python 3 is needed for the S3 tests)",
            )?;
        }
        run(
            Command::new(venv.join("bin/pip")).args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                MOTO,
            ]),
            &format!("pip install {MOTO}"),
        )?;
        std::fs::write(&marker, "").map_err(|e| format!("cannot write the install marker: {e}"))?;
    }
    drop(lock);
    Ok(server)
}

/// A running moto server; stopped on drop (and by its watchdog when the process ends).
#[derive(Debug)]
pub struct TestServer {
    child: Mutex<Child>,
    watchdog: Mutex<Option<Child>>,
    endpoint: String,
    next: AtomicU64,
}

impl TestServer {
    /// The one server of this process, started on first use.
    pub fn shared() -> Result<&'static Self, String> {
        static SHARED: OnceLock<Result<TestServer, String>> = OnceLock::new();
        SHARED
            .get_or_init(Self::start)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Starts a new server on a free 127.0.0.1 port (stopped when the value drops).
    pub fn start() -> Result<Self, String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port for moto_server: {e}"))?
            .port();
        let mut child = Command::new(moto_server()?)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start moto_server: {e}"))?;
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {parent} 2>/dev/null; do sleep 1; done; kill {server} 2>/dev/null",
                parent = std::process::id(),
                server = child.id(),
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let stderr = child.stderr.take();
        let server = Self {
            child: Mutex::new(child),
            watchdog: Mutex::new(None),
            endpoint: format!("http://127.0.0.1:{port}"),
            next: AtomicU64::new(0),
        };
        // From here on, dropping `server` stops what was started.
        *server
            .watchdog
            .lock()
            .unwrap_or_else(PoisonError::into_inner) =
            Some(watchdog.map_err(|e| format!("cannot start the moto server's watchdog: {e}"))?);
        let stderr = stderr.ok_or("moto_server's stderr is not piped")?;
        // Werkzeug announces "Running on http://…" on stderr once it listens; the thread keeps
        // draining the request log afterwards so the pipe never fills.
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
        match listening.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(())) => Ok(server),
            Ok(Err(log)) => Err(format!("moto_server stopped before listening:\n{log}")),
            Err(e) => Err(format!("moto_server did not start listening: {e}")),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The S3 options that reach this server (endpoint, test credentials, plain HTTP).
    pub fn options(&self) -> Vec<(&'static str, String)> {
        client_options(&self.endpoint)
    }

    /// Opens `location` (`s3://bucket/prefix`) on this server.
    pub fn open(&self, location: &str) -> Result<Objects, String> {
        Objects::open_with(location, self.options()).map_err(|e| e.to_string())
    }

    /// Creates a fresh, empty bucket and returns its name.
    pub fn bucket(&self) -> Result<String, String> {
        let bucket = format!(
            "ishiki-{}-{}",
            std::process::id(),
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        self.create_bucket(&bucket)?;
        Ok(bucket)
    }

    /// Creates `bucket` (moto accepts an unsigned CreateBucket).
    pub fn create_bucket(&self, bucket: &str) -> Result<(), String> {
        let host = self.endpoint.trim_start_matches("http://");
        let failed = |e: std::io::Error| format!("CreateBucket {bucket}: {e}");
        let mut stream = TcpStream::connect(host).map_err(failed)?;
        write!(
            stream,
            "PUT /{bucket} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .map_err(failed)?;
        let mut response = String::new();
        stream.read_to_string(&mut response).map_err(failed)?;
        if response.starts_with("HTTP/1.1 200") {
            Ok(())
        } else {
            Err(format!("CreateBucket {bucket} failed: {response}"))
        }
    }
}

/// The S3 options that reach a test server at `endpoint` (for a process that did not start
/// it, such as a child a test kills).
pub fn client_options(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("aws_endpoint", endpoint.to_owned()),
        ("aws_access_key_id", "test".to_owned()),
        ("aws_secret_access_key", "test".to_owned()),
        ("aws_region", "us-east-1".to_owned()),
        ("aws_allow_http", "true".to_owned()),
    ]
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(PoisonError::into_inner);
        let _ = child.kill();
        let _ = child.wait();
        let watchdog = self
            .watchdog
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(mut watchdog) = watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }
}
