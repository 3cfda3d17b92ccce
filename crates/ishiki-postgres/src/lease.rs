//! One writer per conversation: the lease row (`ishiki_leases`, expiry and fencing token) a
//! store takes when it opens, refusing, waiting or taking over while another runtime holds it.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use deadpool_postgres::Object;
use ishiki_store::{StoreError, StoreErrorKind};
use tokio_postgres::{Config, NoTls};

use crate::{PostgresOptions, RELEASE_LIMIT, WhenHeld, db};

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

/// Ends a lease now (its token stays, so tokens only grow).
pub(crate) const RELEASE: &str = "UPDATE ishiki_leases SET expires_at = '-infinity'
     WHERE conversation = $1 AND token = $2";

/// Lease releases under way in this process (dropped stores'), by conversation: an opener of
/// the same conversation waits for them, so a store dropped and opened again in one process
/// finds its own lease released, as it would if `Drop` could await.
static RELEASING: Mutex<Vec<(String, tokio::sync::watch::Receiver<bool>)>> = Mutex::new(Vec::new());

/// One release under way: dropping it (its task done, or dropped unrun by a runtime shutting
/// down) lets the waiting openers go on.
pub(crate) struct Releasing(tokio::sync::watch::Sender<bool>);

impl Drop for Releasing {
    fn drop(&mut self) {
        let _ = self.0.send(true);
        RELEASING
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(_, done)| !*done.borrow());
    }
}

pub(crate) fn releasing(conversation: &str) -> Releasing {
    let (sender, receiver) = tokio::sync::watch::channel(false);
    RELEASING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((conversation.to_owned(), receiver));
    Releasing(sender)
}

/// Waits (at most [`RELEASE_LIMIT`] each) for this process's releases of `conversation`.
pub(crate) async fn pending(conversation: &str) {
    let waiting: Vec<_> = RELEASING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|(c, _)| c == conversation)
        .map(|(_, done)| done.clone())
        .collect();
    for mut done in waiting {
        let _ = tokio::time::timeout(RELEASE_LIMIT, done.wait_for(|done| *done)).await;
    }
}

/// Takes the lease of `conversation`, or says who holds it (after [`pending`]: before taking
/// a connection, which the release may need). Returns the new fencing token.
pub(crate) async fn acquire(
    client: &mut Object,
    conversation: &str,
    options: &PostgresOptions,
    lease_secs: f64,
) -> Result<i64, StoreError> {
    let started = Instant::now();
    loop {
        let tx = client
            .transaction()
            .await
            .map_err(db("cannot take the lease"))?;
        tx.execute(
            "INSERT INTO ishiki_leases (conversation, token, holder, expires_at)
             VALUES ($1, 0, '', '-infinity') ON CONFLICT (conversation) DO NOTHING",
            &[&conversation],
        )
        .await
        .map_err(db("cannot take the lease"))?;
        let row = tx
            .query_one(
                "SELECT holder, expires_at > now(), expires_at::text FROM ishiki_leases
                 WHERE conversation = $1 FOR UPDATE",
                &[&conversation],
            )
            .await
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
                .await
                .map_err(db("cannot take the lease"))?;
            let token: i64 = row.try_get(0).map_err(db("cannot take the lease"))?;
            tx.commit().await.map_err(db("cannot take the lease"))?;
            return Ok(token);
        }
        tx.rollback().await.map_err(db("cannot take the lease"))?;
        let waited = started.elapsed();
        match options.when_held {
            WhenHeld::Wait(limit) if waited < limit => {
                tokio::time::sleep(Duration::from_millis(100).min(limit - waited)).await;
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

/// Ends the lease of `token` on `conversation` now, on a connection and a current-thread
/// runtime of its own (a dropped store's; see its `Drop`), within [`RELEASE_LIMIT`]. Any
/// failure is ignored: the lease then expires after its time to live.
pub(crate) fn release(mut config: Config, conversation: &str, token: i64) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    config.connect_timeout(RELEASE_LIMIT);
    runtime.block_on(async {
        let work = async {
            let (client, connection) = config.connect(NoTls).await.ok()?;
            let connection = tokio::spawn(connection);
            let _ = client.execute(RELEASE, &[&conversation, &token]).await;
            drop(client);
            let _ = connection.await;
            Some(())
        };
        let _ = tokio::time::timeout(RELEASE_LIMIT, work).await;
    });
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
