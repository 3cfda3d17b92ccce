//! Operating-system limits a worker puts on itself before it runs untrusted code (SEC-1).
//!
//! The worker calls this first thing, so the limits hold however it was started and whatever
//! the program does later: `RLIMIT_AS` caps memory (an allocation past it aborts the worker,
//! which the host reports as a memory error), `RLIMIT_CPU` ends a spin the host stopped
//! watching, and `RLIMIT_CORE = 0` keeps crashed workers from writing core files.
//! It also closes inherited descriptors, drops capabilities and sets `no_new_privs` for
//! [`crate::confine`]. With the confinement probe (`probe.rs`), this is the crate's only
//! `unsafe`: calls into libc.
#![allow(unsafe_code)]

/// Applies the worker's resource limits to the current process.
#[cfg(unix)]
pub(crate) fn apply_limits(memory_bytes: u64, cpu_seconds: u64) -> Result<(), String> {
    lower(libc::RLIMIT_CORE, 0, 0).map_err(|e| format!("RLIMIT_CORE: {e}"))?;
    lower(libc::RLIMIT_AS, memory_bytes, memory_bytes).map_err(|e| format!("RLIMIT_AS: {e}"))?;
    // Soft limit: SIGXCPU; one second later the hard limit sends SIGKILL.
    lower(
        libc::RLIMIT_CPU,
        cpu_seconds.max(1),
        cpu_seconds.max(1).saturating_add(1),
    )
    .map_err(|e| format!("RLIMIT_CPU: {e}"))
}

/// Without `setrlimit` only the host's wall-clock kill applies.
#[cfg(not(unix))]
pub(crate) fn apply_limits(_memory_bytes: u64, _cpu_seconds: u64) -> Result<(), String> {
    Ok(())
}

#[cfg(all(unix, target_os = "linux", target_env = "gnu"))]
type Resource = libc::__rlimit_resource_t;
#[cfg(all(unix, not(all(target_os = "linux", target_env = "gnu"))))]
type Resource = libc::c_int;

/// Sets a limit no higher than the one already in force (raising it would need privileges).
#[cfg(unix)]
fn lower(resource: Resource, soft: u64, hard: u64) -> std::io::Result<()> {
    let mut current = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes one `rlimit` through the pointer, which points to a live,
    // properly aligned local.
    if unsafe { libc::getrlimit(resource, &mut current) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let max = current.rlim_max.min(hard as libc::rlim_t);
    let wanted = libc::rlimit {
        rlim_cur: (soft as libc::rlim_t).min(max),
        rlim_max: max,
    };
    // SAFETY: `setrlimit` only reads the `rlimit` behind the pointer, a live local.
    if unsafe { libc::setrlimit(resource, &wanted) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sets `PR_SET_NO_NEW_PRIVS` for this thread and the threads and processes it starts.
#[cfg(target_os = "linux")]
pub(crate) fn set_no_new_privs() -> std::io::Result<()> {
    // SAFETY: `prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)` takes plain integers and touches no memory.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Without `prctl` there is nothing to set.
#[cfg(not(target_os = "linux"))]
pub(crate) fn set_no_new_privs() -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "no_new_privs exists on Linux only",
    ))
}

/// The lowest descriptor a worker does not need: stdin, stdout and stderr carry its protocol.
pub(crate) const FIRST_UNUSED_FD: u32 = 3;

/// Closes every descriptor from [`FIRST_UNUSED_FD`] up. A host started with a descriptor open
/// without `CLOEXEC` (`ishiki scenario run … 8<secret`) passes it to every child it starts;
/// the worker must hold nothing but its pipes. Returns how many were open.
#[cfg(target_os = "linux")]
pub(crate) fn close_inherited_descriptors() -> std::io::Result<usize> {
    let open = open_descriptors_above_protocol();
    // SAFETY: `close_range` takes plain integers; closing descriptors this process does not
    // use (nothing has run before the worker's first line) cannot invalidate any Rust object.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, FIRST_UNUSED_FD, u32::MAX, 0u32) };
    if rc == 0 {
        return Ok(open);
    }
    let error = std::io::Error::last_os_error();
    if error.raw_os_error() != Some(libc::ENOSYS) {
        return Err(error);
    }
    // Before Linux 5.9: close one by one up to the descriptor limit.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes one `rlimit` through a pointer to a live local.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let last = i32::try_from(limit.rlim_cur).unwrap_or(i32::MAX);
    for fd in FIRST_UNUSED_FD as i32..last {
        // SAFETY: as above; EBADF for descriptors that are not open is expected.
        unsafe { libc::close(fd) };
    }
    Ok(open)
}

/// How many descriptors from [`FIRST_UNUSED_FD`] up are open (for the report).
#[cfg(target_os = "linux")]
pub(crate) fn open_descriptors_above_protocol() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
                .filter(|fd| *fd >= FIRST_UNUSED_FD)
                .count()
        })
        // Reading the directory opened one descriptor of its own.
        .map_or(0, |n| n.saturating_sub(1))
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn close_inherited_descriptors() -> std::io::Result<usize> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "close_range exists on Linux only",
    ))
}

