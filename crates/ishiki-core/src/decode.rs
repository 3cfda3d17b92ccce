//! Strict decoding of stored rows (SEC-4, PRJ-13): a row must decode into its type *and* hold
//! nothing that type does not read. Serde alone would read a delivery state of the wrong
//! shape (`{"x":1}`) as an empty one — "nothing delivered" — and show a delivered `once`
//! image again; here it is an error naming the table and the row.
//!
//! The check re-encodes the decoded value and requires every field of the stored JSON to be
//! there with the same value (a field the type fills with its default may be absent; a stored
//! `null` counts as absent).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{RuntimeError, RuntimeErrorKind};

/// Decodes the row `row` (e.g. ``id `s1-assistant` ``) of `table` strictly.
pub(crate) fn strict<T: DeserializeOwned + Serialize>(
    table: &str,
    row: &str,
    stored: Value,
) -> Result<T, RuntimeError> {
    let damaged = |why: String| damaged(table, row, why);
    let decoded: T = serde_json::from_value(stored.clone()).map_err(|e| damaged(e.to_string()))?;
    let again = serde_json::to_value(&decoded).map_err(|e| damaged(e.to_string()))?;
    let mut path = String::new();
    if let Some(why) = first_unread(&stored, &again, &mut path) {
        return Err(damaged(why));
    }
    Ok(decoded)
}

/// The error for a stored row that cannot be read.
pub(crate) fn damaged(table: &str, row: &str, why: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::new(
        RuntimeErrorKind::Damaged,
        format!("the history store is damaged: table `{table}`, {row}: {why}"),
    )
}

/// Where `stored` holds something `decoded` (its re-encoding) does not, if anywhere.
fn first_unread(stored: &Value, decoded: &Value, path: &mut String) -> Option<String> {
    match (stored, decoded) {
        (Value::Object(stored), Value::Object(decoded)) => {
            for (key, value) in stored {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
                let found = match decoded.get(key) {
                    Some(again) => first_unread(value, again, path),
                    None if value.is_null() => None,
                    None => Some(format!("unexpected field `{path}`")),
                };
                if found.is_some() {
                    return found;
                }
                path.truncate(len);
            }
            None
        }
        (Value::Array(stored), Value::Array(decoded)) if stored.len() == decoded.len() => {
            for (i, (value, again)) in stored.iter().zip(decoded).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                let found = first_unread(value, again, path);
                if found.is_some() {
                    return found;
                }
                path.truncate(len);
            }
            None
        }
        (stored, decoded) if stored == decoded => None,
        _ => Some(if path.is_empty() {
            "the value does not read back as stored".to_owned()
        } else {
            format!("`{path}` does not read back as stored")
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Row {
        id: String,
        #[serde(default)]
        n: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        items: Vec<Item>,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Item {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        flag: bool,
    }

    fn decode(value: Value) -> Result<Row, String> {
        strict::<Row>("t", "id `r`", value).map_err(|e| e.message().to_owned())
    }

    #[test]
    fn rows_that_read_back_decode_and_defaults_may_be_absent() {
        let row = decode(json!({ "id": "r", "items": [{ "flag": true }, {}], "note": null }));
        assert_eq!(
            row,
            Ok(Row {
                id: "r".into(),
                n: 0,
                note: None,
                items: vec![Item { flag: true }, Item { flag: false }],
            })
        );
    }

    #[test]
    fn unread_fields_and_wrong_shapes_name_the_table_row_and_field() {
        for (value, expected) in [
            (
                json!({ "id": "r", "items": [], "x": 1 }),
                "the history store is damaged: table `t`, id `r`: unexpected field `x`",
            ),
            (
                json!({ "id": "r", "items": [{}, { "flag": true, "y": [] }] }),
                "the history store is damaged: table `t`, id `r`: unexpected field `items[1].y`",
            ),
            (
                json!({ "id": "r", "items": [{ "flag": false }] }),
                "the history store is damaged: table `t`, id `r`: unexpected field `items[0].flag`",
            ),
            (
                json!({ "x": 1 }),
                "the history store is damaged: table `t`, id `r`: missing field `id`",
            ),
            (
                json!({ "id": "r", "n": "7", "items": [] }),
                "the history store is damaged: table `t`, id `r`: invalid type: string \"7\", expected u64",
            ),
        ] {
            assert_eq!(decode(value).err().as_deref(), Some(expected));
        }
    }
}
