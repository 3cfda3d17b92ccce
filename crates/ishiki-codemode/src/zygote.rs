//! The fork server (Linux): one process per [`Sandbox`](crate::Sandbox) that builds an engine
//! once and forks a worker from it per program, so a worker starts in a fork instead of an
//! exec, a dynamic link, a warm-up run and an engine build (issue 26: that start was 6.5 ms of
//! CPU per program and took half of a busy two-core host).
//!
//! The host starts the binary with [`ZYGOTE_ENV`] holding the engine configuration and a
//! `SOCK_SEQPACKET` socket as stdin. The server closes every other inherited descriptor, runs
//! the warm-up program, builds one engine that never runs a program, says [`READY`], and then
//! serves messages, one per packet:
//!
//! - host → server: [`FORK`] + request id (little-endian `u32`) with three descriptors attached
//!   (the new worker's stdin, stdout and stderr); [`RELEASE`] + pid (`u32`) once the host is
//!   done with a worker.
//! - server → host: [`FORKED`] + request id + pid, or [`FORK_FAILED`] + request id + errno;
//!   [`EXITED`] + pid + wait status (`i32`) when a worker ends.
//!
//! Each worker is a copy of the server taken before any program ran: a fresh process with a
//! pristine engine (the realm is deterministic: `Math.random` is seeded by the configuration),
//! which builds a throwaway engine (so the pages a program writes are its own before the
//! program comes) and confines itself exactly as an exec-started worker does (`confine::start_up`:
//! descriptors, limits, capabilities, `no_new_privs`, Landlock, the seccomp allow-list) and
//! leads its own process group. A worker stays unreaped until the host releases it, so the
//! host's kill of its process group can never reach a reused pid. The server is
//! single-threaded when it forks (its main thread only waits to join the thread with the large
//! stack that serves; nothing else runs), ends when the host closes the socket or dies, and its
//! workers end when it does (`os::exit_when_orphaned`).

#![allow(unsafe_code)] // fork, socket messages with descriptors, pidfds: calls into libc.

use crate::config::EngineConfig;
use crate::engine::Engine;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Environment variable that starts a binary as a fork server; its value is the engine config.
pub(crate) const ZYGOTE_ENV: &str = "ISHIKI_CODEMODE_ZYGOTE";

/// Host → server: fork a worker (three descriptors attached).
pub(crate) const FORK: u8 = b'F';
/// Host → server: the host is done with this worker (+ pid); reap it, killing it if needed.
pub(crate) const RELEASE: u8 = b'R';
/// Server → host: the engine is built; forks may come.
pub(crate) const READY: u8 = b'S';
/// Server → host: the server cannot serve (+ UTF-8 reason).
pub(crate) const FAILED: u8 = b'E';
/// Server → host: a worker was forked (+ pid).
pub(crate) const FORKED: u8 = b'f';
/// Server → host: a fork failed (+ errno).
pub(crate) const FORK_FAILED: u8 = b'e';
/// Server → host: a worker ended (+ pid + wait status); it stays unreaped until released.
pub(crate) const EXITED: u8 = b'x';

/// The control socket: the server's stdin.
const CONTROL: RawFd = 0;

/// A connected pair of `SOCK_SEQPACKET` sockets, close-on-exec.
pub(crate) fn socket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
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
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) })
}

/// Largest packet either side sends.
pub(crate) const MAX_PACKET: usize = 512;