/// `capset`'s header (`struct __user_cap_header_struct`).
#[cfg(target_os = "linux")]
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `capset`'s data, one per 32 capabilities (`struct __user_cap_data_struct`).
#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit capability sets in two `CapData`.
#[cfg(target_os = "linux")]
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Drops every capability for good: the ambient set, the bounding set (so not even an exec as
/// root could regain one) and the effective, permitted and inheritable sets. A worker started
/// as root otherwise keeps every root capability (`CAP_SYS_BOOT`, `CAP_SYS_ADMIN`,
/// `CAP_SYS_RESOURCE`, …). Says what it dropped.
#[cfg(target_os = "linux")]
pub(crate) fn drop_capabilities() -> std::io::Result<String> {
    // SAFETY (all `prctl` calls here): plain integer arguments, no memory is touched.
    // EINVAL: a kernel before 4.3 has no ambient set, so there is nothing to clear.
    if unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    } != 0
    {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINVAL) {
            return Err(error);
        }
    }
    let had_any = capabilities_held();
    let mut bounding = 0;
    let mut kept_bounding = false;
    for cap in 0..64 {
        // EINVAL: past the last capability this kernel knows.
        match unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) } {
            0 => continue,
            1 => {}
            _ => break,
        }
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } == 0 {
            bounding += 1;
            continue;
        }
        let error = std::io::Error::last_os_error();
        // Dropping needs CAP_SETPCAP. A process without it that holds no capability at all
        // (an ordinary user) can only regain some by exec, which no_new_privs and seccomp stop.
        if error.raw_os_error() == Some(libc::EPERM) && !had_any {
            kept_bounding = true;
            break;
        }
        return Err(error);
    }
    let header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: `capset` reads one header and two data structs, all live locals of the layout
    // the kernel's version 3 expects.
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if capabilities_held() {
        return Err(std::io::Error::other("capabilities remain after capset"));
    }
    Ok(if kept_bounding {
        "none held (started without capabilities; the bounding set stays, exec is refused)"
            .to_owned()
    } else if had_any {
        format!("every capability dropped (root's too), {bounding} from the bounding set")
    } else {
        format!("none held, {bounding} dropped from the bounding set")
    })
}

/// Whether this thread holds any capability in its effective, permitted or inheritable set.
#[cfg(target_os = "linux")]
pub(crate) fn capabilities_held() -> bool {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: `capget` writes the header's version and two data structs, all live locals.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
        return true;
    }
    data.iter()
        .any(|d| d.effective != 0 || d.permitted != 0 || d.inheritable != 0)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn drop_capabilities() -> std::io::Result<String> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "capabilities exist on Linux only",
    ))
}

/// Whether this process leads its own process group (the host starts it so, and kills the
/// group: anything the worker could have started dies with it).
#[cfg(unix)]
pub(crate) fn leads_its_process_group() -> bool {
    // SAFETY: `getpgid(0)` and `getpid()` take and return plain integers.
    unsafe { libc::getpgid(0) == libc::getpid() }
}

#[cfg(not(unix))]
pub(crate) fn leads_its_process_group() -> bool {
    false
}

