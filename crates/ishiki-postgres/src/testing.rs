//! A throwaway PostgreSQL cluster for tests (feature `test-cluster`): `initdb` in a fresh temp
//! directory, the server listening on a Unix socket in that directory only (no TCP port),
//! `trust` authentication, `fsync` off (the tests kill clients, never the server).
//!
//! - **Binaries.** `initdb`, `pg_ctl` and `postgres` are looked up on `PATH`, in
//!   `/usr/local/bin` and in `/usr/lib/postgresql/<version>/bin` (newest first). Under
//!   `cargo xtask test`/`ci` ([`REQUIRE_ENGINES`] set), if none are there and the process is
//!   root, the Debian package `postgresql` is installed with `apt-get`, so a fresh CI machine
//!   needs nothing done by hand; a plain `cargo test` never installs anything.
//! - **Skipped, saying so, without them.** [`TestCluster::shared_or_skip`] gives a test that
//!   needs the server `None` on a machine without the binaries, after writing one line to the
//!   terminal naming the test and how to run it; with [`REQUIRE_ENGINES`] set, a missing
//!   server fails the test instead, so CI never passes without PostgreSQL.
//! - **Not as root.** The server refuses to run as root: as root, the cluster runs as the
//!   system user `postgres` (created if missing) through `runuser`, and its directory is
//!   handed to that user.
//! - **Stopped at the end.** [`TestCluster`] stops the server and removes its directory on
//!   drop. The cluster [`shared`](TestCluster::shared) by a test binary lives in a static, which
//!   is never dropped, so every cluster also starts a watchdog process that stops the server
//!   and removes the directory once the test process is gone — however it ended (success, a
//!   panic, or SIGKILL).
//! - **One cluster, a database per test.** [`TestCluster::database`] creates a fresh database
//!   and returns its connection string.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use tokio_postgres::{Config, NoTls};

/// The port only names the socket file (`.s.PGSQL.<port>`); the server listens on no TCP port.
pub const PORT: u16 = 5432;

/// The database superuser `initdb` creates (no password: `trust` authentication).
pub const SUPERUSER: &str = "postgres";

/// The environment variable that makes a missing PostgreSQL an error instead of a skip
/// (`cargo xtask test` and `cargo xtask ci` set it).
pub const REQUIRE_ENGINES: &str = "ISHIKI_REQUIRE_ENGINES";

fn engines_required() -> bool {
    std::env::var_os(REQUIRE_ENGINES).is_some_and(|v| !v.is_empty() && v != "0")
}

/// A running throwaway cluster.
#[derive(Debug)]
pub struct TestCluster {
    root: PathBuf,
    socket: PathBuf,
    pg_ctl: PathBuf,
    run_as: Option<String>,
    next: AtomicU64,
    watchdog: Mutex<Option<Child>>,
}

