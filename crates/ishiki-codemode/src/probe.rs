//! The confinement probe: a process that starts exactly as a worker does
//! ([`crate::confine::start_up`]) and then, on a thread like the engine's, tries what a program
//! that escaped the engine would — each call of the attack list in the module's test — and
//! prints one line per attempt: `attempt NAME: allowed (RET)` or `attempt NAME: refused
//! (ERRNO)`. The `ishiki-codemode-probe` binary runs it for the test suite
//! (`tests/suite/confinement.rs`), so a change that loosens any layer fails a test. It runs no
//! JavaScript and serves no host: it only reports.
//!
//! Arguments: a file it may try to change, a directory it may try to watch, and the pid of
//! another process whose limits and priority it may try to change (the test gives a `sleep`
//! it started: harmless should the attempt succeed). Descriptor 8, when the test opens it
//! without `CLOEXEC`, is the inherited secret it tries to read.
#![allow(unsafe_code)]

/// Runs the probe and exits. Not part of the API: public only so the probe binary can call it.
#[doc(hidden)]
pub fn run_confinement_probe() -> ! {
    use std::io::Write;
    let config = crate::config::EngineConfig::from_config(&crate::SandboxConfig::default());
    let report = match crate::confine::start_up(config.memory_bytes, config.cpu_seconds) {
        Ok(report) => report,
        Err(e) => {
            let _ = writeln!(std::io::stdout(), "start-up failed: {e}");
            std::process::exit(2);
        }
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut text = String::new();
    for layer in &report.layers {
        text.push_str(&format!(
            "layer {}: {} ({})\n",
            layer.name,
            if layer.enforced {
                "enforced"
            } else {
                "not enforced"
            },
            layer.detail
        ));
    }
    // On a thread, as a program runs: threads must still start, and every layer must hold
    // for them too.
    let attempts = std::thread::Builder::new()
        .name("codemode".to_owned())
        .spawn(move || attempts(&args))
        .map(|thread| {
            thread
                .join()
                .unwrap_or_else(|_| "attempts panicked\n".to_owned())
        })
        .unwrap_or_else(|e| format!("cannot start a thread: {e}\n"));
    text.push_str(&attempts);
    let _ = std::io::stdout().write_all(text.as_bytes());
    let _ = std::io::stdout().flush();
    std::process::exit(0);
}

#[cfg(not(target_os = "linux"))]
fn attempts(_args: &[String]) -> String {
    "attempts exist on Linux only\n".to_owned()
}

/// Each attempt: a name and the raw return value with `errno`.
#[cfg(target_os = "linux")]
fn attempts(args: &[String]) -> String {
    use std::ffi::CString;
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let c = |text: &str| CString::new(text).unwrap_or_default();
    let file = c(&arg(0));
    let dir = c(&arg(1));
    let target: libc::pid_t = arg(2).parse().unwrap_or(0);
    let shadow = c("/etc/shadow");
    let missing = c("/nonexistent/ishiki-probe");
    let name = c("user.ishiki");
    let mut out = String::new();
    let mut record = |name: &str, ret: libc::c_long| {
        let line = if ret < 0 {
            let error = std::io::Error::last_os_error();
            format!(
                "attempt {name}: refused ({})\n",
                errno_name(error.raw_os_error().unwrap_or(0))
            )
        } else {
            format!("attempt {name}: allowed ({ret})\n")
        };
        out.push_str(&line);
    };
    // SAFETY (every call below): the pointers are to live `CString`s and locals of the types
    // the kernel expects; integer arguments are plain. Calls that succeed change nothing that
    // matters (see the module docs), except `fork`/`clone3`, whose children exit at once.
    unsafe {
        let at = libc::AT_FDCWD;
        record(
            "fchmodat",
            libc::fchmodat(at, file.as_ptr(), 0o777, 0) as libc::c_long,
        );
        record(
            "fchmodat2",
            libc::syscall(libc::SYS_fchmodat2, at, file.as_ptr(), 0o777, 0),
        );
        record(
            "utimensat",
            libc::utimensat(at, file.as_ptr(), std::ptr::null(), 0) as libc::c_long,
        );
        record(
            "setxattr",
            libc::setxattr(file.as_ptr(), name.as_ptr(), c"x".as_ptr().cast(), 1, 0)
                as libc::c_long,
        );
        let mut value = [0u8; 16];
        record(
            "getxattr",
            libc::getxattr(
                file.as_ptr(),
                name.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            ) as libc::c_long,
        );
        let mut statx: libc::statx = std::mem::zeroed();
        record(
            "statx /etc/shadow",
            libc::statx(at, shadow.as_ptr(), 0, libc::STATX_BASIC_STATS, &mut statx)
                as libc::c_long,
        );
        let mut stat: libc::stat = std::mem::zeroed();
        record(
            "newfstatat /etc/shadow",
            libc::fstatat(at, shadow.as_ptr(), &mut stat, 0) as libc::c_long,
        );
        let inotify = libc::inotify_init1(0);
        record("inotify_init1", inotify as libc::c_long);
        record(
            "inotify_add_watch",
            libc::inotify_add_watch(inotify, dir.as_ptr(), libc::IN_ALL_EVENTS) as libc::c_long,
        );
        let mut limit = libc::rlimit64 {
            rlim_cur: 0,
            rlim_max: 0,
        };
        record(
            "prlimit64 on another process",
            libc::prlimit64(target, libc::RLIMIT_NOFILE, std::ptr::null(), &mut limit)
                as libc::c_long,
        );
        record(
            "setpriority on another process",
            libc::setpriority(libc::PRIO_PROCESS, target as libc::id_t, 19) as libc::c_long,
        );
        record(
            "kill another process",
            libc::kill(target, 0) as libc::c_long,
        );
        // Bad magic numbers and lengths: past the capability check these fail with EINVAL
        // or ENOENT, so a pass shows as a different refusal, and nothing changes either way.
        record(
            "reboot (capability check)",
            libc::syscall(libc::SYS_reboot, 0, 0, 0, std::ptr::null::<u8>()),
        );
        record(
            "sethostname (capability check)",
            libc::syscall(libc::SYS_sethostname, c"x".as_ptr(), 100_000),
        );
        record(
            "acct (capability check)",
            libc::acct(missing.as_ptr()) as libc::c_long,
        );
        record(
            "swapoff (capability check)",
            libc::swapoff(missing.as_ptr()) as libc::c_long,
        );
        let child = libc::fork();
        if child == 0 {
            // A child that would outlive the worker, were it allowed to exist.
            libc::sleep(5);
            libc::_exit(0);
        }
        record("fork", child as libc::c_long);
        let mut clone_args = [0u64; 11];
        // `struct clone_args`: flags 0, exit_signal SIGCHLD: a plain fork.
        clone_args[4] = libc::SIGCHLD as u64;
        let cloned = libc::syscall(
            libc::SYS_clone3,
            clone_args.as_mut_ptr(),
            std::mem::size_of_val(&clone_args),
        );
        if cloned == 0 {
            libc::_exit(0);
        }
        record("clone3 of a process", cloned);
        let mut buffer = [0u8; 64];
        record(
            "read an inherited descriptor",
            libc::read(8, buffer.as_mut_ptr().cast(), buffer.len()) as libc::c_long,
        );
        record(
            "open",
            libc::open(file.as_ptr(), libc::O_RDONLY) as libc::c_long,
        );
        record(
            "socket",
            libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) as libc::c_long,
        );
        let argv = [c"/bin/true".as_ptr(), std::ptr::null()];
        record(
            "execve",
            libc::execve(c"/bin/true".as_ptr(), argv.as_ptr(), std::ptr::null()) as libc::c_long,
        );
    }
    out
}

#[cfg(target_os = "linux")]
fn errno_name(errno: i32) -> String {
    match errno {
        libc::EPERM => "EPERM".to_owned(),
        libc::EACCES => "EACCES".to_owned(),
        libc::ENOSYS => "ENOSYS".to_owned(),
        libc::EBADF => "EBADF".to_owned(),
        libc::EINVAL => "EINVAL".to_owned(),
        libc::ENOENT => "ENOENT".to_owned(),
        libc::ESRCH => "ESRCH".to_owned(),
        other => format!("errno {other}"),
    }
}
