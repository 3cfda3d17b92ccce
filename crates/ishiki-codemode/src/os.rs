//! Operating-system limits a worker puts on itself before it runs untrusted code (SEC-1).
//!
//! The worker calls this first thing, so the limits hold however it was started and whatever
//! the program does later: `RLIMIT_AS` caps memory (an allocation past it aborts the worker,
//! which the host reports as a memory error), `RLIMIT_CPU` ends a spin the host stopped
//! watching, and `RLIMIT_CORE = 0` keeps crashed workers from writing core files.
//! It also sets `no_new_privs` for [`crate::confine`].
//! This is the crate's only `unsafe`: calls into libc.
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

/// Whether `no_new_privs` is set for this thread.
#[cfg(all(test, target_os = "linux"))]
pub(crate) fn no_new_privs() -> bool {
    // SAFETY: `prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)` takes plain integers and touches no memory.
    unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 }
}
