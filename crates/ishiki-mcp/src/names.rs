//! Ishiki names for MCP tools: `<server>_<tool>`, made injective across the servers of one
//! session.
//!
//! `<server>_<tool>` alone is not injective (servers `a` with tool `b_c` and `a_b` with tool
//! `c` both give `a_b_c`), and no fixed spelling that keeps today's names can be: every name
//! with an `_` already reads as some `<server>_<tool>`. So names are given in order (servers in
//! configuration order, each server's tools in its listing order, later listings after
//! earlier ones) and a name is never given twice: the first pair keeps `<server>_<tool>`, a
//! later pair that would collide becomes `<server>__<tool>` (then `…_2`, `…_3`). A pair keeps
//! its name for the session, even after its server stops listing it, so one name never means
//! two tools. Characters a tool name cannot hold (whitespace, control characters) become `_`.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

/// The names given so far to the tools of a set of servers (shared by the servers that
/// [`crate::start_all`] starts).
#[derive(Debug, Default)]
pub(crate) struct ToolNames {
    inner: Mutex<Given>,
}

#[derive(Debug, Default)]
struct Given {
    by_pair: HashMap<(String, String), String>,
    taken: HashSet<String>,
}

/// A name given to one server's tool, and why it is not the plain `<server>_<tool>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Named {
    pub(crate) name: String,
    /// `None` when the name is the plain `<server>_<tool>`.
    pub(crate) renamed: Option<String>,
}

impl ToolNames {
    /// The name of `tool` of `server`: the one given before, or a new one no other pair has.
    pub(crate) fn name(&self, server: &str, tool: &str) -> Named {
        let mut given = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let pair = (server.to_owned(), tool.to_owned());
        let plain = format!("{server}_{tool}");
        let explain = |name: &String| {
            (*name != plain).then(|| {
                if sanitized(&plain) == *name {
                    format!("the name `{tool}` holds whitespace or control characters")
                } else {
                    format!("`{}` names another tool already", sanitized(&plain))
                }
            })
        };
        if let Some(name) = given.by_pair.get(&pair) {
            return Named {
                renamed: explain(name),
                name: name.clone(),
            };
        }
        let first = sanitized(&plain);
        let second = sanitized(&format!("{server}__{tool}"));
        let name = std::iter::once(first)
            .chain(std::iter::once(second.clone()))
            .chain((2u64..).map(|n| format!("{second}_{n}")))
            .find(|candidate| !given.taken.contains(candidate))
            .unwrap_or_default();
        given.taken.insert(name.clone());
        given.by_pair.insert(pair, name.clone());
        Named {
            renamed: explain(&name),
            name,
        }
    }

    /// The name given to `tool` of `server`, if one was.
    pub(crate) fn given(&self, server: &str, tool: &str) -> Option<String> {
        let given = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        given
            .by_pair
            .get(&(server.to_owned(), tool.to_owned()))
            .cloned()
    }
}

/// `name` with every character a tool name cannot hold replaced by `_`.
fn sanitized(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    //! The naming rules on hand-picked pairs, and injectivity on generated ones.

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn server_and_tool_names_that_join_alike_get_different_names() {
        let names = ToolNames::default();
        let first = names.name("a", "b_c");
        let second = names.name("a_b", "c");
        assert_eq!(first.name, "a_b_c");
        assert_eq!(first.renamed, None);
        assert_eq!(second.name, "a_b__c");
        assert_eq!(
            second.renamed.as_deref(),
            Some("`a_b_c` names another tool already")
        );
        // Asked again (a new listing), each pair keeps its name.
        assert_eq!(names.name("a_b", "c").name, "a_b__c");
        assert_eq!(names.name("a", "b_c").name, "a_b_c");
        assert_eq!(names.given("a_b", "c").as_deref(), Some("a_b__c"));
    }

    #[test]
    fn whitespace_in_a_tool_name_becomes_an_underscore() {
        let names = ToolNames::default();
        let named = names.name("s", "get weather\n");
        assert_eq!(named.name, "s_get_weather_");
        assert!(named.renamed.is_some_and(|r| r.contains("whitespace")));
        // The real `get_weather_` comes second and is told apart.
        assert_eq!(names.name("s", "get_weather_").name, "s__get_weather_");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// However servers and tools are named, no two pairs share a name.
        #[test]
        fn names_are_injective(pairs in prop::collection::vec(("[ab_]{1,3}", "[ab_ ]{1,3}"), 1..24)) {
            let names = ToolNames::default();
            let mut seen: HashMap<String, (String, String)> = HashMap::new();
            for (server, tool) in pairs {
                let named = names.name(&server, &tool);
                let pair = (server, tool);
                if let Some(other) = seen.insert(named.name.clone(), pair.clone()) {
                    prop_assert_eq!(other, pair);
                }
            }
        }
    }
}