/// Sends SIGKILL to the process group `pgid` (a worker and anything it started).
#[cfg(unix)]
pub(crate) fn kill_process_group(pgid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    // Never 0 or 1: `kill(-0)` is our own group and `kill(-1)` every process we may signal.
    if pgid > 1 {
        // SAFETY: `kill` takes plain integers; ESRCH (the group is gone) is fine.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

#[cfg(not(unix))]
pub(crate) fn kill_process_group(_pgid: u32) {}

/// The parent process's id (the host), as the worker sees it now.
#[cfg(unix)]
pub(crate) fn parent_pid() -> u32 {
    // SAFETY: `getppid` takes nothing and cannot fail.
    let pid = unsafe { libc::getppid() };
    u32::try_from(pid).unwrap_or(0)
}

/// The host's pid for [`orphan_watch`], set once before the thread starts.
#[cfg(unix)]
static PARENT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The orphan watch's thread body: plain system calls only. A Rust thread would register its
/// thread-local destructors with a `malloc`, and a first `malloc` on a new thread reserves a
/// 64 MiB arena, counted against the program's `RLIMIT_AS`.
#[cfg(unix)]
extern "C" fn orphan_watch(_: *mut libc::c_void) -> *mut libc::c_void {
    let parent = PARENT.load(std::sync::atomic::Ordering::SeqCst);
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 50_000_000,
    };
    loop {
        // SAFETY: `nanosleep` reads the timespec on our stack; a null remainder is allowed.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
        if parent_pid() != parent {
            // SAFETY: `_exit` ends the process without running anything else.
            unsafe { libc::_exit(137) };
        }
    }
}

/// Starts a thread that ends the worker at once when its parent is gone (the worker is
/// reparented, so `getppid` changes): a host killed by a signal runs no cleanup, and a
/// program busy in JavaScript reads no pipe that would tell it, so without this it ran on
/// until its CPU limit. Checked every 50 ms.
#[cfg(unix)]
pub(crate) fn exit_when_orphaned(parent: u32) {
    PARENT.store(parent, std::sync::atomic::Ordering::SeqCst);
    // SAFETY: plain pthread calls on values owned here; the thread runs `orphan_watch`, which
    // takes no argument and never returns. Without the thread (an error) the host's own kill
    // still ends the worker, as before.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_attr_init(&mut attr) != 0 {
            return;
        }
        libc::pthread_attr_setstacksize(&mut attr, 64 << 10);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let mut thread: libc::pthread_t = std::mem::zeroed();
        libc::pthread_create(&mut thread, &attr, orphan_watch, std::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
    }
}

#[cfg(not(unix))]
pub(crate) fn parent_pid() -> u32 {
    0
}

#[cfg(not(unix))]
pub(crate) fn exit_when_orphaned(_parent: u32) {}

/// Installs a compiled seccomp filter on every thread of the process (`TSYNC`). Not
/// `seccompiler::apply_filter_all_threads`: that calls `prctl(PR_SET_NO_NEW_PRIVS)` before each
/// filter, which the allow-list installed first refuses; `no_new_privs` is set already.
#[cfg(target_os = "linux")]
pub(crate) fn install_seccomp_filter(program: &[seccompiler::sock_filter]) -> std::io::Result<()> {
    /// `struct sock_fprog`.
    #[repr(C)]
    struct Program {
        len: libc::c_ushort,
        filter: *const seccompiler::sock_filter,
    }
    let len = libc::c_ushort::try_from(program.len())
        .map_err(|_| std::io::Error::other("the seccomp filter is too long"))?;
    let fprog = Program {
        len,
        filter: program.as_ptr(),
    };
    // SAFETY: the kernel copies `len` instructions from `filter`, which points into the live
    // slice `program`; `fprog` lives across the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &fprog,
        )
    };
    match rc {
        0 => Ok(()),
        // TSYNC names the thread that could not be synchronised.
        tid if tid > 0 => Err(std::io::Error::other(format!(
            "thread {tid} could not take the filter"
        ))),
        _ => Err(std::io::Error::last_os_error()),
    }
}
