//! `tools/list` over all its pages, within the listing limits, and how long a listing stays
//! fresh (`ttlMs`, 2026-07-28 cache hints).

use std::collections::HashSet;
use std::time::Duration;

use rmcp::model::PaginatedRequestParams;
use rmcp::service::{Peer, RoleClient};

use super::{Failure, MAX_LIST_BYTES, MAX_LIST_PAGES, MAX_LISTED_TOOLS};

/// The longest a listing's `ttlMs` keeps it fresh.
const MAX_LIST_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Every page of `tools/list`, within the listing limits, and how long the listing stays
/// fresh: the shortest `ttlMs` of its pages (2026-07-28 cache hints, SEP-2549), if any gave one.
pub(super) async fn list_pages(
    peer: &Peer<RoleClient>,
) -> Result<(Vec<rmcp::model::Tool>, Option<Duration>), Failure> {
    let mut fresh: Option<Duration> = None;
    let mut tools = Vec::new();
    let mut bytes = 0usize;
    let mut cursors = HashSet::new();
    let mut cursor = None;
    for page in 1..=MAX_LIST_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor);
        let result = peer.list_tools(Some(params)).await?;
        if let Some(ttl) = result.ttl_ms {
            let ttl = Duration::from_millis(ttl);
            fresh = Some(fresh.map_or(ttl, |f| f.min(ttl)));
        }
        bytes = bytes.saturating_add(json_len(&result.tools));
        if bytes > MAX_LIST_BYTES {
            return Err(Failure::Refused(format!(
                "its tool list is larger than {} MiB (the limit for one listing), reached on page {page}",
                MAX_LIST_BYTES / (1024 * 1024)
            )));
        }
        if tools.len() + result.tools.len() > MAX_LISTED_TOOLS {
            return Err(Failure::Refused(format!(
                "it lists more than {MAX_LISTED_TOOLS} tools (the limit for one listing), reached on page {page}"
            )));
        }
        tools.extend(result.tools);
        match result.next_cursor {
            None => return Ok((tools, fresh)),
            Some(next) => {
                if !cursors.insert(next.clone()) {
                    return Err(Failure::Refused(format!(
                        "page {page} of its tool list gives a cursor an earlier page gave, so the listing would never end"
                    )));
                }
                cursor = Some(next);
            }
        }
    }
    Err(Failure::Refused(format!(
        "its tool list goes on past {MAX_LIST_PAGES} pages (the limit for one listing)"
    )))
}

/// How long a listing stays fresh, from the shortest `ttlMs` of its pages (`ttl`) and whether
/// the server announces its list changes (`tools.listChanged`, which a `2026-07-28` server
/// sends on the listen stream the client holds open; `announces` is false while that stream
/// is known to be down). A positive hint is followed as it is. A
/// `ttlMs` of 0 (the SDKs' default, "immediately stale": the client MAY list again each time
/// it needs the list) is followed only when nothing else would tell of a change; from a
/// server that announces changes, the announcement is when the list is needed again, so a
/// model request does not wait for a listing round trip that the stream makes needless.
pub(super) fn freshness(ttl: Option<Duration>, announces: bool) -> Option<Duration> {
    match ttl {
        Some(Duration::ZERO) if announces => None,
        other => other,
    }
}

/// When a listing made at `now` that stays fresh for `fresh` goes stale: a hint past
/// [`MAX_LIST_TTL`] counts as that, so a server's number never overflows the clock.
pub(super) fn stale_at(
    now: tokio::time::Instant,
    fresh: Option<Duration>,
) -> Option<tokio::time::Instant> {
    now.checked_add(fresh?.min(MAX_LIST_TTL))
}

/// The length of a value as JSON, counted without building the text.
fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail; a value that cannot be serialized counts what it wrote.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_ttl_counts_only_from_a_server_that_announces_no_changes() {
        let zero = Some(Duration::ZERO);
        assert_eq!(freshness(zero, false), zero);
        assert_eq!(freshness(zero, true), None);
        let minute = Some(Duration::from_secs(60));
        assert_eq!(freshness(minute, true), minute);
        assert_eq!(freshness(None, false), None);
    }

    #[test]
    fn a_listing_ttl_of_any_size_gives_a_time_and_never_overflows() {
        let now = tokio::time::Instant::now();
        assert_eq!(stale_at(now, None), None);
        assert_eq!(stale_at(now, Some(Duration::ZERO)), Some(now));
        assert_eq!(
            stale_at(now, Some(Duration::from_millis(300))),
            Some(now + Duration::from_millis(300))
        );
        // u64::MAX milliseconds, as a hostile server may send: a day.
        assert_eq!(
            stale_at(now, Some(Duration::from_millis(u64::MAX))),
            Some(now + MAX_LIST_TTL)
        );
        assert_eq!(stale_at(now, Some(Duration::MAX)), Some(now + MAX_LIST_TTL));
    }
}
