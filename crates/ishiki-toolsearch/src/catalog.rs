//! The pool and the catalog with step boundaries (TS-1, TS-2, TS-3, TS-5).
//!
//! A tool is in one of three places: the *pool* (deferred, not yet found), *pending* (found by a
//! search, or added while steps are running; joins at the next step boundary) or *available*
//! (in the native tool list). The available list only ever grows at its end, so the request
//! prefix a provider caches stays valid from one step to the next.
//!
//! A tool can also be *removed* (an MCP server dropped it from its list): it leaves the pool
//! and the search index, and stops being callable at once; a listed one keeps its place in the
//! native list (so the prefix stays valid) and the next step says it is gone.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::def::{Hit, ToolDef};
use crate::error::ToolsearchError;
use crate::index::ToolIndex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Pooled,
    Pending,
    Available,
    /// Removed by [`Catalog::remove`]: not searchable, not callable; kept in `order` if it was
    /// listed.
    Removed,
}

/// The tool catalog of one conversation: resident tools, the deferred pool, discoveries and the
/// step boundaries that decide when a discovery becomes callable.
///
/// Call [`Catalog::begin_step`] once per model request; its [`StepCatalog`] is that request's
/// native tool list and the delta to announce.
#[derive(Debug, Clone)]
pub struct Catalog {
    enabled: bool,
    tools: Vec<ToolDef>,
    status: Vec<Status>,
    by_name: HashMap<String, usize>,
    /// Available tools, in the order they joined.
    order: Vec<usize>,
    /// Tools that join at the next step, in the order they were found or added.
    pending: Vec<usize>,
    /// Names a restored state listed but no added tool has yet; they join when added.
    awaiting: Vec<String>,
    /// Listed tools removed since the last step boundary, in removal order.
    removed: Vec<usize>,
    step: u64,
    /// The searchable tools' index, shared with the other catalogs of the process over the
    /// same tools (`shared.rs`); copied before a tool is added to a shared one.
    index: Arc<ToolIndex>,
    /// The index must be built again before the next search: it was never built (a catalog
    /// indexes its tools when it first searches, so one that never searches costs nothing),
    /// or a tool was removed or changed.
    index_stale: bool,
    /// Hits below this share of the best score are left out (0: none).
    min_relative_score: f64,
    /// The hybrid ranker, when [`Catalog::set_semantic`] gave one.
    #[cfg(feature = "semantic")]
    semantic: Option<Box<crate::semantic::SemanticRanker>>,
}

/// One model request's view of the catalog.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepCatalog {
    /// The step number, from 1.
    pub step: u64,
    /// The native tool list for this request: the previous step's list with `delta` appended.
    pub tools: Vec<ToolDef>,
    /// Tools that joined at this step (empty on the first step for the resident tools, which
    /// the conversation starts with).
    pub delta: Vec<ToolDef>,
    /// Names of listed tools removed since the previous step, in removal order: they stay in
    /// `tools` (the prefix does not change) but can no longer be called; announce them.
    pub removed: Vec<String>,
}

/// What a history store keeps of a catalog: enough to rebuild the same tool list after a
/// restart, given the same tools are added again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CatalogState {
    /// Steps begun so far.
    pub step: u64,
    /// Names of the available tools, in the order they joined (resident tools included).
    pub available: Vec<String>,
    /// Names that join at the next step (found by a search, or not registered at the moment).
    pub pending: Vec<String>,
    /// Names among `available` that were removed: listed, but not callable.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

impl Catalog {
    /// An empty catalog; without toolsearch there is no pool: every tool added is treated as
    /// resident, and [`Catalog::search`] only finds tools, never changes the list.
    fn empty(toolsearch_enabled: bool) -> Self {
        Self {
            enabled: toolsearch_enabled,
            tools: Vec::new(),
            status: Vec::new(),
            by_name: HashMap::new(),
            order: Vec::new(),
            pending: Vec::new(),
            awaiting: Vec::new(),
            removed: Vec::new(),
            step: 0,
            index: Arc::new(ToolIndex::default()),
            index_stale: true,
            min_relative_score: 0.0,
            #[cfg(feature = "semantic")]
            semantic: None,
        }
    }

    /// An empty catalog with toolsearch on: deferred tools wait in the pool until a search
    /// finds them.
    pub fn with_toolsearch() -> Self {
        Self::empty(true)
    }

    /// An empty catalog without a pool: every tool added is offered from the start, as if
    /// resident, and [`Catalog::search`] only finds tools, it never changes the list.
    pub fn without_toolsearch() -> Self {
        Self::empty(false)
    }

