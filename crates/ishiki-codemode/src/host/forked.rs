//! The host's side of the fork server (`crate::zygote`, Linux): starting it, asking it for
//! workers, and a forked worker's process handle — its end, kill and release.
//!
//! A server serves at most [`RETIRE_AFTER`] forks, and none after one of its workers died of
//! a crash signal: its workers share its memory layout (ASLR, stack canary, pointer guard), so
//! a program that learned something of it through a bug in the engine could use it in a later
//! program only while the same server serves both. A retired server lives on until its last
//! worker's handle is dropped.

#![allow(unsafe_code)] // pidfd_send_signal: a call into libc.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::process::{Child, ChildStdout};
use tokio::sync::{Notify, oneshot};

use super::lock;
use crate::protocol::WORKER_ENV;
use crate::zygote::{
    EXITED, FAILED, FORK, FORK_FAILED, FORKED, MAX_PACKET, READY, RELEASE, ZYGOTE_ENV, pidfd_open,
    receive_packet, send_packet, socket_pair,
};

/// Forks one server serves before a new one (a fresh exec, a fresh memory layout) takes over.
pub(super) const RETIRE_AFTER: u32 = 64;

/// How long a server may take to build its engine and say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// A running fork server. Its process ends when the last handle to it (this, or one of its
/// workers') is dropped; its workers end with it.
#[derive(Debug)]
pub(super) struct ForkServer {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    socket: OwnedFd,
    state: Mutex<State>,
    /// A worker ended, or the server is gone.
    changed: Notify,
    /// The server process, killed on drop.
    _process: Child,
    /// Its stdout, kept open: only a worker binary built before the fork server writes to it.
    stdout: Mutex<Option<ChildStdout>>,
}

#[derive(Debug, Default)]
struct State {
    next_id: u32,
    /// Forks asked for and not yet answered, by request id.
    forks: HashMap<u32, oneshot::Sender<Result<ForkedChild, String>>>,
    /// Workers forked and not yet released.
    live: HashSet<u32>,
    /// Wait statuses of live workers that ended.
    ended: HashMap<u32, i32>,
    /// Releases not yet sent (the socket was full); sent at the next chance.
    releases: Vec<u32>,
    /// Forks answered.
    forked: u32,
    /// No new forks: [`RETIRE_AFTER`] reached, or a worker died of a crash signal.
    retired: bool,
    /// Why the server is gone, once it is.
    gone: Option<String>,
}

/// The pipes of a forked worker, the host's ends.
pub(super) struct ForkedPipes {
    pub(super) stdin: OwnedFd,
    pub(super) stdout: OwnedFd,
    pub(super) stderr: OwnedFd,
}

impl ForkServer {
    /// Starts `program` as a fork server and waits until its engine is built.
    pub(super) async fn start(program: &Path, engine_env: &str) -> Result<Self, String> {
        let (host, server) = socket_pair().map_err(|e| format!("socketpair failed: {e}"))?;
        let mut command = tokio::process::Command::new(program);
        // The worker variable too: a binary built before the fork server ignores the server's
        // and starts as a confined worker (which writes `ready` to stdout, where the host
        // notices it at once) instead of running whatever its `main()` does otherwise.
        command
            .env_clear()
            .env(ZYGOTE_ENV, engine_env)
            .env(WORKER_ENV, engine_env)
            .stdin(Stdio::from(server))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        let mut process = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        // The command holds the server's end of the socket: the host must not, or a server
        // that exits would never read as gone.
        drop(command);
        let mut stdout = process.stdout.take();
        let reader = host
            .try_clone()
            .map_err(|e| format!("cannot duplicate the socket: {e}"))?;
        let shared = Arc::new(Shared {
            socket: host,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            _process: process,
            stdout: Mutex::new(None),
        });
        let (ready_tx, ready) = oneshot::channel();
        let listener = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("codemode-fork-server".to_owned())
            .stack_size(64 << 10)
            .spawn(move || listen(&listener, &reader, ready_tx))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        let not_a_server = |why: &str| {
            format!(
                "{} did not start as a fork server ({why})",
                program.display()
            )
        };
        let mut early = [0u8; 16];
        let answer = tokio::time::timeout(READY_WITHIN, async {
            tokio::select! {
                answer = ready => answer.unwrap_or_else(|_| Err("it exited".to_owned())),
                n = async {
                    match stdout.as_mut() {
                        Some(out) => out.read(&mut early).await,
                        None => std::future::pending().await,
                    }
                } => Err(match n {
                    Ok(n) if n > 0 => {
                        "it started as a worker: it was built before the fork server".to_owned()
                    }
                    _ => "it exited".to_owned(),
                }),
            }
        })
        .await;
        match answer {
            Ok(Ok(())) => {
                *lock(&shared.stdout) = stdout;
                Ok(Self { shared })
            }
            Ok(Err(why)) => Err(not_a_server(&why)),
            Err(_) => Err(not_a_server("not ready within 10 s")),
        }
    }

