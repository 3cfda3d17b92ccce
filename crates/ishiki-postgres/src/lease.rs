//! One writer per conversation: the lease row (`ishiki_leases`, expiry and fencing token) a
//! store takes when it opens, refusing, waiting or taking over while another runtime holds it.

use std::time::{Duration, Instant};

use ishiki_store::{StoreError, StoreErrorKind};
use postgres::Client;

use crate::{PostgresOptions, WhenHeld, db};

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "an unknown host".to_owned())
}

/// `process <pid> on <host>`: enough for an operator to find the holder among machines, and
/// for a later opener on the same host to see that the holder is gone.
pub(crate) fn default_holder() -> String {
    format!("process {} on {}", std::process::id(), host_name())
}

/// Whether `holder` (a [`default_holder`] string) names a process of this host that no longer
/// runs: a runtime killed mid-step (or by a database crash) whose lease has not expired yet.
/// Only a live `/proc` says so; any other holder (another host, a custom name) is alive.
pub(crate) fn holder_is_gone(holder: &str, this_host: &str) -> bool {
    let Some(rest) = holder.strip_prefix("process ") else {
        return false;
    };
    let Some((pid, host)) = rest.split_once(" on ") else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    if host != this_host || this_host == "an unknown host" || pid == std::process::id() {
        return false;
    }
    let proc = std::path::Path::new("/proc");
    // Without procfs nothing can be told; a live pid could also be a reused one, which errs
    // on the side of waiting.
    proc.join("self").exists() && !proc.join(pid.to_string()).exists()
}

/// Takes the lease of `conversation`, or says who holds it. Returns the new fencing token.
pub(crate) fn acquire(
    client: &mut Client,
    conversation: &str,
    options: &PostgresOptions,
    lease_secs: f64,
) -> Result<i64, StoreError> {
    let started = Instant::now();
    loop {
        let mut tx = client.transaction().map_err(db("cannot take the lease"))?;
        tx.execute(
            "INSERT INTO ishiki_leases (conversation, token, holder, expires_at)
             VALUES ($1, 0, '', '-infinity') ON CONFLICT (conversation) DO NOTHING",
            &[&conversation],
        )
        .map_err(db("cannot take the lease"))?;
        let row = tx
            .query_one(
                "SELECT holder, expires_at > now(), expires_at::text FROM ishiki_leases
                 WHERE conversation = $1 FOR UPDATE",
                &[&conversation],
            )
            .map_err(db("cannot take the lease"))?;
        let holder: String = row.try_get(0).map_err(db("cannot read the lease"))?;
        let live: bool = row.try_get(1).map_err(db("cannot read the lease"))?;
        let until: String = row.try_get(2).map_err(db("cannot read the lease"))?;
        let gone = live && holder_is_gone(&holder, &host_name());
        if !live || gone || options.when_held == WhenHeld::TakeOver {
            let row = tx
                .query_one(
                    "UPDATE ishiki_leases
                     SET token = token + 1, holder = $2,
                         expires_at = now() + make_interval(secs => $3)
                     WHERE conversation = $1 RETURNING token",
                    &[&conversation, &options.holder, &lease_secs],
                )
                .map_err(db("cannot take the lease"))?;
            let token: i64 = row.try_get(0).map_err(db("cannot take the lease"))?;
            tx.commit().map_err(db("cannot take the lease"))?;
            return Ok(token);
        }
        tx.rollback().map_err(db("cannot take the lease"))?;
        let waited = started.elapsed();
        match options.when_held {
            WhenHeld::Wait(limit) if waited < limit => {
                std::thread::sleep(Duration::from_millis(100).min(limit - waited));
            }
            WhenHeld::Wait(limit) => {
                return Err(StoreError::new(
                    StoreErrorKind::Lease,
                    format!(
                        "conversation `{conversation}` is still held by another runtime ({holder}, lease until {until}) after waiting {} s",
                        limit.as_secs_f64()
                    ),
                ));
            }
            _ => {
                return Err(StoreError::new(
                    StoreErrorKind::Lease,
                    format!(
                        "conversation `{conversation}` is held by another runtime ({holder}, lease until {until}); one writer per conversation: wait for it, or once that runtime is gone take the lease over (WhenHeld::TakeOver; `ishiki chat --take-over`)"
                    ),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_on_this_host_whose_process_ended_is_gone() {
        let host = host_name();
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("a child process");
        let dead = child.id();
        child.wait().expect("it ends");
        assert!(holder_is_gone(&format!("process {dead} on {host}"), &host));
        let alive = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("a live child");
        assert!(!holder_is_gone(
            &format!("process {} on {host}", alive.id()),
            &host
        ));
        assert!(!holder_is_gone(&default_holder(), &host), "this process");
        assert!(!holder_is_gone(
            &format!("process {dead} on elsewhere"),
            &host
        ));
        assert!(!holder_is_gone("worker-a", &host), "a custom holder name");
        let mut alive = alive;
        let _ = alive.kill();
        let _ = alive.wait();
    }
}
