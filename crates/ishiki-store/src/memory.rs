//! [`MemoryStore`]: the history store contract in memory, for tests and embedders.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::{Batch, HistoryStore, StoreError, StoredState};

/// [`HistoryStore`] in memory, with the same rules as the SQLite store of `ishiki-core`. Clones share one
/// state, so a test can drop a runtime and "reopen" the same history from a clone.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    state: Arc<Mutex<StoredState>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn with_state<T>(&self, f: impl FnOnce(&mut StoredState) -> T) -> T {
        // A panic elsewhere while holding the lock cannot leave a half-applied batch (commit
        // validates before it mutates), so a poisoned lock is still consistent.
        let mut guard = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }
}

#[async_trait::async_trait]
impl HistoryStore for MemoryStore {
    async fn load(&self) -> Result<StoredState, StoreError> {
        Ok(self.with_state(|state| state.clone()))
    }

    async fn commit(&mut self, batch: &Batch) -> Result<(), StoreError> {
        batch.check_ids()?;
        self.with_state(|state| {
            // Validate everything first, then apply: all or nothing.
            let stored: HashSet<&str> = state.messages.iter().map(|(m, _)| m.id.as_str()).collect();
            if let Some(m) = batch
                .messages
                .iter()
                .find(|m| stored.contains(m.id.as_str()))
            {
                return Err(StoreError::duplicate_id(
                    "message",
                    &m.id,
                    "is already stored",
                ));
            }
            let known = |id: &str| stored.contains(id) || batch.messages.iter().any(|m| m.id == id);
            if let Some(id) = batch.withdrawn.iter().find(|id| !known(id)) {
                return Err(StoreError::unknown_message(id));
            }
            if let Some(a) = batch
                .attachments
                .iter()
                .find(|a| state.attachments.iter().any(|s| s.id == a.id))
            {
                return Err(StoreError::duplicate_id(
                    "attachment",
                    &a.id,
                    "is already stored",
                ));
            }

            state
                .messages
                .extend(batch.messages.iter().map(|m| (m.clone(), false)));
            for (message, withdrawn) in &mut state.messages {
                if batch.withdrawn.contains(&message.id) {
                    *withdrawn = true;
                }
            }
            state.attachments.extend(batch.attachments.iter().cloned());
            for (id, value) in &batch.delivery_records {
                state.delivery_records.insert(id.clone(), value.clone());
            }
            if let Some(delivery) = &batch.delivery {
                state.delivery = Some(delivery.clone());
            }
            if let Some(catalog) = &batch.catalog {
                state.catalog = Some(catalog.clone());
            }
            for (key, value) in &batch.meta {
                state.meta.insert(key.clone(), value.clone());
            }
            Ok(())
        })
    }
}
