//! Persisted delivery state per record, and the change a request proposes to it (PRJ-4, PRJ-13).

use serde::{Deserialize, Serialize};

/// What has happened to one record across committed requests. All flags start false.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RecordState {
    /// Embedded in a request whose response was persisted.
    #[serde(default, skip_serializing_if = "is_false")]
    pub viewed: bool,
    /// A `once` record was delivered: it never appears again (PRJ-4).
    #[serde(default, skip_serializing_if = "is_false")]
    pub consumed: bool,
    /// Pruned (PRJ-5) or dropped under the hard budget (PRJ-8): it never returns.
    #[serde(default, skip_serializing_if = "is_false")]
    pub released: bool,
    /// Its terminal reason was shown in a persisted request: it never appears again (PRJ-9).
    #[serde(default, skip_serializing_if = "is_false")]
    pub reason_delivered: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One record's state, keyed by the record's arrival `seq` and `id`: an entry of a
/// [`DeliveryState`], and the unit a store keeps it in (serialized as
/// `{"id", "seq", "viewed"?, "consumed"?, "released"?, "reason_delivered"?}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeliveryRow {
    /// The record's id.
    pub id: String,
    /// The record's arrival sequence number.
    pub seq: u64,
    /// What has happened to it.
    #[serde(flatten)]
    pub state: RecordState,
}

impl DeliveryRow {
    fn key(&self) -> (u64, &str) {
        (self.seq, &self.id)
    }
}

/// Delivery state of every record that has one. Persist it (serde) in the same atomic batch as
/// the successful assistant response (PRJ-13); a failed or aborted step leaves it untouched, so
/// the next request retries (PRJ-4).
///
/// Entries are kept sorted by the record's `(seq, id)`. History is in arrival order, so a
/// projection reads the state in one forward sweep beside the records instead of a hash lookup
/// per record: on long histories the lookups' cache misses, not the rules, were the cost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Wire", into = "Wire")]
pub struct DeliveryState {
    entries: Vec<DeliveryRow>,
}

/// The serialized form: `{ "records": [ { "id", "seq", "viewed"?, … } ] }` in `(seq, id)` order.
#[derive(Serialize, Deserialize)]
struct Wire {
    #[serde(default)]
    records: Vec<DeliveryRow>,
}

impl From<Wire> for DeliveryState {
    fn from(wire: Wire) -> Self {
        wire.records.into_iter().collect()
    }
}

/// A state from rows in any order; a record named twice has the union of its flags (which
/// only ever turn on), as a store that kept a record's state in two places would have it.
impl FromIterator<DeliveryRow> for DeliveryState {
    fn from_iter<I: IntoIterator<Item = DeliveryRow>>(rows: I) -> Self {
        // Restore the order invariant whatever the stored order; merge duplicates' flags.
        let mut entries: Vec<DeliveryRow> = rows.into_iter().collect();
        entries.sort_by(|a, b| a.key().cmp(&b.key()));
        entries.dedup_by(|later, kept| {
            let same = later.key() == kept.key();
            if same {
                let (a, b) = (&mut kept.state, later.state);
                a.viewed |= b.viewed;
                a.consumed |= b.consumed;
                a.released |= b.released;
                a.reason_delivered |= b.reason_delivered;
            }
            same
        });
        Self { entries }
    }
}

impl From<DeliveryState> for Wire {
    fn from(state: DeliveryState) -> Self {
        Wire {
            records: state.entries,
        }
    }
}

impl DeliveryState {
    /// An empty state: nothing viewed, nothing delivered.
    pub fn new() -> Self {
        Self::default()
    }

    /// The state of one record by id (all false when it has none). A linear scan, meant for
    /// inspection; [`DeliveryState::state_of`] is the fast lookup.
    pub fn record(&self, record_id: &str) -> RecordState {
        self.entries
            .iter()
            .find(|e| e.id == record_id)
            .map(|e| e.state)
            .unwrap_or_default()
    }

