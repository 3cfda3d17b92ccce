//! Unit tests of the host's pure parts: exact numbers and exit explanations.

use super::*;
use serde_json::json;

#[test]
fn numbers_past_2_pow_53_are_found_with_their_path() {
    assert_eq!(
        inexact_number(&json!({ "a": [1, 9007199254740991_u64] })),
        None
    );
    assert_eq!(inexact_number(&json!(-9007199254740991_i64)), None);
    let found = |v: Value| inexact_number(&v).map(|(path, n)| format!("{path} {n}"));
    // 2^53 itself may be 2^53 + 1 rounded: refused, as direct calls refuse it.
    assert_eq!(
        found(json!({ "a": [1, 9007199254740992_u64] })),
        Some("/a/1 9007199254740992".to_owned())
    );
    assert_eq!(
        found(json!({ "x/y": { "~": -9007199254740994_i64 } })),
        Some("/x~1y/~0 -9007199254740994".to_owned())
    );
    assert_eq!(found(json!(1e300)), Some("/ 1e+300".to_owned()));
    assert_eq!(found(json!([0.5, -2.5e-300, "1e300"])), None);
}
