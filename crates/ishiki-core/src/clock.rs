//! Time and ids: the runtime reads both through [`Clock`], so a scenario can replay them exactly.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uuid::Uuid;

/// Where the runtime gets the time and new UUID v7 ids.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> SystemTime;

    /// A new UUID v7 (inbound asset ids, RES-6).
    fn new_uuid_v7(&self) -> Uuid;
}

/// The wall clock and random UUID v7s.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn new_uuid_v7(&self) -> Uuid {
        Uuid::now_v7()
    }
}

/// A clock that only moves when told to, with ids derived from its time and a counter: the
/// same calls give the same times and ids (scenario runs, tests).
#[derive(Debug)]
pub struct ManualClock {
    millis: AtomicU64,
    counter: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: SystemTime) -> Self {
        let millis = start
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Self {
            millis: AtomicU64::new(millis),
            counter: AtomicU64::new(0),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.millis.fetch_add(ms, Ordering::SeqCst);
    }

    /// Unix milliseconds now.
    pub fn unix_millis(&self) -> u64 {
        self.millis.load(Ordering::SeqCst)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.unix_millis())
    }

    fn new_uuid_v7(&self) -> Uuid {
        let n = self.counter.fetch_add(1, Ordering::SeqCst);
        ishiki_resources::uuid_v7_at(self.unix_millis(), n)
    }
}

/// Unix milliseconds of a time (0 before the epoch).
pub fn unix_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// RFC 3339 in UTC with second precision: `2026-01-01T00:00:07Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn manual_clock_ids_are_v7_sorted_and_reproducible() {
        let start = UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        let clock = ManualClock::new(start);
        let a = clock.new_uuid_v7();
        let b = clock.new_uuid_v7();
        clock.advance(Duration::from_secs(1));
        let c = clock.new_uuid_v7();
        for u in [a, b, c] {
            assert_eq!(u.get_version(), Some(uuid::Version::SortRand));
        }
        assert!(a < b && b < c && a.to_string() < b.to_string());
        assert_eq!(ManualClock::new(start).new_uuid_v7(), a);
    }

    /// Days since the epoch of a civil date (Hinnant's `days_from_civil`), the inverse used to
    /// check the formatter.
    fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
        let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn civil_dates_round_trip(days in 0i64..3_000_000) {
            let (y, m, d) = civil_from_days(days);
            prop_assert!((1..=12).contains(&m) && (1..=31).contains(&d));
            prop_assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        // 2026-01-01T00:00:00Z
        let t = UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        assert_eq!(rfc3339(t), "2026-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(t + Duration::from_secs(86_400 * 59 + 3661)),
            "2026-03-01T01:01:01Z"
        );
    }
}
