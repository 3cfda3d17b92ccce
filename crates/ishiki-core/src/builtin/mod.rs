//! The built-in tools: `read` (READ-*, VIS-*), `search` (TS-1), `codemode` (CM-*),
//! `send_message` (SEND-*), `finish` and `wait` (direct only, CM-4), one module each; this
//! module holds what they share with the runtime.

use std::sync::{Arc, Mutex, MutexGuard};

use ishiki_resources::{ArtifactStore, AssetStore, ResourceCenter, WorkspaceScheme};
use ishiki_toolsearch::{Catalog, ToolDef};
use serde_json::Value;

use crate::clock::Clock;
use crate::platform::{Platform, VisionModel};
use crate::profile::Assembly;

#[cfg(feature = "codemode")]
mod codemode;
mod control;
mod direct;
pub(crate) mod programs;
mod read;
mod search;
mod send_message;

#[cfg(feature = "codemode")]
pub(crate) use codemode::CodemodeTool;
pub(crate) use control::ControlTool;
pub(crate) use direct::{DirectCall, DirectTool, ToolLookup, call_plain};
pub(crate) use programs::{ProgramSettings, Sandbox};
pub(crate) use read::ReadTool;
pub(crate) use search::SearchTool;
pub(crate) use send_message::SendMessageTool;

/// What the runtime and the built-in tools share; the runtime builds it when it opens.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) center: ResourceCenter,
    pub(crate) artifacts: Arc<dyn ArtifactStore>,
    pub(crate) assets: Arc<dyn AssetStore>,
    pub(crate) workspace: Arc<WorkspaceScheme>,
    pub(crate) platform: Arc<dyn Platform>,
    pub(crate) vision: Option<Arc<dyn VisionModel>>,
    pub(crate) vision_target: Option<String>,
    pub(crate) image_input: bool,
    pub(crate) clock: Arc<dyn Clock>,
    /// Where tool calls abandoned at their deadline are counted (crate::guard).
    pub(crate) abandoned: Arc<crate::guard::AbandonedWork>,
    pub(crate) assembly: Assembly,
    /// The tool catalog (read and changed through [`Shared::catalog_mut`]).
    pub(crate) catalog: Mutex<Catalog>,
    /// Retrieval telemetry: the latest searches of this conversation (query, hit names).
    pub(crate) searches: Mutex<Vec<(String, Vec<String>)>>,
}

/// How many recent searches [`Shared::searches_missing`] looks back on.
const SEARCH_LOG: usize = 64;

impl Shared {
    /// Records a search and its hits for retrieval telemetry.
    pub(crate) fn record_search(&self, query: &str, hits: Vec<String>) {
        let mut log = self
            .searches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if log.len() >= SEARCH_LOG {
            log.remove(0);
        }
        log.push((query.to_owned(), hits));
    }

    /// The queries of earlier searches in this conversation that did not return `tool`.
    pub(crate) fn searches_missing(&self, tool: &str) -> Vec<String> {
        let log = self
            .searches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        log.iter()
            .filter(|(_, hits)| !hits.iter().any(|h| h == tool))
            .map(|(q, _)| q.clone())
            .collect()
    }

    pub(crate) fn catalog_mut(&self) -> MutexGuard<'_, Catalog> {
        self.catalog
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The definition of a built-in tool: always resident, origin `builtin`.
fn builtin_def(name: &str, description: &str, input_schema: Value) -> ToolDef {
    ToolDef {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema,
        output_schema: None,
        resident: true,
        origin: Some("builtin".to_owned()),
    }
}

fn string_field<'a>(input: &'a Value, key: &str) -> &'a str {
    input.get(key).and_then(Value::as_str).unwrap_or_default()
}