    /// The state of one record, found by its `(seq, id)` in logarithmic time.
    pub fn state_of(&self, record: &crate::AttachmentRecord) -> RecordState {
        let key = (record.seq, record.id.as_str());
        match self.entries.binary_search_by(|e| e.key().cmp(&key)) {
            Ok(i) => self.entries[i].state,
            Err(_) => RecordState::default(),
        }
    }

    /// The rows of every record with a state, in `(seq, id)` order: what a store writes one
    /// by one (see [`DeliveryState::changed_by`]) and gives back to
    /// [`DeliveryState::from_iter`](FromIterator::from_iter).
    pub fn rows(&self) -> &[DeliveryRow] {
        &self.entries
    }

    /// Records with any state, as `(id, state)` in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, RecordState)> {
        self.entries.iter().map(|e| (e.id.as_str(), e.state))
    }

    /// How many records have a state.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no record has a state.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drops a record's state, e.g. when the record itself was deleted from history.
    pub fn forget(&mut self, record_id: &str) {
        self.entries.retain(|e| e.id != record_id);
    }

    /// Applies the change proposed by one projection. Call it only once the response of the
    /// request carrying that projection is persisted (PRJ-4, PRJ-13).
    pub fn commit(&mut self, change: &PendingChange) {
        let mut fresh = Vec::new();
        for m in &change.viewed {
            self.apply(&mut fresh, m, |s| s.viewed = true);
        }
        for m in &change.consumed {
            self.apply(&mut fresh, m, |s| {
                s.viewed = true;
                s.consumed = true;
            });
        }
        for m in &change.released {
            self.apply(&mut fresh, m, |s| s.released = true);
        }
        for m in &change.reason_delivered {
            self.apply(&mut fresh, m, |s| s.reason_delivered = true);
        }
        if !fresh.is_empty() {
            fresh.sort_by(|a, b| a.key().cmp(&b.key()));
            // New records arrive last: then they go at the end as they are, without a pass over
            // every state (issue 26: a commit's cost must not grow with the conversation).
            let in_order = match (self.entries.last(), fresh.first()) {
                (Some(last), Some(first)) => last.key() < first.key(),
                _ => true,
            };
            self.entries.append(&mut fresh);
            if !in_order {
                self.entries.sort_by(|a, b| a.key().cmp(&b.key()));
            }
        }
    }

    /// The states `change` gives the records whose state it changes, as
    /// [`commit`](Self::commit) would make them, and nothing else (a record named again with
    /// the state it has, such as a `retain` image shown again, is left out): what a store that
    /// keeps each record's state in its own row writes with the response, without copying or
    /// rewriting the whole state.
    pub fn changed_by(&self, change: &PendingChange) -> DeliveryState {
        let mut touched = DeliveryState::new();
        for m in change.marks() {
            let key = (m.seq, m.id.as_str());
            if let Ok(i) = self.entries.binary_search_by(|e| e.key().cmp(&key)) {
                touched.entries.push(self.entries[i].clone());
            }
        }
        touched.entries.sort_by(|a, b| a.key().cmp(&b.key()));
        touched.entries.dedup_by(|a, b| a.key() == b.key());
        touched.commit(change);
        touched.entries.retain(|e| {
            let key = e.key();
            match self.entries.binary_search_by(|o| o.key().cmp(&key)) {
                Ok(i) => self.entries[i].state != e.state,
                Err(_) => true,
            }
        });
        touched
    }

    fn apply(&mut self, fresh: &mut Vec<DeliveryRow>, m: &Mark, f: impl FnOnce(&mut RecordState)) {
        let key = (m.seq, m.id.as_str());
        if let Ok(i) = self.entries.binary_search_by(|e| e.key().cmp(&key)) {
            f(&mut self.entries[i].state);
        } else if let Some(e) = fresh.iter_mut().find(|e| e.key() == key) {
            f(&mut e.state);
        } else {
            let mut state = RecordState::default();
            f(&mut state);
            fresh.push(DeliveryRow {
                id: m.id.clone(),
                seq: m.seq,
                state,
            });
        }
    }

    /// A forward-sweeping reader for records given in (mostly) arrival order.
    pub(crate) fn cursor(&self) -> Cursor<'_> {
        Cursor {
            entries: &self.entries,
            pos: 0,
        }
    }
}

