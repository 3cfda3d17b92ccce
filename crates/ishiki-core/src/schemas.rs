//! Compiled input schemas, shared by every runtime of the process (issue 26).
//!
//! Each runtime checks every call's input against its tool's schema, compiled once. A process
//! that serves many conversations over the same tools (one profile, the same MCP servers)
//! would compile each schema once per conversation; here the first runtime to need a schema
//! compiles it and the others take the same validator while any runtime holds it. The cache
//! holds validators weakly, keyed by the SHA-256 of the schema's JSON text (32 bytes however
//! large the schema; handing one tool another's validator would take a SHA-256 collision): a
//! schema nobody uses any more is freed with its last runtime, and dead entries are pruned as
//! the table grows (it never holds more than twice the live schemas, plus a floor), so a
//! server that lists new schemas without end grows it no faster than the runtimes that hold
//! them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use serde_json::Value;

/// Entries kept before the first prune of dead ones.
const PRUNE_FLOOR: usize = 256;

struct Table {
    by_schema: HashMap<[u8; 32], Weak<jsonschema::Validator>>,
    /// The size at which dead entries are next pruned.
    prune_at: usize,
}

fn table() -> &'static Mutex<Table> {
    static TABLE: OnceLock<Mutex<Table>> = OnceLock::new();
    TABLE.get_or_init(|| {
        Mutex::new(Table {
            by_schema: HashMap::new(),
            prune_at: PRUNE_FLOOR,
        })
    })
}

/// The table's key for `schema`: the SHA-256 of its JSON text.
fn key_of(schema: &Value) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    Sha256::digest(schema.to_string().as_bytes()).into()
}

/// The validator of `schema`: the one another runtime compiled if it is still in use, else
/// compiled now (outside the lock, so a slow schema holds up no other runtime). `Err` is the
/// compiler's message; a schema that does not compile is not remembered.
pub(crate) fn compiled(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    let key = key_of(schema);
    let lock = || table().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(shared) = lock().by_schema.get(&key).and_then(Weak::upgrade) {
        return Ok(shared);
    }
    let fresh = Arc::new(jsonschema::validator_for(schema).map_err(|e| e.to_string())?);
    let mut table = lock();
    // Another runtime may have compiled the same schema meanwhile: one of the two is kept.
    if let Some(shared) = table.by_schema.get(&key).and_then(Weak::upgrade) {
        return Ok(shared);
    }
    if table.by_schema.len() >= table.prune_at {
        table.by_schema.retain(|_, weak| weak.strong_count() > 0);
        table.prune_at = (table.by_schema.len() * 2).max(PRUNE_FLOOR);
    }
    table.by_schema.insert(key, Arc::downgrade(&fresh));
    Ok(fresh)
}

/// How many schemas the table holds, live or not yet pruned (for tests).
#[cfg(test)]
fn held() -> usize {
    table()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .by_schema
        .len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_schema_in_use_is_compiled_once_and_shared() {
        let schema =
            json!({ "type": "object", "properties": { "shared-once": { "type": "string" } } });
        let first = compiled(&schema).unwrap();
        let second = compiled(&schema).unwrap();
        assert!(Arc::ptr_eq(&first, &second));
        // Another schema is another validator.
        let other = compiled(&json!({ "type": "object", "required": ["shared-once"] })).unwrap();
        assert!(!Arc::ptr_eq(&first, &other));
        assert!(first.is_valid(&json!({ "shared-once": "x" })));
        assert!(!first.is_valid(&json!({ "shared-once": 1 })));
    }

    #[test]
    fn a_schema_that_does_not_compile_fails_and_is_not_kept() {
        let bad = json!({ "type": 7, "title": "never-kept" });
        assert!(compiled(&bad).is_err());
        assert!(
            !table()
                .lock()
                .unwrap()
                .by_schema
                .contains_key(&key_of(&bad))
        );
    }

    #[test]
    fn schemas_nobody_holds_are_pruned_as_the_table_grows() {
        // Endless new schemas, none kept: the table stays bounded.
        for i in 0..(PRUNE_FLOOR * 8) {
            let schema = json!({ "type": "object", "title": format!("pruned-{i}") });
            drop(compiled(&schema).unwrap());
        }
        // Other tests of this process may hold a few schemas at once; far fewer than this.
        assert!(held() <= PRUNE_FLOOR * 2 + 64, "{} held", held());
    }
}
