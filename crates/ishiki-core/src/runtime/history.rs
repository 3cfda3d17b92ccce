//! History in memory: the entries in commit order, and where each message and each tool result
//! is. A request asks per attachment record whether its source is still in the active context;
//! with the positions kept as entries are added, that is a lookup, not a pass over the whole
//! history (issue 26: a step's work must not grow with the conversation).

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::Arc;

use super::Entry;
use crate::message::{Message, Part, Role};

/// The history of one conversation: read as a slice of entries; changed only by [`push`]
/// and [`withdraw`], which keep the positions.
///
/// [`push`]: History::push
/// [`withdraw`]: History::withdraw
#[derive(Debug, Default)]
pub(super) struct History {
    entries: Vec<Entry>,
    /// Message id → its index. Ids are unique (the store refuses a second one). The ids come
    /// from platforms and models, so the hash is the standard library's keyed one.
    messages: HashMap<Arc<str>, usize>,
    /// Tool call id → the indexes of the tool messages that hold a result for it, in order
    /// (call ids come from models, so one may be answered twice).
    results: HashMap<Arc<str>, Vec<usize>>,
}

impl History {
    /// Appends an entry and remembers where its message and its results are.
    pub(super) fn push(&mut self, entry: Entry) {
        let index = self.entries.len();
        let message = &entry.message;
        self.messages.insert(Arc::from(message.id.as_str()), index);
        if message.role == Role::Tool {
            for part in &message.content {
                if let Part::ToolResult { call_id, .. } = part {
                    let at = self.results.entry(Arc::from(call_id.as_str())).or_default();
                    if at.last() != Some(&index) {
                        at.push(index);
                    }
                }
            }
        }
        self.entries.push(entry);
    }

    /// Marks the entry at `index` withdrawn (PRJ-7).
    pub(super) fn withdraw(&mut self, index: usize) {
        if let Some(entry) = self.entries.get_mut(index) {
            entry.withdrawn = true;
        }
    }

    /// The index of the message with this id.
    pub(super) fn position(&self, id: &str) -> Option<usize> {
        self.messages.get(id).copied()
    }

    /// The index of the first tool message at or after `from`, not withdrawn, that holds a
    /// result of call `call_id`: where its attachments go.
    pub(super) fn result_position(&self, call_id: &str, from: usize) -> Option<usize> {
        self.results
            .get(call_id)?
            .iter()
            .copied()
            .find(|&i| i >= from && !self.entries[i].withdrawn)
    }

    /// Whether the user message `id` is in the active context that starts at `from`: stored
    /// at or after `from` and not withdrawn.
    pub(super) fn user_message_active(&self, id: &str, from: usize) -> bool {
        self.position(id).is_some_and(|i| {
            let entry = &self.entries[i];
            i >= from && !entry.withdrawn && entry.message.role == Role::User
        })
    }

    /// Whether the result of call `call_id` is in the active context that starts at `from`.
    pub(super) fn result_active(&self, call_id: &str, from: usize) -> bool {
        self.result_position(call_id, from).is_some()
    }

    /// The message at `index`.
    pub(super) fn message(&self, index: usize) -> Option<&Arc<Message>> {
        self.entries.get(index).map(|e| &e.message)
    }
}

impl Deref for History {
    type Target = [Entry];

    fn deref(&self) -> &[Entry] {
        &self.entries
    }
}

impl FromIterator<Entry> for History {
    fn from_iter<I: IntoIterator<Item = Entry>>(entries: I) -> Self {
        let mut history = Self::default();
        for entry in entries {
            history.push(entry);
        }
        history
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, role: Role, content: Vec<Part>) -> Entry {
        Entry::new(
            Arc::new(Message {
                id: id.to_owned(),
                role,
                created_at: "2025-01-01T00:00:00Z".to_owned(),
                content,
            }),
            false,
        )
    }

    fn result(call_id: &str) -> Part {
        Part::ToolResult {
            call_id: call_id.to_owned(),
            text: "ok".to_owned(),
            is_error: false,
        }
    }

    #[test]
    fn positions_follow_pushes_and_activity_follows_the_cut_and_withdrawals() {
        let mut history: History = [
            message("u1", Role::User, vec![]),
            message("a1", Role::Assistant, vec![]),
            message("r1", Role::Tool, vec![result("c1"), result("c2")]),
        ]
        .into_iter()
        .collect();
        history.push(message("u2", Role::User, vec![]));
        assert_eq!(history.position("u2"), Some(3));
        assert_eq!(history.result_position("c2", 0), Some(2));
        assert_eq!(history.result_position("c3", 0), None);
        assert!(history.user_message_active("u1", 0));
        // Only user messages are sources of messages' attachments.
        assert!(!history.user_message_active("a1", 0));
        // A compaction that keeps from index 1 on leaves u1 out.
        assert!(!history.user_message_active("u1", 1));
        assert!(history.result_active("c1", 2));
        assert!(!history.result_active("c1", 3));
        // A call answered twice: its attachments go after the first answer still active.
        history.push(message("r2", Role::Tool, vec![result("c1")]));
        assert_eq!(history.result_position("c1", 0), Some(2));
        assert_eq!(history.result_position("c1", 3), Some(4));
        history.withdraw(2);
        assert_eq!(history.result_position("c1", 0), Some(4));
        history.withdraw(4);
        assert!(!history.result_active("c1", 0));
        history.withdraw(0);
        assert!(!history.user_message_active("u1", 0));
        assert!(history.user_message_active("u2", 0));
        assert_eq!(history.len(), 5);
    }
}