    /// Whether the server takes more forks: it lives and is not retired.
    pub(super) fn alive(&self) -> bool {
        let state = lock(&self.shared.state);
        state.gone.is_none() && !state.retired
    }

    /// A new worker: its handle and the host's ends of its pipes.
    pub(super) async fn fork(&self) -> Result<(ForkedChild, ForkedPipes), String> {
        let pipe = || std::io::pipe().map_err(|e| format!("cannot create a pipe: {e}"));
        let (stdin_r, stdin_w) = pipe()?;
        let (stdout_r, stdout_w) = pipe()?;
        let (stderr_r, stderr_w) = pipe()?;
        let (stdin_r, stdout_w, stderr_w): (OwnedFd, OwnedFd, OwnedFd) =
            (stdin_r.into(), stdout_w.into(), stderr_w.into());
        let (answer, forked) = oneshot::channel();
        {
            let mut state = lock(&self.shared.state);
            if let Some(reason) = &state.gone {
                return Err(reason.clone());
            }
            let id = state.next_id;
            state.next_id = state.next_id.wrapping_add(1);
            let mut packet = vec![FORK];
            packet.extend_from_slice(&id.to_le_bytes());
            let sent = send_packet(
                self.shared.socket.as_raw_fd(),
                &packet,
                &[
                    stdin_r.as_raw_fd(),
                    stdout_w.as_raw_fd(),
                    stderr_w.as_raw_fd(),
                ],
                // A server that stopped reading fails this start; it never blocks the host.
                false,
            );
            match sent {
                Ok(()) => {
                    state.forks.insert(id, answer);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Err("the fork server is not reading".to_owned());
                }
                Err(e) => {
                    // Its socket is closed: the server is gone, whether or not the listener
                    // has seen it yet.
                    let reason = format!("the fork server is gone ({e})");
                    gone(&mut state, &reason);
                    drop(state);
                    self.shared.changed.notify_waiters();
                    return Err(reason);
                }
            }
        }
        // The worker holds its ends now; the host's copies would keep its pipes open.
        drop((stdin_r, stdout_w, stderr_w));
        let child = match tokio::time::timeout(Duration::from_secs(30), forked).await {
            Ok(Ok(answer)) => answer?,
            Ok(Err(_)) => return Err("the fork server is gone".to_owned()),
            Err(_) => return Err("the fork server did not answer within 30 s".to_owned()),
        };
        let pipes = ForkedPipes {
            stdin: stdin_w.into(),
            stdout: stdout_r.into(),
            stderr: stderr_r.into(),
        };
        Ok((child, pipes))
    }
}

/// Marks the server gone: every fork still waiting fails with `reason`.
fn gone(state: &mut State, reason: &str) {
    if state.gone.is_none() {
        state.gone = Some(reason.to_owned());
    }
    for (_, waiter) in state.forks.drain() {
        let _ = waiter.send(Err(reason.to_owned()));
    }
}