/// Sends one packet with descriptors attached (`SCM_RIGHTS`). Never raises `SIGPIPE`; with
/// `wait` false, fails with `WouldBlock` instead of waiting for room in the socket.
pub(crate) fn send_packet(
    socket: RawFd,
    data: &[u8],
    fds: &[RawFd],
    wait: bool,
) -> std::io::Result<()> {
    let flags = if wait {
        libc::MSG_NOSIGNAL
    } else {
        libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT
    };
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let fd_bytes = std::mem::size_of_val(fds);
    // SAFETY: CMSG_SPACE computes a size from an integer.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes as u32) } as usize;
    // u64 elements keep the buffer aligned for `cmsghdr`.
    let mut control = vec![0u64; space.div_ceil(8).max(1)];
    // SAFETY: zeroed `msghdr` is a valid empty header; every pointer set below points to a
    // live local that outlives the `sendmsg` call.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    if !fds.is_empty() {
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = space as _;
        // SAFETY: the control buffer holds `space` bytes, room for one header with `fds`.
        unsafe {
            let header = libc::CMSG_FIRSTHDR(&message);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN(fd_bytes as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(header).cast::<RawFd>(),
                fds.len(),
            );
        }
    }
    loop {
        // SAFETY: `message` is fully initialised above.
        let sent = unsafe { libc::sendmsg(socket, &message, flags) };
        if sent >= 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

/// Receives one packet into `buffer`: its length (0 when the other side closed) and the
/// descriptors attached to it (close-on-exec), at most `max_fds`; more are closed.
pub(crate) fn receive_packet(
    socket: RawFd,
    buffer: &mut [u8],
    max_fds: usize,
) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // Room for a few more than expected, so extra descriptors are received and closed.
    let most = max_fds + 4;
    // SAFETY: CMSG_SPACE computes a size from an integer.
    let space = unsafe { libc::CMSG_SPACE((most * std::mem::size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    // SAFETY: as in `send_packet`.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = space as _;
    let received = loop {
        // SAFETY: `message` points at live buffers of the sizes it states.
        let n = unsafe { libc::recvmsg(socket, &mut message, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled the control buffer; the CMSG macros walk it within
    // `msg_controllen`, and each SCM_RIGHTS payload is an array of descriptors now ours.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(header).cast::<RawFd>();
                let payload = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..payload / std::mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            header = libc::CMSG_NXTHDR(&message, header);
        }
    }
    // Extra descriptors close as they drop.
    fds.truncate(max_fds);
    if message.msg_flags & libc::MSG_CTRUNC != 0 {
        // Descriptors were lost (the process is out of them): the packet is not whole.
        fds.clear();
    }
    if message.msg_flags & libc::MSG_TRUNC != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "a fork-server packet was too long",
        ));
    }
    Ok((received, fds))
}

/// A worker the server forked.
struct Forked {
    pid: libc::pid_t,
    /// Readable once the worker has ended.
    pidfd: OwnedFd,
    /// Its end was sent to the host.
    reported: bool,
    /// The host let it go: reap it as soon as it ends.
    released: bool,
}

/// Runs the fork server; returns the process's exit code.
pub(crate) fn serve(config_json: &str) -> i32 {
    let config: EngineConfig = match serde_json::from_str(config_json) {
        Ok(config) => config,
        Err(e) => return failed(&format!("bad fork-server configuration: {e}")),
    };
    let host = crate::os::parent_pid();
    if let Err(e) = crate::os::close_inherited_descriptors() {
        return failed(&format!("close_range failed: {e}"));
    }
    // The workers need pidfds (Linux 5.3): ask for one of our own to know.
    if let Err(e) = pidfd_open(std::process::id() as libc::pid_t) {
        return failed(&format!("pidfd_open is not available: {e}"));
    }
    // The engine is built and the workers fork on a thread with the program's stack size.
    let thread = std::thread::Builder::new()
        .name("codemode".to_owned())
        .stack_size(config.stack_bytes)
        .spawn(move || serve_forks(&config, host));
    match thread.map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        Ok(Err(_)) => failed("the fork server failed"),
        Err(e) => failed(&format!("cannot start the fork server's thread: {e}")),
    }
}

fn failed(reason: &str) -> i32 {
    let mut packet = vec![FAILED];
    packet.extend_from_slice(crate::tool::clip(reason, 400).as_bytes());
    let _ = send_packet(CONTROL, &packet, &[], true);
    2
}

