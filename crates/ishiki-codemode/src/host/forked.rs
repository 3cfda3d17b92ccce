//! The host's side of the fork server (`crate::zygote`, Linux): starting it, asking it for
//! workers, and a forked worker's process handle — its end, kill and release.

#![allow(unsafe_code)] // socketpair, kill: calls into libc.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot};

use super::lock;
use crate::zygote::{
    EXITED, FAILED, FORK, FORK_FAILED, FORKED, MAX_PACKET, READY, RELEASE, ZYGOTE_ENV,
    receive_packet, send_packet,
};

/// A running fork server. Dropping it kills the server; workers it forked end with it.
#[derive(Debug)]
pub(super) struct ForkServer {
    shared: Arc<Shared>,
    _process: tokio::process::Child,
}

#[derive(Debug)]
struct Shared {
    socket: OwnedFd,
    state: Mutex<State>,
    /// A worker ended, or the server is gone.
    changed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Forks asked for and not yet answered, in the order asked (the server answers so).
    forks: VecDeque<oneshot::Sender<Result<u32, String>>>,
    /// Wait statuses of workers that ended and are not yet released.
    ended: HashMap<u32, i32>,
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
        let mut pair = [0; 2];
        // SAFETY: `socketpair` writes two new descriptors into a live array.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(format!(
                "socketpair failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: both descriptors were just created and nothing else owns them.
        let (host, server) =
            unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let mut command = tokio::process::Command::new(program);
        command
            .env_clear()
            .env(ZYGOTE_ENV, engine_env)
            .stdin(Stdio::from(server))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        let process = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        // The command holds the server's end of the socket: the host must not, or a server
        // that exits would never read as gone.
        drop(command);
        let reader = host
            .try_clone()
            .map_err(|e| format!("cannot duplicate the socket: {e}"))?;
        let shared = Arc::new(Shared {
            socket: host,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        });
        let (ready_tx, ready) = oneshot::channel();
        let listener = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("codemode-fork-server".to_owned())
            .stack_size(64 << 10)
            .spawn(move || listen(&listener, &reader, ready_tx))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        let server = Self {
            shared,
            _process: process,
        };
        match tokio::time::timeout(Duration::from_secs(30), ready).await {
            Ok(Ok(Ok(()))) => Ok(server),
            Ok(Ok(Err(reason))) => Err(format!(
                "{} did not start as a fork server ({reason})",
                program.display()
            )),
            Ok(Err(_)) => Err(format!(
                "{} did not start as a fork server",
                program.display()
            )),
            Err(_) => Err("the fork server did not become ready within 30 s".to_owned()),
        }
    }

    /// Whether the server still serves.
    pub(super) fn alive(&self) -> bool {
        lock(&self.shared.state).gone.is_none()
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
            // Queued and sent under one lock, so answers pair with forks in order.
            let mut state = lock(&self.shared.state);
            if let Some(reason) = &state.gone {
                return Err(reason.clone());
            }
            send_packet(
                self.shared.socket.as_raw_fd(),
                &[FORK],
                &[
                    stdin_r.as_raw_fd(),
                    stdout_w.as_raw_fd(),
                    stderr_w.as_raw_fd(),
                ],
                // A server that stopped reading fails this start; it never blocks the host.
                false,
            )
            .map_err(|e| format!("cannot reach the fork server: {e}"))?;
            state.forks.push_back(answer);
        }
        // The worker holds its ends now; the host's copies would keep its pipes open.
        drop((stdin_r, stdout_w, stderr_w));
        let pid = match tokio::time::timeout(Duration::from_secs(30), forked).await {
            Ok(Ok(answer)) => answer?,
            Ok(Err(_)) => return Err("the fork server is gone".to_owned()),
            Err(_) => return Err("the fork server did not answer within 30 s".to_owned()),
        };
        let child = ForkedChild {
            pid,
            shared: Arc::clone(&self.shared),
            status: None,
        };
        let pipes = ForkedPipes {
            stdin: stdin_w.into(),
            stdout: stdout_r.into(),
            stderr: stderr_r.into(),
        };
        Ok((child, pipes))
    }
}

/// The listener thread: reads the server's packets until it is gone.
fn listen(shared: &Shared, socket: &OwnedFd, ready: oneshot::Sender<Result<(), String>>) {
    let mut ready = Some(ready);
    let mut buffer = [0u8; MAX_PACKET];
    let reason = loop {
        let (n, _) = match receive_packet(socket.as_raw_fd(), &mut buffer, 0) {
            Ok((0, _)) => break "the fork server exited".to_owned(),
            Ok(packet) => packet,
            Err(e) => break format!("the fork server's socket failed: {e}"),
        };
        let word = |at: usize| {
            buffer
                .get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
        };
        match (buffer[0], n) {
            (READY, 1) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Ok(()));
                }
            }
            (FAILED, _) => {
                let reason = String::from_utf8_lossy(&buffer[1..n]).into_owned();
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(reason.clone()));
                }
                break reason;
            }
            (FORKED | FORK_FAILED, 5) => {
                let answer = match (buffer[0], word(1)) {
                    (FORKED, Some(pid)) => Ok(pid),
                    (_, errno) => Err(format!(
                        "the fork server could not fork: {}",
                        std::io::Error::from_raw_os_error(errno.unwrap_or(0) as i32)
                    )),
                };
                let waiter = lock(&shared.state).forks.pop_front();
                // A fork whose asker stopped waiting: nobody holds its worker, so it goes.
                if let Some(Err(Ok(pid))) = waiter.map(|w| w.send(answer)) {
                    signal(pid);
                    release(shared, pid);
                }
            }
            (EXITED, 9) => {
                if let (Some(pid), Some(status)) = (word(1), word(5)) {
                    lock(&shared.state).ended.insert(pid, status as i32);
                    shared.changed.notify_waiters();
                }
            }
            _ => break format!("the fork server sent an unknown packet ({n} bytes)"),
        }
    };
    let mut state = lock(&shared.state);
    state.gone = Some(reason.clone());
    for waiter in state.forks.drain(..) {
        let _ = waiter.send(Err(reason.clone()));
    }
    drop(state);
    if let Some(ready) = ready.take() {
        let _ = ready.send(Err(reason));
    }
    shared.changed.notify_waiters();
}

/// Tells the server the host is done with worker `pid`.
fn release(shared: &Shared, pid: u32) {
    let mut packet = [RELEASE, 0, 0, 0, 0];
    packet[1..].copy_from_slice(&pid.to_le_bytes());
    lock(&shared.state).ended.remove(&pid);
    let _ = send_packet(shared.socket.as_raw_fd(), &packet, &[], false);
}

/// A worker the fork server started. It stays unreaped (its pid its own) until this handle
/// drops, which kills it and lets the server reap it.
#[derive(Debug)]
pub(super) struct ForkedChild {
    pid: u32,
    shared: Arc<Shared>,
    status: Option<ExitStatus>,
}

impl ForkedChild {
    pub(super) fn id(&self) -> u32 {
        self.pid
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

    /// Sends it SIGKILL.
    pub(super) fn start_kill(&self) {
        if self.status.is_none() {
            signal(self.pid);
        }
    }
}

fn signal(pid: u32) {
    if let Ok(pid) = RawFd::try_from(pid)
        && pid > 1
    {
        // SAFETY: plain integers; the worker is unreaped until released, so the pid is its own.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

impl Drop for ForkedChild {
    fn drop(&mut self) {
        self.start_kill();
        release(&self.shared, self.pid);
    }
}
