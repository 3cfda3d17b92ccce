//! One search index per distinct set of searchable tools, shared by the catalogs of a process
//! (issue 26). A service opens a catalog per conversation, usually over the same tools, and
//! indexing them (tokenising every field, stemming, the typo index's deletions) was a third of
//! opening a runtime over a few hundred tools. A catalog asks here when it first searches;
//! another catalog that indexed the very same tools in the same order hands over its index.
//!
//! The table holds each index weakly under a 128-bit fingerprint of every text the index reads
//! (`index::for_each_text`: name, description, origin, the parameter names and descriptions it
//! walks, of every tool in order): SipHash under two keys drawn at random for the process. The keys never leave the process, so a tool server cannot craft two
//! catalogs with one fingerprint, and by chance two differ by 2⁻¹²⁸: an index goes only to a
//! catalog over the same tools. Entries whose index no catalog holds any more are pruned at
//! every build.

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::hash::{BuildHasher as _, Hasher};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use crate::def::ToolDef;
use crate::index::{ToolIndex, for_each_text};

struct Entry {
    fingerprint: u128,
    index: Weak<ToolIndex>,
}

static TABLE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// Two keyed SipHash states fed the same bytes.
struct Pair(DefaultHasher, DefaultHasher);

impl Hasher for Pair {
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
        self.1.write(bytes);
    }

    fn finish(&self) -> u64 {
        self.0.finish()
    }
}

fn fingerprint(defs: &[&ToolDef]) -> u128 {
    static KEYS: OnceLock<(RandomState, RandomState)> = OnceLock::new();
    let (a, b) = KEYS.get_or_init(|| (RandomState::new(), RandomState::new()));
    let mut h = Pair(a.build_hasher(), b.build_hasher());
    h.write_usize(defs.len());
    for def in defs {
        for_each_text(def, |field, text| {
            h.write_u8(field as u8);
            h.write_usize(text.len());
            h.write(text.as_bytes());
        });
        h.write_u8(0xff);
    }
    (u128::from(h.0.finish()) << 64) | u128::from(h.1.finish())
}

fn table() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn find(table: &[Entry], fingerprint: u128) -> Option<Arc<ToolIndex>> {
    table
        .iter()
        .filter(|e| e.fingerprint == fingerprint)
        .find_map(|e| e.index.upgrade())
}

/// The index of `defs` (in this order): one another catalog of the process holds, or a new one
/// that later catalogs over the same tools will share.
pub(crate) fn index_for(defs: &[&ToolDef]) -> Arc<ToolIndex> {
    if defs.is_empty() {
        return Arc::new(ToolIndex::default());
    }
    let fingerprint = fingerprint(defs);
    if let Some(index) = find(&table(), fingerprint) {
        return index;
    }
    // Built outside the lock: other catalogs search meanwhile. Two that build the same tools
    // at once both build; the first to return is the one kept.
    let mut index = ToolIndex::default();
    for def in defs {
        index.insert(def);
    }
    let index = Arc::new(index);
    let mut table = table();
    table.retain(|e| e.index.strong_count() > 0);
    if let Some(theirs) = find(&table, fingerprint) {
        return theirs;
    }
    table.push(Entry {
        fingerprint,
        index: Arc::downgrade(&index),
    });
    index
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(suffix: &str) -> Vec<ToolDef> {
        vec![
            ToolDef::new(
                format!("read_file{suffix}"),
                "Read a file",
                json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            ),
            ToolDef::new(format!("send_mail{suffix}"), "Send an email", json!({})),
        ]
    }

    fn index(defs: &[ToolDef]) -> Arc<ToolIndex> {
        index_for(&defs.iter().collect::<Vec<_>>())
    }

    #[test]
    fn equal_tools_share_one_index_and_different_ones_do_not() {
        let a = index(&tools("_shared_1"));
        let b = index(&tools("_shared_1"));
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &index(&tools("_shared_2"))));
        let mut changed = tools("_shared_1");
        changed[0].input_schema = json!({"type": "object", "properties": {"file": {}}});
        assert!(!Arc::ptr_eq(&a, &index(&changed)), "schemas differ");
        let mut changed = tools("_shared_1");
        changed[1].origin = Some("mcp:mail".into());
        assert!(!Arc::ptr_eq(&a, &index(&changed)), "origins differ");
        let mut reordered = tools("_shared_1");
        reordered.reverse();
        assert!(
            !Arc::ptr_eq(&a, &index(&reordered)),
            "order is part of the index"
        );
    }

    #[test]
    fn an_index_no_catalog_holds_is_built_again_and_its_entry_goes() {
        let defs = tools("_shared_3");
        let refs: Vec<&ToolDef> = defs.iter().collect();
        let first = index_for(&refs);
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none());
        let again = index_for(&refs);
        assert_eq!(again.len(), 2);
        let print = fingerprint(&refs);
        let entries = table().iter().filter(|e| e.fingerprint == print).count();
        assert_eq!(entries, 1, "the dead entry was pruned");
    }

    #[test]
    fn fields_do_not_run_into_each_other() {
        let a = ToolDef::new("ab", "c", json!({}));
        let b = ToolDef::new("a", "bc", json!({}));
        let c = ToolDef::new("abc", "", json!({}));
        let d = ToolDef::new("ab", "c", json!({})).with_origin("x");
        let e = ToolDef::new("ab", "cx", json!({}));
        let f = ToolDef::new(
            "ab",
            "c",
            json!({"properties": {"x": {"description": "y"}}}),
        );
        let g = ToolDef::new("ab", "c", json!({"properties": {"xy": {}}}));
        let prints: Vec<u128> = [&a, &b, &c, &d, &e, &f, &g]
            .iter()
            .map(|t| fingerprint(&[t]))
            .collect();
        let distinct: std::collections::HashSet<_> = prints.iter().collect();
        assert_eq!(distinct.len(), prints.len(), "{prints:?}");
    }
}