impl TestCluster {
    /// The one cluster of this test process, started on first use.
    pub fn shared() -> Result<&'static Self, String> {
        static SHARED: OnceLock<Result<TestCluster, String>> = OnceLock::new();
        SHARED
            .get_or_init(Self::start)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The shared cluster for the test `test`, or `None` when this machine has no PostgreSQL
    /// server binaries and [`REQUIRE_ENGINES`] is not set: then one line on the terminal (not
    /// captured by the test harness) says the test was skipped and how to run it. A cluster
    /// that fails to start for any other reason panics, naming why.
    pub fn shared_or_skip(test: &str) -> Option<&'static Self> {
        if find_bin_dir().is_none() && !engines_required() {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr(),
                "skipped {test}: no PostgreSQL server binaries (initdb, pg_ctl) on this machine; \
                 install the `postgresql` package, or run `cargo xtask test`, which installs it"
            );
            return None;
        }
        Some(Self::shared().unwrap_or_else(|e| panic!("the PostgreSQL test cluster starts: {e}")))
    }

    /// A fresh database in the shared cluster for the test `test`, as a connection string;
    /// `None` when [`shared_or_skip`](Self::shared_or_skip) skips the test.
    pub fn database_or_skip(test: &str) -> Option<String> {
        let cluster = Self::shared_or_skip(test)?;
        Some(
            cluster
                .database()
                .unwrap_or_else(|e| panic!("a test database: {e}")),
        )
    }

    /// Starts a new cluster (stopped when the value drops).
    pub fn start() -> Result<Self, String> {
        let bin = match find_bin_dir() {
            Some(dir) => dir,
            None => {
                install_postgresql()?;
                find_bin_dir().ok_or(
                    "PostgreSQL server binaries (initdb, pg_ctl) not found after installing them",
                )?
            }
        };
        let root = make_root()?;
        let socket = root.join("socket");
        std::fs::create_dir(&socket)
            .map_err(|e| format!("cannot create {}: {e}", socket.display()))?;
        let run_as = if is_root() {
            ensure_system_user(SUPERUSER)?;
            run(Command::new("chown")
                .arg("-R")
                .arg(format!("{SUPERUSER}:"))
                .arg(&root))?;
            Some(SUPERUSER.to_owned())
        } else {
            None
        };
        let data = root.join("data");
        let pg_ctl = bin.join("pg_ctl");
        let cluster = Self {
            root: root.clone(),
            socket: socket.clone(),
            pg_ctl,
            run_as,
            next: AtomicU64::new(1),
            watchdog: Mutex::new(None),
        };
        // From here on, dropping `cluster` cleans up whatever was started.
        let watchdog = cluster.spawn_watchdog()?;
        *cluster
            .watchdog
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(watchdog);
        run(cluster
            .as_user(&bin.join("initdb"))
            .args(["--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C"])
            .arg(format!("--username={SUPERUSER}"))
            .arg("-D")
            .arg(&data))?;
        run(cluster
            .as_user(&cluster.pg_ctl)
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(root.join("server.log"))
            .args(["-w", "-t", "60", "-o"])
            .arg(format!(
                "-k {} -c listen_addresses='' -p {PORT} -c fsync=off -c max_connections=200",
                socket.display()
            ))
            .arg("start"))
        .map_err(|e| {
            let log = std::fs::read_to_string(root.join("server.log")).unwrap_or_default();
            format!("{e}\nserver log:\n{log}")
        })?;
        Ok(cluster)
    }

    /// The connection string of database `dbname` as the superuser.
    pub fn url(&self, dbname: &str) -> String {
        format!(
            "host={} port={PORT} user={SUPERUSER} dbname={dbname}",
            self.socket.display()
        )
    }

    /// The directory of the server's Unix socket (libpq's `host`).
    pub fn socket_dir(&self) -> &Path {
        &self.socket
    }

    /// Creates a fresh, empty database and returns its connection string.
    pub fn database(&self) -> Result<String, String> {
        self.create_database().map(|name| self.url(&name))
    }

    /// Creates a fresh, empty database and returns its name.
    pub fn create_database(&self) -> Result<String, String> {
        let name = format!("test_{}", self.next.fetch_add(1, Ordering::Relaxed));
        let admin = self.url("postgres");
        // On a thread and runtime of its own: the caller may be inside a runtime.
        std::thread::scope(|scope| {
            scope
                .spawn(|| -> Result<(), String> {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| e.to_string())?;
                    runtime.block_on(async {
                        let config = Config::from_str(&admin).map_err(|e| e.to_string())?;
                        let (client, connection) =
                            config.connect(NoTls).await.map_err(|e| e.to_string())?;
                        let connection = tokio::spawn(connection);
                        let created = client
                            .batch_execute(&format!("CREATE DATABASE {name}"))
                            .await
                            .map_err(|e| format!("cannot create database {name}: {e}"));
                        drop(client);
                        let _ = connection.await;
                        created
                    })
                })
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })?;
        Ok(name)
    }

    /// A command run as the cluster's owner.
    fn as_user(&self, program: &Path) -> Command {
        match &self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    fn stop_command(&self) -> String {
        let data = self.root.join("data");
        let mut words = Vec::new();
        if let Some(user) = &self.run_as {
            words.extend([
                "runuser".to_owned(),
                "-u".to_owned(),
                user.clone(),
                "--".to_owned(),
            ]);
        }
        words.push(quote(&self.pg_ctl));
        words.extend(["-D".to_owned(), quote(&data)]);
        words.extend(["stop", "-m", "immediate", "-w"].map(str::to_owned));
        words.join(" ")
    }

    /// A shell that waits for this process to end, then stops the server and removes the
    /// directory (the shared cluster is never dropped).
    fn spawn_watchdog(&self) -> Result<Child, String> {
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} >/dev/null 2>&1; rm -rf {root}",
            pid = std::process::id(),
            stop = self.stop_command(),
            root = quote(&self.root),
        );
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the cluster's watchdog: {e}"))
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .arg("-c")
            .arg(self.stop_command())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let watchdog = self
            .watchdog
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(mut child) = watchdog.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    // `/proc/self` belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn make_root() -> Result<PathBuf, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    // Short: the socket path must fit in 107 bytes.
    let root = std::env::temp_dir().join(format!("ishiki-pg-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    Ok(root)
}

fn find_bin_dir() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    candidates.push("/usr/local/bin".into());
    if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<(u32, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let version = e.file_name().to_str()?.parse().ok()?;
                Some((version, e.path().join("bin")))
            })
            .collect();
        versions.sort_by_key(|v| std::cmp::Reverse(v.0));
        candidates.extend(versions.into_iter().map(|(_, dir)| dir));
    }
    candidates.into_iter().find(|dir| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|b| dir.join(b).is_file())
    })
}

fn install_postgresql() -> Result<(), String> {
    if !is_root() || !engines_required() {
        return Err(
            "PostgreSQL server binaries (initdb, pg_ctl) not found; install the `postgresql` package"
                .to_owned(),
        );
    }
    let install = || {
        run(Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "postgresql"])
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    install().or_else(|_| {
        run(Command::new("apt-get").arg("update"))?;
        install()
    })
}

fn ensure_system_user(user: &str) -> Result<(), String> {
    if run(Command::new("id").arg("-u").arg(user)).is_ok() {
        return Ok(());
    }
    run(Command::new("useradd")
        .args(["--system", "--user-group", "--no-create-home"])
        .args(["--shell", "/usr/sbin/nologin"])
        .arg(user))
}