/// Reads states for records in arrival order with sequential memory access; a record out of
/// order costs one binary search, never a wrong answer.
#[derive(Debug)]
pub(crate) struct Cursor<'s> {
    entries: &'s [DeliveryRow],
    pos: usize,
}

impl Cursor<'_> {
    pub(crate) fn get(&mut self, seq: u64, id: &str) -> RecordState {
        let e = self.entries;
        let key = (seq, id);
        let less = |x: &DeliveryRow| x.key() < key;
        // Fast path for records in order: the entry at the cursor is this record, or lies
        // beyond it (the record has no state). Comparing `seq` first avoids most string reads.
        let p = self.pos;
        if p == 0 || e.get(p - 1).is_some_and(less) {
            match e.get(p) {
                None => return RecordState::default(),
                Some(x) if x.seq > seq => return RecordState::default(),
                Some(x) if x.seq == seq && x.id == id => {
                    self.pos = p + 1;
                    return x.state;
                }
                Some(_) => {}
            }
        }
        // Everything before `lo` is less than the key: from the cursor when the records run
        // forward, from the start when one steps back.
        let mut lo = match self.pos.checked_sub(1).and_then(|p| e.get(p)) {
            Some(prev) if !less(prev) => 0,
            _ => self.pos,
        };
        // Gallop: a few steps for neighbours, doubling for gaps.
        let mut hi = lo;
        let mut step = 1;
        while hi < e.len() && less(&e[hi]) {
            lo = hi + 1;
            hi += step;
            step *= 2;
        }
        let hi = hi.min(e.len());
        let p = lo + e[lo..hi].partition_point(less);
        self.pos = p;
        match e.get(p) {
            Some(x) if x.key() == key => x.state,
            _ => RecordState::default(),
        }
    }
}

/// One record named in a pending change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Mark {
    pub(crate) id: String,
    pub(crate) seq: u64,
}

/// What to apply to the [`DeliveryState`] if, and only if, the response to the request carrying
/// this projection is persisted. Each list is in record arrival order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingChange {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) viewed: Vec<Mark>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) consumed: Vec<Mark>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) released: Vec<Mark>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) reason_delivered: Vec<Mark>,
}

fn ids(marks: &[Mark]) -> Vec<&str> {
    marks.iter().map(|m| m.id.as_str()).collect()
}

impl PendingChange {
    /// Ids of the records embedded in this request: they become viewed.
    pub fn viewed(&self) -> Vec<&str> {
        ids(&self.viewed)
    }

    /// Ids of the `once` records among them: they become consumed.
    pub fn consumed(&self) -> Vec<&str> {
        ids(&self.consumed)
    }

    /// Ids of viewed `recent` records pruned (PRJ-5) or dropped under the hard budget (PRJ-8).
    pub fn released(&self) -> Vec<&str> {
        ids(&self.released)
    }

    /// Ids of records whose terminal reason this request states (PRJ-9).
    pub fn reason_delivered(&self) -> Vec<&str> {
        ids(&self.reason_delivered)
    }

    /// True when committing would change nothing.
    pub fn is_empty(&self) -> bool {
        self.marks().next().is_none()
    }