    /// Leaves weak hits out of [`Catalog::search`] (so they do not join the list): a hit after
    /// the first one whose score is below `ratio` times the best score of the search. `0`
    /// (the default) keeps every hit; `select:` hits (score 0) are never left out.
    pub fn set_min_relative_score(&mut self, ratio: f64) {
        self.min_relative_score = if ratio.is_finite() {
            ratio.clamp(0.0, 1.0)
        } else {
            0.0
        };
    }

    /// Ranks every later search with the hybrid ranker (sentence embeddings and the lexical
    /// score, [`crate::semantic`]) instead of the lexical ranker alone. Tools are embedded when
    /// a search first needs them; `ranker` decides whether their vectors are cached in a file.
    #[cfg(feature = "semantic")]
    pub fn set_semantic(&mut self, ranker: crate::semantic::SemanticRanker) {
        self.semantic = Some(Box::new(ranker));
    }

    /// The hybrid ranker, if [`Catalog::set_semantic`] gave one.
    #[cfg(feature = "semantic")]
    pub fn semantic(&self) -> Option<&crate::semantic::SemanticRanker> {
        self.semantic.as_deref()
    }

    /// Whether toolsearch (the pool) is on.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Steps begun so far.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// Adds a tool at any time (TS-5). A resident tool added before the first step is available
    /// from the first step; one added later joins at the next step, announced in that step's
    /// delta. A deferred tool enters the pool.
    ///
    /// Adding a name that exists replaces its definition in place: an available tool stays where
    /// it is, and a pooled tool that became resident joins at the next step.
    ///
    /// `add` does not check the definition; [`Catalog::try_add`] does, and is the one to use
    /// for definitions from outside (an MCP server, a file).
    pub fn add(&mut self, def: ToolDef) {
        let resident = def.resident || !self.enabled;
        if let Some(&i) = self.by_name.get(&def.name) {
            let searchable_changed = self.searchable(&self.tools[i]) != self.searchable(&def);
            let text_changed = self.tools[i].description != def.description
                || self.tools[i].input_schema != def.input_schema
                || self.tools[i].origin != def.origin;
            if searchable_changed || text_changed {
                self.index_stale = true;
            }
            self.tools[i] = def;
            if self.status[i] == Status::Removed {
                // Back after a removal: in the list again if it is still there, otherwise it
                // starts over like a new tool.
                self.index_stale = true;
                self.removed.retain(|&r| r != i);
                if self.order.contains(&i) {
                    self.status[i] = Status::Available;
                    return;
                }
                self.status[i] = Status::Pooled;
            }
            if resident && self.status[i] == Status::Pooled {
                self.join(i);
            }
            return;
        }
        let i = self.tools.len();
        self.by_name.insert(def.name.clone(), i);
        if self.searchable(&def) && !self.index_stale {
            Arc::make_mut(&mut self.index).insert(&def);
        }
        let restored = match self.awaiting.iter().position(|n| *n == def.name) {
            Some(pos) => {
                self.awaiting.remove(pos);
                true
            }
            None => false,
        };
        self.tools.push(def);
        self.status.push(Status::Pooled);
        if restored {
            // It was in the list (or about to be) before a restart: announce it like a find.
            self.pend(i);
        } else if resident {
            self.join(i);
        }
    }

    /// Makes tool `i` join at the next step.
    fn pend(&mut self, i: usize) {
        self.status[i] = Status::Pending;
        self.pending.push(i);
    }

    /// Makes tool `i` available now (before the first step) or at the next step.
    fn join(&mut self, i: usize) {
        if self.step == 0 {
            self.status[i] = Status::Available;
            self.order.push(i);
        } else {
            self.pend(i);
        }
    }

    fn searchable(&self, def: &ToolDef) -> bool {
        !self.enabled || !def.resident
    }

    /// Removes a tool (TS-5: an MCP server no longer lists it). It is no longer callable nor
    /// searchable, from now on. A tool in the native list keeps its place there — the list
    /// still only grows at its end — and the next [`StepCatalog::removed`] names it; a pooled or
    /// pending one simply leaves. Adding it again brings it back ([`Catalog::add`]). Returns
    /// whether the tool was there to remove.
    pub fn remove(&mut self, name: &str) -> bool {
        let Some(&i) = self.by_name.get(name) else {
            self.awaiting.retain(|n| n != name);
            return false;
        };
        match self.status[i] {
            Status::Removed => return false,
            Status::Pending => self.pending.retain(|&p| p != i),
            Status::Available => self.removed.push(i),
            Status::Pooled => {}
        }
        if self.searchable(&self.tools[i]) {
            self.index_stale = true;
        }
        self.status[i] = Status::Removed;
        true
    }

    /// Whether `name` was removed and not added again.
    pub fn is_removed(&self, name: &str) -> bool {
        self.by_name
            .get(name)
            .is_some_and(|&i| self.status[i] == Status::Removed)
    }