/// A pidfd for process `pid`: signals through it reach that process and no other, and it reads
/// as ready once the process has ended.
pub(crate) fn pidfd_open(pid: libc::pid_t) -> std::io::Result<OwnedFd> {
    // SAFETY: `pidfd_open` takes plain integers and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just returned to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn serve_forks(config: &EngineConfig, host: u32) -> i32 {
    crate::engine::warm_up(config);
    let mut engine = match Engine::new(config) {
        Ok(engine) => engine,
        Err(error) => return failed(error.message()),
    };
    // Forking is safe while the only other thread is the main one, parked in `join`: should
    // the engine or a library ever start one of its own, refuse to serve (the host then
    // executes workers) instead of forking a copy that could deadlock on its lock.
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, Iterator::count);
    if threads != 2 {
        return failed(&format!(
            "the fork server runs {threads} threads; it forks only with two"
        ));
    }
    if send_packet(CONTROL, &[READY], &[], true).is_err() {
        return 0;
    }
    let mut workers: Vec<Forked> = Vec::new();
    let mut buffer = [0u8; MAX_PACKET];
    loop {
        // Workers released and reaped are forgotten (a release or an end since the last turn).
        workers.retain(|w| !(w.released && w.reported));
        let mut polled = vec![libc::pollfd {
            fd: CONTROL,
            events: libc::POLLIN,
            revents: 0,
        }];
        let watched: Vec<usize> = (0..workers.len())
            .filter(|&i| !workers[i].reported || workers[i].released)
            .collect();
        polled.extend(watched.iter().map(|&i| libc::pollfd {
            fd: workers[i].pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: `polled` is a live array of `pollfd` of the length given.
        let ready = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, 50) };
        // The host is gone (killed without closing anything): so is the server, and its
        // workers notice they were orphaned.
        if crate::os::parent_pid() != host {
            return 0;
        }
        if ready <= 0 {
            continue;
        }
        for (slot, &i) in watched.iter().enumerate() {
            if polled[slot + 1].revents != 0 {
                ended(&mut workers[i]);
            }
        }
        let control = polled[0].revents;
        if control & libc::POLLIN != 0 {
            match receive_packet(CONTROL, &mut buffer, 3) {
                Ok((0, _)) | Err(_) => return 0,
                Ok((n, fds)) => match buffer[..n] {
                    [FORK, a, b, c, d] => {
                        let id = [a, b, c, d];
                        if fds.len() != 3 {
                            // Not all descriptors arrived (out of descriptors): this fork
                            // fails, the server serves on.
                            if !answer(FORK_FAILED, id, libc::EMFILE.to_le_bytes()) {
                                return 0;
                            }
                            continue;
                        }
                        match fork(&mut engine, config, fds, id) {
                            Ok(Some(worker)) => workers.push(worker),
                            Ok(None) => {}
                            // The host cannot hear the answer: it is gone.
                            Err(()) => return 0,
                        }
                    }
                    [RELEASE, a, b, c, d] => {
                        let pid = u32::from_le_bytes([a, b, c, d]) as libc::pid_t;
                        if let Some(worker) = workers.iter_mut().find(|w| w.pid == pid) {
                            release(worker);
                        }
                    }
                    // A host that speaks another protocol: nothing to serve.
                    _ => return 2,
                },
            }
        } else if control & (libc::POLLHUP | libc::POLLERR) != 0 {
            return 0;
        }
    }
}

/// Sends the answer to fork request `id`; false when the host cannot be reached.
fn answer(kind: u8, id: [u8; 4], value: [u8; 4]) -> bool {
    let mut packet = vec![kind];
    packet.extend_from_slice(&id);
    packet.extend_from_slice(&value);
    send_packet(CONTROL, &packet, &[], true).is_ok()
}

/// Forks one worker with `fds` as its stdin, stdout and stderr and tells the host which pid,
/// or why not. `Err` when the host cannot be told (the worker, if any, is gone again).
fn fork(
    engine: &mut Engine,
    config: &EngineConfig,
    fds: Vec<OwnedFd>,
    id: [u8; 4],
) -> Result<Option<Forked>, ()> {
    let server = std::process::id() as libc::pid_t;
    // SAFETY: this process runs one thread besides a main thread parked in `join`, which holds
    // no lock; the child continues on this thread alone and never returns from `worker`.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        worker(engine, config, &fds, server);
    }
    drop(fds);
    if pid < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return if answer(FORK_FAILED, id, errno.to_le_bytes()) {
            Ok(None)
        } else {
            Err(())
        };
    }
    let kill = || {
        // SAFETY: plain integers; the child is ours and unreaped.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
    };
    let pidfd = match pidfd_open(pid) {
        Ok(fd) => fd,
        Err(e) => {
            kill();
            let errno = e.raw_os_error().unwrap_or(0);
            return if answer(FORK_FAILED, id, errno.to_le_bytes()) {
                Ok(None)
            } else {
                Err(())
            };
        }
    };
    if !answer(FORKED, id, (pid as u32).to_le_bytes()) {
        kill();
        return Err(());
    }
    Ok(Some(Forked {
        pid,
        pidfd,
        reported: false,
        released: false,
    }))
}

/// The forked worker: its pipes become stdin, stdout and stderr, it leads a process group of
/// its own, confines itself and serves one program on the engine it was forked with. Never
/// returns into the server's code, not even by a panic.
fn worker(engine: &mut Engine, config: &EngineConfig, fds: &[OwnedFd], server: libc::pid_t) -> ! {
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for (target, fd) in fds.iter().enumerate() {
            // SAFETY: `dup2` onto 0, 1 and 2; the received descriptors are all 3 or above.
            if unsafe { libc::dup2(fd.as_raw_fd(), target as RawFd) } < 0 {
                return 2;
            }
        }
        // The server's own descriptors (its socket, the received originals, the other
        // workers' pidfds) go now: the worker's report then says what it holds (descriptors
        // the host passed were closed by the server when it started).
        let _ = crate::os::close_inherited_descriptors();
        // SAFETY: plain calls: the parent's pid, and a new process group led by this process.
        unsafe {
            // The server died since it forked: nobody would notice this worker end.
            if libc::getppid() != server {
                return 2;
            }
            libc::setpgid(0, 0);
        }
        // The pages a program writes made its own before the program comes (see there).
        crate::engine::touch_engine_pages(config);
        crate::worker::serve_forked(config, engine, server as u32)
    }));
    // SAFETY: ends this process without running the server's code or destructors.
    unsafe { libc::_exit(served.unwrap_or(3)) }
}

