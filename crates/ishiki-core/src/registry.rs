//! The runtime's one list of tools: each registered tool with its definition (read once), its
//! compiled input schema, and whether and how it is built in. The catalog (`ishiki-toolsearch`)
//! keeps its own copy of the definitions, because ranking and the per-step listing are its
//! job; only this registry adds to it and removes from it, so the two cannot drift apart.

use std::sync::Arc;

use ishiki_tool::Tool;
use ishiki_toolsearch::{Catalog, ToolDef};

use crate::builtin::{DirectTool, ToolLookup};
use crate::error::{RuntimeError, RuntimeErrorKind};

/// How a tool came to be registered, and so how a direct call reaches it.
#[derive(Debug, Clone)]
pub(crate) enum Origin {
    /// Given to the builder or added after start: replaceable and removable, served by
    /// `builtin::call_plain`.
    Registered,
    /// Made by the runtime (`search`, `send_message`, `finish`, `wait`): neither replaceable
    /// nor removable, served by `builtin::call_plain`.
    Builtin,
    /// A built-in that serves a direct call its own way (`read`, `codemode`).
    BuiltinDirect(Arc<dyn DirectTool>),
}

/// One registered tool.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) def: ToolDef,
    pub(crate) tool: Arc<dyn Tool>,
    /// The input schema, compiled once (`checked_definition`).
    pub(crate) validator: Arc<jsonschema::Validator>,
    pub(crate) origin: Origin,
}

impl Entry {
    fn is_builtin(&self) -> bool {
        !matches!(self.origin, Origin::Registered)
    }
}

/// The registered tools in registration order (the order the model's tool list keeps).
#[derive(Debug, Default)]
pub(crate) struct Registry {
    entries: Vec<Entry>,
}

impl Registry {
    /// Registers a tool at start: a second tool of one name is a configuration error.
    pub(crate) fn register(
        &mut self,
        entry: Entry,
        catalog: &mut Catalog,
    ) -> Result<(), RuntimeError> {
        if self.get(&entry.def.name).is_some() {
            return Err(RuntimeError::new(
                RuntimeErrorKind::Config,
                format!("two tools are named `{}`", entry.def.name),
            ));
        }
        catalog.add(entry.def.clone());
        self.entries.push(entry);
        Ok(())
    }

    /// Adds a tool after start, or replaces the registered tool of its name in its place; a
    /// built-in cannot be replaced.
    pub(crate) fn add(&mut self, entry: Entry, catalog: &mut Catalog) -> Result<(), RuntimeError> {
        if self.is_builtin(&entry.def.name) {
            return Err(RuntimeError::new(
                RuntimeErrorKind::Config,
                format!(
                    "the tool `{}` is built in and cannot be replaced",
                    entry.def.name
                ),
            ));
        }
        catalog.add(entry.def.clone());
        match self
            .entries
            .iter_mut()
            .find(|e| e.def.name == entry.def.name)
        {
            Some(slot) => *slot = entry,
            None => self.entries.push(entry),
        }
        Ok(())
    }

    /// Removes a registered tool (never a built-in); whether one was removed.
    pub(crate) fn remove(&mut self, name: &str, catalog: &mut Catalog) -> bool {
        if self.is_builtin(name) {
            return false;
        }
        let before = self.entries.len();
        self.entries.retain(|e| e.def.name != name);
        let removed = catalog.remove(name);
        removed || self.entries.len() != before
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.def.name == name)
    }

    fn is_builtin(&self, name: &str) -> bool {
        self.get(name).is_some_and(Entry::is_builtin)
    }

    /// Every definition, in registration order.
    pub(crate) fn defs(&self) -> impl Iterator<Item = &ToolDef> {
        self.entries.iter().map(|e| &e.def)
    }

    /// The input schema of the tool `name`, for the text protocol's argument parsing.
    pub(crate) fn input_schema(&self, name: &str) -> Option<&serde_json::Value> {
        self.get(name).map(|e| &e.def.input_schema)
    }
}

impl ToolLookup for Registry {
    fn lookup(&self, name: &str) -> Option<(&ToolDef, &Arc<dyn Tool>)> {
        self.get(name).map(|e| (&e.def, &e.tool))
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use ishiki_tool::{ToolContext, ToolError};
    use serde_json::{Value, json};

    use super::*;

    #[derive(Debug)]
    struct Named(&'static str, &'static str);

    #[async_trait]
    impl Tool for Named {
        fn definition(&self) -> ToolDef {
            ToolDef::new(self.0, self.1, json!({ "type": "object" })).with_resident(true)
        }

        async fn execute(&self, _: Value, _: &ToolContext) -> Result<Value, ToolError> {
            Ok(Value::Null)
        }
    }

    fn entry(name: &'static str, description: &'static str, origin: Origin) -> Entry {
        let tool: Arc<dyn Tool> = Arc::new(Named(name, description));
        Entry {
            def: tool.definition(),
            validator: Arc::new(jsonschema::validator_for(&json!({})).expect("compiles")),
            tool,
            origin,
        }
    }

    #[test]
    fn the_catalog_follows_every_change_and_built_ins_stay() {
        let mut catalog = Catalog::without_toolsearch();
        let mut registry = Registry::default();
        registry
            .register(entry("finish", "End.", Origin::Builtin), &mut catalog)
            .expect("registers");
        registry
            .register(entry("echo", "Old.", Origin::Registered), &mut catalog)
            .expect("registers");
        let twice = registry.register(entry("echo", "Again.", Origin::Registered), &mut catalog);
        assert_eq!(twice.unwrap_err().message(), "two tools are named `echo`");

        // Replaced in its place, in both lists.
        registry
            .add(entry("echo", "New.", Origin::Registered), &mut catalog)
            .expect("replaces");
        let names: Vec<&str> = registry.defs().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["finish", "echo"]);
        assert_eq!(
            registry.get("echo").map(|e| e.def.description.as_str()),
            Some("New.")
        );
        assert_eq!(
            catalog.get("echo").map(|d| d.description.as_str()),
            Some("New.")
        );

        // A built-in is neither replaced nor removed.
        let refused = registry.add(entry("finish", "Mine.", Origin::Registered), &mut catalog);
        assert!(refused.is_err());
        assert!(!registry.remove("finish", &mut catalog));
        assert_eq!(
            catalog.get("finish").map(|d| d.description.as_str()),
            Some("End.")
        );

        assert!(registry.remove("echo", &mut catalog));
        assert!(registry.get("echo").is_none());
        assert!(catalog.is_removed("echo"));
    }
}
