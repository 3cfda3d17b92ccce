//! One writer per conversation: the lease row (`ishiki_leases`, expiry and fencing token) a
//! store takes when it opens, refusing, waiting or taking over while another runtime holds it.

use std::time::{Duration, Instant};

use ishiki_core::{StoreError, StoreErrorKind};
use postgres::Client;

use crate::{PostgresOptions, WhenHeld, db};

/// `process <pid> on <host>`: enough for an operator to find the holder among machines.
pub(crate) fn default_holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "an unknown host".to_owned());
    format!("process {} on {host}", std::process::id())
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
        if !live || options.when_held == WhenHeld::TakeOver {
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
                        "conversation `{conversation}` is held by another runtime ({holder}, lease until {until}); one writer per conversation: wait for it or take it over if it is gone"
                    ),
                ));
            }
        }
    }
}
