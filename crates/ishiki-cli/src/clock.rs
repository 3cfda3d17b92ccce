//! The scenario runner's fake clock and the deterministic ids derived from it.
//!
//! A transcript must be byte-identical across runs, so nothing in a run reads the wall clock or
//! a random source: time starts at `2026-01-01T00:00:00Z`, moves one second per event (and by
//! `clock` steps), and every id — counters and UUID v7 alike — is a function of this clock.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use uuid::Uuid;

/// Unix time of `2026-01-01T00:00:00Z` in seconds, where every run starts.
pub const START_UNIX_SECS: u64 = 1_767_225_600;

/// A clock that only moves when told to, with the id counters that must follow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeClock {
    unix_ms: u64,
    uuid_counter: u64,
    counters: BTreeMap<String, u64>,
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeClock {
    /// A clock at `2026-01-01T00:00:00Z` with every counter at zero.
    pub fn new() -> Self {
        Self {
            unix_ms: START_UNIX_SECS * 1000,
            uuid_counter: 0,
            counters: BTreeMap::new(),
        }
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_unix_ms(&self) -> u64 {
        self.unix_ms
    }

    /// Whole seconds since the Unix epoch.
    pub fn now_unix_secs(&self) -> u64 {
        self.unix_ms / 1000
    }

    /// The current time as a [`SystemTime`], for code that takes one.
    pub fn now_system_time(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.unix_ms)
    }

    /// The current time in RFC 3339, to the second: `2026-01-01T00:00:07Z`.
    pub fn rfc3339(&self) -> String {
        format_rfc3339(self.now_unix_secs())
    }

    /// Moves one second forward (the runner calls this once per event) and returns the new
    /// time in RFC 3339.
    pub fn tick(&mut self) -> String {
        self.advance(Duration::from_secs(1));
        self.rfc3339()
    }

    /// Moves forward by `by` (a `clock` step); sub-millisecond parts are dropped.
    pub fn advance(&mut self, by: Duration) {
        let ms = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.unix_ms = self.unix_ms.saturating_add(ms);
    }

    /// The next id for `prefix`: `msg-1`, `msg-2`, … counted per prefix.
    pub fn next_id(&mut self, prefix: &str) -> String {
        let n = self.counters.entry(prefix.to_owned()).or_insert(0);
        *n += 1;
        format!("{prefix}-{n}")
    }

    /// A UUID v7 whose timestamp is the clock's time and whose random part is a counter, so
    /// ids are reproducible and sort in creation order (the clock never goes back).
    pub fn uuid_v7(&mut self) -> Uuid {
        self.uuid_counter += 1;
        let mut bytes = [0u8; 10];
        // The builder keeps the low 6 bits of bytes[2] and all of bytes[3..10]: a counter
        // below 2^62 survives whole, and the bytes it cannot keep stay zero.
        bytes[2..10].copy_from_slice(&self.uuid_counter.to_be_bytes());
        uuid::Builder::from_unix_timestamp_millis(self.unix_ms, &bytes).into_uuid()
    }
}

/// Formats Unix seconds as RFC 3339 in UTC: `2026-01-01T00:00:07Z`.
pub fn format_rfc3339(unix_secs: u64) -> String {
    let days = unix_secs / 86_400;
    let rem = unix_secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Year, month, day of the day `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`,
/// restricted to dates from 1970 on, which is all a clock starting in 2026 can reach).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

/// A duration that is not of the form `<digits><s|m|h|d>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    input: String,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid duration {:?}: expected a whole number followed by s, m, h or d (e.g. \"31d\")",
            self.input
        )
    }
}

impl std::error::Error for DurationError {}

