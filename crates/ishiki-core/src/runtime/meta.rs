//! The runtime's entries in the history store's metadata (`Batch::meta`, `StoredState::meta`):
//! each has one name, here, and is written and read only through [`Meta`], so a key cannot be
//! misspelt on one side and a damaged value is reported naming its key.

use std::collections::BTreeMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{RuntimeError, to_json};
use crate::decode;
use crate::store::Batch;

/// One metadata entry of the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Meta {
    /// The number of the last committed response (a `u64`); absent before the first.
    Step,
    /// The calls of the last response that have not run yet (`PlannedCall`s); `[]` once they
    /// ran or were answered as interrupted.
    PendingCalls,
    /// The context engine's committed state (`ContextState`): folds, compaction, calibration.
    Context,
}

impl Meta {
    /// The key as stored.
    pub(super) const fn key(self) -> &'static str {
        match self {
            Meta::Step => "step",
            Meta::PendingCalls => "pending_calls",
            Meta::Context => "context",
        }
    }

    /// Adds this entry with `value` to `batch`.
    pub(super) fn put<T: Serialize + ?Sized>(
        self,
        batch: &mut Batch,
        value: &T,
    ) -> Result<(), RuntimeError> {
        batch.meta.push((self.key().to_owned(), to_json(value)?));
        Ok(())
    }

    /// Whether the stored metadata (`StoredState::meta`) has this entry.
    pub(super) fn is_in(self, stored: &BTreeMap<String, Value>) -> bool {
        stored.contains_key(self.key())
    }

    /// This entry of the stored metadata (`StoredState::meta`), decoded strictly (`None` when
    /// absent); a value that does not read back as stored is an error naming the key.
    pub(super) fn read<T: DeserializeOwned + Serialize>(
        self,
        stored: &BTreeMap<String, Value>,
    ) -> Result<Option<T>, RuntimeError> {
        stored
            .get(self.key())
            .map(|v: &Value| decode::strict("meta", &format!("key `{}`", self.key()), v.clone()))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_keys_are_the_stored_ones_and_a_damaged_value_names_its_key() {
        // Stores written by earlier versions hold these names: they are part of the format.
        let keys = [Meta::Step, Meta::PendingCalls, Meta::Context].map(Meta::key);
        assert_eq!(keys, ["step", "pending_calls", "context"]);

        let mut batch = Batch::default();
        Meta::Step.put(&mut batch, &7_u64).expect("serializes");
        assert_eq!(batch.meta, [("step".to_owned(), json!(7))]);

        let stored: BTreeMap<String, Value> = batch.meta.into_iter().collect();
        assert!(Meta::Step.is_in(&stored));
        assert_eq!(Meta::Step.read::<u64>(&stored).expect("reads"), Some(7));
        assert_eq!(Meta::Context.read::<u64>(&stored).expect("absent"), None);

        let damaged = BTreeMap::from([("step".to_owned(), json!("seven"))]);
        let error = Meta::Step.read::<u64>(&damaged).unwrap_err();
        assert!(
            error.message().contains("key `step`"),
            "{}",
            error.message()
        );
    }
}