    /// Searches the deferred tools — those still in the pool and those already found, so the
    /// model can look one up again — and returns at most `k` hits (see [`ToolIndex::search`]).
    /// Resident tools are not searched: they are always in the list. Hits still in the pool
    /// become pending: they join the catalog at the next step, not this one (TS-2).
    pub fn search(&mut self, query: &str, k: usize) -> Vec<Hit> {
        let hits = self.peek(query, k);
        for hit in &hits {
            if let Some(&i) = self.by_name.get(&hit.name)
                && self.status[i] == Status::Pooled
            {
                self.pend(i);
            }
        }
        hits
    }

    /// Adds a tool as [`Catalog::add`] does, after [`ToolDef::validate`]: a definition with an
    /// empty name, whitespace in its name or a schema that is not an object is refused.
    pub fn try_add(&mut self, def: ToolDef) -> Result<(), ToolsearchError> {
        def.validate()?;
        self.add(def);
        Ok(())
    }

    /// The hits [`Catalog::search`] would return, without changing the catalog: nothing
    /// found joins the list.
    pub fn peek(&mut self, query: &str, k: usize) -> Vec<Hit> {
        if self.index_stale {
            let searchable: Vec<&ToolDef> = self
                .tools
                .iter()
                .zip(&self.status)
                .filter(|(d, st)| self.searchable(d) && **st != Status::Removed)
                .map(|(d, _)| d)
                .collect();
            self.index = crate::shared::index_for(&searchable);
            self.index_stale = false;
            #[cfg(feature = "semantic")]
            if let Some(ranker) = &mut self.semantic {
                ranker.reset();
            }
        }
        #[cfg(feature = "semantic")]
        let mut hits = match &mut self.semantic {
            Some(ranker) => {
                if ranker.rows() < self.index.len() {
                    // The index holds the searchable tools that are not removed, in add order.
                    let next: Vec<&ToolDef> = self
                        .tools
                        .iter()
                        .zip(&self.status)
                        .filter(|(d, st)| (!self.enabled || !d.resident) && **st != Status::Removed)
                        .map(|(d, _)| d)
                        .skip(ranker.rows())
                        .collect();
                    ranker.extend(&next);
                }
                ranker.search(&self.index, query, k)
            }
            None => self.index.search(query, k),
        };
        #[cfg(not(feature = "semantic"))]
        let mut hits = self.index.search(query, k);
        if self.min_relative_score > 0.0 {
            let best = hits.iter().map(|h| h.score).fold(0.0f64, f64::max);
            let floor = best * self.min_relative_score;
            let mut first = true;
            hits.retain(|h| std::mem::take(&mut first) || h.score >= floor);
        }
        hits
    }

    /// Starts a model request: pending tools join the end of the list, and the returned
    /// [`StepCatalog`] holds the list and what joined.
    pub fn begin_step(&mut self) -> StepCatalog {
        let before = self.order.len();
        for i in std::mem::take(&mut self.pending) {
            self.status[i] = Status::Available;
            self.order.push(i);
        }
        self.step += 1;
        StepCatalog {
            step: self.step,
            tools: self.order.iter().map(|&i| self.tools[i].clone()).collect(),
            delta: self.order[before..]
                .iter()
                .map(|&i| self.tools[i].clone())
                .collect(),
            removed: std::mem::take(&mut self.removed)
                .into_iter()
                .map(|i| self.tools[i].name.clone())
                .collect(),
        }
    }

    /// The tools of the current step's list (TS-3): resident tools first, in add order, then
    /// the rest in the order they joined. Removed tools keep their place here; ask
    /// [`Catalog::is_available`] whether a tool can be called.
    pub fn available(&self) -> Vec<&ToolDef> {
        self.order.iter().map(|&i| &self.tools[i]).collect()
    }

    /// Whether `name` is in the current step's list.
    pub fn is_available(&self, name: &str) -> bool {
        self.by_name
            .get(name)
            .is_some_and(|&i| self.status[i] == Status::Available)
    }

    /// The definition of any added tool, available or not.
    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// What to persist so that [`Catalog::restore`] rebuilds this list.
    pub fn state(&self) -> CatalogState {
        let names = |list: &[usize]| -> Vec<String> {
            list.iter().map(|&i| self.tools[i].name.clone()).collect()
        };
        let mut pending = names(&self.pending);
        pending.extend(self.awaiting.iter().cloned());
        let removed: Vec<usize> = self
            .order
            .iter()
            .copied()
            .filter(|&i| self.status[i] == Status::Removed)
            .collect();
        CatalogState {
            step: self.step,
            available: names(&self.order),
            pending,
            removed: names(&removed),
        }
    }