/// Parses a `clock` step duration: a whole number and one unit, `s`, `m`, `h` or `d`
/// (`"90s"`, `"31d"`).
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError {
        input: text.to_owned(),
    };
    let unit_at = text.len().checked_sub(1).ok_or_else(bad)?;
    let (digits, unit) = text.split_at(unit_at);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(scale)
        .map(Duration::from_secs)
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn starts_at_2026_and_ticks_one_second() {
        let mut clock = FakeClock::new();
        assert_eq!(clock.rfc3339(), "2026-01-01T00:00:00Z");
        for _ in 0..7 {
            clock.tick();
        }
        assert_eq!(clock.rfc3339(), "2026-01-01T00:00:07Z");
    }

    #[test]
    fn advance_crosses_months_and_leap_days() {
        let mut clock = FakeClock::new();
        clock.advance(parse_duration("31d").expect("valid"));
        assert_eq!(clock.rfc3339(), "2026-02-01T00:00:00Z");
        // 2028 is a leap year: 2026-02-01 + 758 days = 2028-02-29.
        clock.advance(Duration::from_secs(758 * 86_400));
        assert_eq!(clock.rfc3339(), "2028-02-29T00:00:00Z");
        clock.advance(Duration::from_secs(86_400 - 1));
        assert_eq!(clock.rfc3339(), "2028-02-29T23:59:59Z");
    }

    #[test]
    fn known_dates_format() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn durations_parse_each_unit() {
        assert_eq!(parse_duration("45s"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3h"), Ok(Duration::from_secs(10_800)));
        assert_eq!(parse_duration("31d"), Ok(Duration::from_secs(2_678_400)));
        for bad in [
            "",
            "d",
            "31",
            "-1d",
            "1.5h",
            "3w",
            " 3d",
            "3 d",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        insta::assert_snapshot!(
            parse_duration("3w").map_err(|e| e.to_string()).unwrap_err(),
            @r#"invalid duration "3w": expected a whole number followed by s, m, h or d (e.g. "31d")"#
        );
    }

    #[test]
    fn ids_count_per_prefix() {
        let mut clock = FakeClock::new();
        assert_eq!(clock.next_id("msg"), "msg-1");
        assert_eq!(clock.next_id("msg"), "msg-2");
        assert_eq!(clock.next_id("call"), "call-1");
    }

    #[test]
    fn uuids_are_v7_from_the_clock_and_sorted() {
        let mut clock = FakeClock::new();
        let a = clock.uuid_v7();
        let b = clock.uuid_v7();
        clock.tick();
        let c = clock.uuid_v7();
        for u in [a, b, c] {
            assert_eq!(u.get_version(), Some(uuid::Version::SortRand));
            assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
        }
        assert!(a < b && b < c);
        assert!(a.to_string() < b.to_string() && b.to_string() < c.to_string());
        let (secs, _) = a.get_timestamp().expect("v7 has a timestamp").to_unix();
        assert_eq!(secs, START_UNIX_SECS);
        assert_eq!(a.to_string(), "019b76da-a800-7000-8000-000000000001");
        // Same clock, same ids: runs are reproducible.
        let mut again = FakeClock::new();
        assert_eq!(again.uuid_v7(), a);
    }

    /// Days since the epoch of a civil date (Hinnant's `days_from_civil`), the inverse used to
    /// check the formatter.
    fn days_from_civil(y: u64, m: u64, d: u64) -> u64 {
        let y = if m <= 2 { y - 1 } else { y };
        let era = y / 400;
        let yoe = y - era * 400;
        let mp = if m > 2 { m - 3 } else { m + 9 };
        let doy = (153 * mp + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn civil_dates_round_trip(days in 0u64..3_000_000) {
            let (y, m, d) = civil_from_days(days);
            prop_assert!((1..=12).contains(&m) && (1..=31).contains(&d));
            prop_assert_eq!(days_from_civil(y, m, d), days);
        }

        #[test]
        fn uuids_sort_in_creation_order(steps in proptest::collection::vec(0u64..3, 1..40)) {
            let mut clock = FakeClock::new();
            let mut last = clock.uuid_v7();
            for s in steps {
                clock.advance(Duration::from_millis(s));
                let next = clock.uuid_v7();
                prop_assert!(next > last);
                last = next;
            }
        }
    }
}
