//! Durations of `clock` steps (`"90s"`, `"31d"`).
//!
//! The run's fake clock itself is `ishiki_core::ManualClock` (time starts at
//! `2026-01-01T00:00:00Z` and moves one second per event), so the runtime and the transcript
//! read one clock and derive every id from it.

use std::fmt;
use std::time::Duration;

/// A duration that is not of the form `<digits><s|m|h|d>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DurationError {
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
pub(crate) fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError {
        input: text.to_owned(),
    };
    // The unit is the last character, which may take more than one byte ("3Л").
    let (unit_at, _) = text.char_indices().next_back().ok_or_else(bad)?;
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

    /// Found by `cargo xtask fuzz` (scenario_yaml): the unit was cut at the last byte, which
    /// panicked inside a multi-byte character.
    #[test]
    fn a_duration_ending_in_a_multibyte_character_is_refused_not_a_panic() {
        for bad in ["3Л", "Л", "12€", "1日", "5s\u{301}"] {
            let error = parse_duration(bad).expect_err(bad);
            assert!(error.to_string().starts_with("invalid duration"), "{error}");
        }
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
}