/// Sends the queued releases the socket takes now; the rest wait for the next chance.
fn flush_releases(socket: RawFd, state: &mut State) {
    while let Some(&pid) = state.releases.first() {
        let mut packet = [RELEASE, 0, 0, 0, 0];
        packet[1..].copy_from_slice(&pid.to_le_bytes());
        match send_packet(socket, &packet, &[], false) {
            Ok(()) => {
                state.releases.remove(0);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            // The server is gone: it reaps nothing any more, nor needs to.
            Err(_) => {
                state.releases.clear();
                return;
            }
        }
    }
}

/// A crash signal: the worker's end may have been an attack on the memory layout its server
/// shares with its other workers.
fn crashed(status: i32) -> bool {
    use std::os::unix::process::ExitStatusExt as _;
    matches!(
        ExitStatus::from_raw(status).signal(),
        Some(
            libc::SIGSEGV
                | libc::SIGBUS
                | libc::SIGILL
                | libc::SIGABRT
                | libc::SIGSYS
                | libc::SIGFPE
                | libc::SIGTRAP
        )
    )
}

/// The listener thread: reads the server's packets until it is gone, or nobody holds it.
fn listen(shared: &Weak<Shared>, socket: &OwnedFd, ready: oneshot::Sender<Result<(), String>>) {
    let mut ready = Some(ready);
    let mut buffer = [0u8; MAX_PACKET];
    let reason = loop {
        let n = match receive_packet(socket.as_raw_fd(), &mut buffer, 0) {
            Ok((0, _)) => break "the fork server exited".to_owned(),
            Ok((n, _)) => n,
            Err(e) => break format!("the fork server's socket failed: {e}"),
        };
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let word = |at: usize| {
            buffer
                .get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
        };
        let mut state = lock(&shared.state);
        match (buffer[0], n, word(1), word(5)) {
            (READY, 1, _, _) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Ok(()));
                }
            }
            (FAILED, _, _, _) => {
                break String::from_utf8_lossy(&buffer[1..n]).into_owned();
            }
            (FORKED, 9, Some(id), Some(pid)) => {
                state.forked += 1;
                if state.forked >= RETIRE_AFTER {
                    state.retired = true;
                }
                state.live.insert(pid);
                // The pid is the worker's: the server keeps it unreaped until released.
                let child = ForkedChild {
                    pid,
                    pidfd: pidfd_open(pid as libc::pid_t).ok(),
                    shared: Arc::clone(&shared),
                    status: None,
                };
                // A waiter that stopped waiting drops the child, which releases it.
                match state.forks.remove(&id) {
                    Some(waiter) => {
                        drop(state);
                        let _ = waiter.send(Ok(child));
                        continue;
                    }
                    None => {
                        drop(state);
                        drop(child);
                        continue;
                    }
                }
            }
            (FORK_FAILED, 9, Some(id), Some(errno)) => {
                if let Some(waiter) = state.forks.remove(&id) {
                    let _ = waiter.send(Err(format!(
                        "the fork server could not fork: {}",
                        std::io::Error::from_raw_os_error(errno as i32)
                    )));
                }
            }
            (EXITED, 9, Some(pid), Some(status)) => {
                // Only a live worker's: a released one's status is nobody's.
                if state.live.contains(&pid) {
                    state.ended.insert(pid, status as i32);
                    if crashed(status as i32) {
                        state.retired = true;
                    }
                    drop(state);
                    shared.changed.notify_waiters();
                    continue;
                }
            }
            _ => break format!("the fork server sent an unknown packet ({n} bytes)"),
        }
        flush_releases(shared.socket.as_raw_fd(), &mut state);
    };
    if let Some(ready) = ready.take() {
        let _ = ready.send(Err(reason.clone()));
    }
    if let Some(shared) = shared.upgrade() {
        gone(&mut lock(&shared.state), &reason);
        shared.changed.notify_waiters();
    }
}

/// A worker the fork server started. It stays unreaped (its pid its own) while the server
/// lives and until this handle drops, which kills it and lets the server reap it.
#[derive(Debug)]
pub(super) struct ForkedChild {
    pid: u32,
    /// Signals reach this worker and no other, whatever happened to its pid.
    pidfd: Option<OwnedFd>,
    shared: Arc<Shared>,
    status: Option<ExitStatus>,
}

impl ForkedChild {
    /// Its pid while that is certainly still its own: while the server lives, it keeps the
    /// worker unreaped until this handle is dropped.
    pub(super) fn id(&self) -> Option<u32> {
        lock(&self.shared.state).gone.is_none().then_some(self.pid)
    }

    /// Its exit status, if it ended.
    pub(super) fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        use std::os::unix::process::ExitStatusExt as _;
        if self.status.is_none() {
            let state = lock(&self.shared.state);
            if let Some(&raw) = state.ended.get(&self.pid) {
                self.status = Some(ExitStatus::from_raw(raw));
            } else if let Some(reason) = &state.gone {
                return Err(std::io::Error::other(reason.clone()));
            }
        }
        Ok(self.status)
    }

    /// Waits until it ends.
    pub(super) async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let shared = Arc::clone(&self.shared);
        loop {
            let changed = shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            changed.await;
        }
    }

    /// Sends it SIGKILL (through its pidfd: never another process).
    pub(super) fn start_kill(&self) {
        if let Some(pidfd) = &self.pidfd {
            // SAFETY: plain integers and a null siginfo, on a pidfd we own.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0u32,
                )
            };
        }
    }

    /// Why its server is gone, if it is.
    pub(super) fn server_gone(&self) -> Option<String> {
        lock(&self.shared.state).gone.clone()
    }
}

impl Drop for ForkedChild {
    fn drop(&mut self) {
        self.start_kill();
        let mut state = lock(&self.shared.state);
        state.live.remove(&self.pid);
        state.ended.remove(&self.pid);
        if state.gone.is_none() {
            state.releases.push(self.pid);
            flush_releases(self.shared.socket.as_raw_fd(), &mut state);
        }
    }
}