/// Notes that a worker ended: tells the host (once), and reaps it if the host let it go.
fn ended(worker: &mut Forked) {
    // SAFETY: a zeroed `siginfo_t` is valid; `waitid` writes it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: plain integers and a pointer to a live local.
    let rc = unsafe { libc::waitid(libc::P_PID, worker.pid as libc::id_t, &mut info, flags) };
    // SAFETY: `si_pid` reads the field `waitid` set (0 while the worker still runs).
    if rc != 0 || unsafe { info.si_pid() } == 0 {
        return;
    }
    if worker.released {
        // The host let it go: nobody waits for its status.
        reap(worker.pid);
        worker.reported = true;
        return;
    }
    if !worker.reported {
        worker.reported = true;
        let mut packet = vec![EXITED];
        packet.extend_from_slice(&(worker.pid as u32).to_le_bytes());
        // SAFETY: `waitid` set `si_status` for the ended child.
        let status = wait_status(info.si_code, unsafe { info.si_status() });
        packet.extend_from_slice(&status.to_le_bytes());
        let _ = send_packet(CONTROL, &packet, &[], true);
    }
}

/// The host is done with a worker: kill it if it still runs, reap it once it ended.
fn release(worker: &mut Forked) {
    worker.released = true;
    // SAFETY: the worker is unreaped, so its pid (and group id) are still its own.
    unsafe {
        libc::kill(-worker.pid, libc::SIGKILL);
        libc::kill(worker.pid, libc::SIGKILL);
    }
    if worker.reported {
        // It ended before; its status went to the host.
        reap(worker.pid);
    } else {
        // Ended just now (reaped here), or dying: the next poll of its pidfd reaps it.
        ended(worker);
    }
}

fn reap(pid: libc::pid_t) {
    // SAFETY: plain integers; the worker has ended, so this does not block.
    unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) };
}

/// `waitid`'s answer (`si_code`, `si_status`) in the form `waitpid` gives (what
/// `ExitStatus::from_raw` reads).
fn wait_status(code: i32, status: i32) -> i32 {
    match code {
        libc::CLD_EXITED => (status & 0xff) << 8,
        libc::CLD_DUMPED => (status & 0x7f) | 0x80,
        _ => status & 0x7f,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_and_its_descriptors_cross_the_socket() {
        let (a, b) = socket_pair().expect("a socket pair");
        let (reader, writer) = std::io::pipe().expect("a pipe");
        let writer: OwnedFd = writer.into();
        send_packet(
            a.as_raw_fd(),
            &[FORK],
            &[writer.as_raw_fd(), writer.as_raw_fd()],
            false,
        )
        .expect("sent");
        drop(writer);
        let mut buffer = [0u8; MAX_PACKET];
        // Two came, one is kept: the other is closed.
        let (n, fds) = receive_packet(b.as_raw_fd(), &mut buffer, 1).expect("received");
        assert_eq!(&buffer[..n], &[FORK]);
        assert_eq!(fds.len(), 1);
        let mut writer = std::fs::File::from(fds.into_iter().next().expect("one"));
        std::io::Write::write_all(&mut writer, b"through").expect("written");
        drop(writer);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut { reader }, &mut text).expect("read");
        assert_eq!(text, "through", "the descriptor is the pipe's write end");
        drop(a);
        let (n, fds) = receive_packet(b.as_raw_fd(), &mut buffer, 3).expect("end");
        assert_eq!(
            (n, fds.len()),
            (0, 0),
            "a closed socket reads as end of input"
        );
    }

    #[test]
    fn wait_statuses_read_as_waitpid_would_give_them() {
        use std::os::unix::process::ExitStatusExt as _;
        let status = |code, value| std::process::ExitStatus::from_raw(wait_status(code, value));
        assert_eq!(status(libc::CLD_EXITED, 3).code(), Some(3));
        assert_eq!(
            status(libc::CLD_KILLED, libc::SIGXCPU).signal(),
            Some(libc::SIGXCPU)
        );
        let dumped = status(libc::CLD_DUMPED, libc::SIGSEGV);
        assert_eq!(dumped.signal(), Some(libc::SIGSEGV));
        assert!(dumped.core_dumped());
    }
}