    /// Every record the change names, list by list.
    fn marks(&self) -> impl Iterator<Item = &Mark> {
        self.viewed
            .iter()
            .chain(&self.consumed)
            .chain(&self.released)
            .chain(&self.reason_delivered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(keys: &[(u64, &str)]) -> DeliveryState {
        let entries = keys
            .iter()
            .map(|&(seq, id)| DeliveryRow {
                id: id.to_owned(),
                seq,
                state: RecordState {
                    viewed: true,
                    ..RecordState::default()
                },
            })
            .collect();
        DeliveryState::from(Wire { records: entries })
    }

    #[test]
    fn rows_in_any_order_with_a_record_twice_make_one_sorted_state() {
        let row = |seq, id: &str, viewed, consumed| DeliveryRow {
            id: id.to_owned(),
            seq,
            state: RecordState {
                viewed,
                consumed,
                ..RecordState::default()
            },
        };
        let state: DeliveryState = [
            row(5, "e", true, false),
            row(1, "a", true, false),
            row(5, "e", false, true),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            state.rows(),
            [row(1, "a", true, false), row(5, "e", true, true)],
            "sorted by (seq, id), the twice-named record with both flags"
        );
        // A row's serialized form is what a store keeps, and reads back as the same row.
        let json = serde_json::to_value(&state.rows()[1]).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({ "id": "e", "seq": 5, "viewed": true, "consumed": true })
        );
        let back: DeliveryRow = serde_json::from_value(json).expect("deserializes");
        assert_eq!(back, state.rows()[1]);
    }

    #[test]
    fn cursor_finds_in_order_out_of_order_and_missing() {
        let s = state(&[(1, "a"), (3, "c"), (3, "d"), (7, "g"), (9, "i"), (20, "t")]);
        let mut c = s.cursor();
        let probes = [
            (1, "a", true),
            (2, "b", false),
            (3, "d", true),
            (3, "c", true),
            (20, "t", true),
            (1, "a", true),
            (9, "i", true),
            (9, "x", false),
            (30, "z", false),
            (0, "a", false),
            (7, "g", true),
        ];
        for (seq, id, found) in probes {
            assert_eq!(c.get(seq, id).viewed, found, "{seq} {id}");
        }
    }

    #[test]
    fn deserialize_restores_order_and_merges_duplicates() {
        let json = r#"{"records":[{"id":"b","seq":2,"released":true},{"id":"a","seq":1},{"id":"b","seq":2,"viewed":true}]}"#;
        let s: DeliveryState = serde_json::from_str(json).unwrap();
        let got: Vec<(&str, RecordState)> = s.iter().collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, "a");
        assert!(got[1].1.viewed && got[1].1.released);
    }

    fn mark(seq: u64, id: &str) -> Mark {
        Mark {
            id: id.to_owned(),
            seq,
        }
    }

    proptest::proptest! {
        /// `changed_by` is exactly the changed records' part of the committed state, so a store
        /// that writes only it and reads the union back has what a whole-state write had.
        #[test]
        fn changed_by_is_the_part_of_the_commit_that_changed(
            before in proptest::collection::vec((0u64..40, 0u8..16), 0..30),
            lists in proptest::collection::vec(proptest::collection::vec(0u64..50, 0..8), 4),
        ) {
            let id = |seq: u64| format!("r{seq}");
            let mut old = DeliveryState::new();
            for (seq, flags) in before {
                old.entries.push(DeliveryRow {
                    id: id(seq),
                    seq,
                    state: RecordState {
                        viewed: flags & 1 != 0,
                        consumed: flags & 2 != 0,
                        released: flags & 4 != 0,
                        reason_delivered: flags & 8 != 0,
                    },
                });
            }
            let old = DeliveryState::from(Wire { records: old.entries });
            let marks = |k: usize| lists[k].iter().map(|&seq| mark(seq, &id(seq))).collect();
            let change = PendingChange {
                viewed: marks(0),
                consumed: marks(1),
                released: marks(2),
                reason_delivered: marks(3),
            };
            let mut committed = old.clone();
            committed.commit(&change);
            let changed = old.changed_by(&change);
            let named: std::collections::BTreeSet<(u64, &str)> =
                change.marks().map(|m| (m.seq, m.id.as_str())).collect();
            let expected: Vec<&DeliveryRow> = committed
                .entries
                .iter()
                .filter(|e| named.contains(&e.key()))
                .filter(|e| old.entries.iter().all(|o| o.key() != e.key() || o.state != e.state))
                .collect();
            proptest::prop_assert_eq!(changed.entries.iter().collect::<Vec<_>>(), expected);
            // The old state with the changed entries laid over it is the committed state.
            let changed_keys: std::collections::BTreeSet<(u64, &str)> =
                changed.entries.iter().map(DeliveryRow::key).collect();
            let mut union = old.entries.clone();
            union.retain(|e| !changed_keys.contains(&e.key()));
            union.extend(changed.entries.iter().cloned());
            proptest::prop_assert_eq!(DeliveryState::from(Wire { records: union }), committed);
        }
    }
}