    /// Rebuilds the list from a persisted state, after the tools have been added again.
    ///
    /// Tools listed as available are available again, in their old order, with no delta.
    /// Resident tools the state does not list (new since) and listed tools that are not added
    /// yet join at the next step when they arrive, so the list still only grows at its end.
    ///
    /// A listed tool the state marks removed is available again at its place when it was added
    /// again (it came back; the caller announces it), and leaves the list when it was not —
    /// the only way a restart can shorten the list.
    pub fn restore(&mut self, state: &CatalogState) {
        self.status.fill(Status::Pooled);
        self.order.clear();
        self.pending.clear();
        self.awaiting.clear();
        self.removed.clear();
        self.step = state.step;
        for name in &state.available {
            match self.by_name.get(name) {
                Some(&i) if self.status[i] == Status::Pooled => {
                    self.status[i] = Status::Available;
                    self.order.push(i);
                }
                Some(_) => {}
                None if state.removed.contains(name) => {}
                None => self.await_name(name),
            }
        }
        for name in &state.pending {
            match self.by_name.get(name) {
                Some(&i) if self.status[i] == Status::Pooled => self.pend(i),
                Some(_) => {}
                None => self.await_name(name),
            }
        }
        for i in 0..self.tools.len() {
            let resident = self.tools[i].resident || !self.enabled;
            if resident && self.status[i] == Status::Pooled {
                self.join(i);
            }
        }
    }

    fn await_name(&mut self, name: &str) {
        if !self.awaiting.iter().any(|n| n == name) {
            self.awaiting.push(name.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deferred(name: &str) -> ToolDef {
        ToolDef::new(name, format!("the {name} tool"), json!({"type": "object"}))
    }

    #[test]
    fn a_removed_tool_keeps_its_place_is_announced_once_and_can_come_back() {
        let mut catalog = Catalog::with_toolsearch();
        catalog.add(ToolDef {
            resident: true,
            ..deferred("a")
        });
        catalog.add(deferred("b"));
        catalog.add(deferred("c"));
        catalog.search("select:b", 5);
        catalog.begin_step();
        let listed = catalog.begin_step();
        assert!(catalog.remove("b"));
        assert!(!catalog.remove("b"), "once");
        assert!(catalog.remove("c"), "a pooled tool leaves the pool");
        assert!(!catalog.remove("zzz"));
        assert!(!catalog.is_available("b") && catalog.is_removed("b"));
        assert!(catalog.search("select:b,c", 5).is_empty());
        let step = catalog.begin_step();
        assert_eq!(step.tools, listed.tools, "the list does not change");
        assert_eq!(step.removed, ["b"], "only a listed tool is announced");
        assert!(catalog.begin_step().removed.is_empty(), "announced once");
        assert_eq!(catalog.state().removed, ["b"]);

        catalog.add(deferred("b"));
        assert!(catalog.is_available("b"), "back at its place");
        let step = catalog.begin_step();
        assert_eq!(step.tools, listed.tools);
        assert!(step.delta.is_empty() && step.removed.is_empty());
        catalog.add(deferred("c"));
        assert_eq!(catalog.search("select:c", 5)[0].name, "c", "pooled again");
    }

    #[test]
    fn replacing_a_definition_keeps_its_place() {
        let mut catalog = Catalog::with_toolsearch();
        catalog.add(ToolDef {
            resident: true,
            ..deferred("a")
        });
        catalog.add(deferred("b"));
        catalog.search("select:b", 5);
        catalog.begin_step();
        catalog.add(ToolDef::new("b", "better", json!({"type": "object"})));
        let step = catalog.begin_step();
        assert!(step.delta.is_empty());
        assert_eq!(step.tools[1].description, "better");
        assert_eq!(catalog.search("better", 5)[0].name, "b");
    }

    #[test]
    fn catalogs_over_the_same_tools_share_one_index_until_one_adds_a_tool() {
        let fill = || {
            let mut c = Catalog::with_toolsearch();
            for name in ["shared_read_file", "shared_write_file", "shared_send_mail"] {
                c.add(deferred(name));
            }
            c
        };
        let (mut a, mut b) = (fill(), fill());
        assert_eq!(a.peek("mail", 1)[0].name, "shared_send_mail");
        assert_eq!(b.peek("mail", 1)[0].name, "shared_send_mail");
        assert!(Arc::ptr_eq(&a.index, &b.index), "one index for both");
        // A tool added to one catalog is copied into its own index; the other's is untouched.
        b.add(deferred("shared_mail_merge"));
        assert!(!Arc::ptr_eq(&a.index, &b.index));
        assert_eq!((a.index.len(), b.index.len()), (3, 4));
        assert!(
            a.peek("merge", 5)
                .iter()
                .all(|h| h.name != "shared_mail_merge")
        );
        assert_eq!(b.peek("merge", 1)[0].name, "shared_mail_merge");
        // A catalog that never searched built no index at all.
        assert!(fill().index.is_empty());
    }
}
