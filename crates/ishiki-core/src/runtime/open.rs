//! Opening a runtime: the state directory, stores, resource center, built-in tools, catalog
//! and the history restored from the store; calls interrupted by a crash are answered (SEC-4).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use ishiki_outlet::Outlet;
use ishiki_projection::{DeliveryRow, DeliveryState};
use ishiki_resources::{
    ArtifactStore, AssetScheme, AssetStore, DiskArtifactStore, DiskAssetStore, LocalScheme,
    ResourceCenter, WorkspaceScheme,
};
use ishiki_tool::{Tool, ToolErrorKind};
use ishiki_toolsearch::Catalog;
use serde_json::Value;

use super::meta::Meta;
use super::{
    CallReport, CatalogBlob, Entry, MessageRecord, PlannedCall, Runtime, RuntimeBuilder,
    StoredRecord, checked_definition, stored_message,
};
use crate::builtin::Shared;
use crate::context::{ContextState, Window};
use crate::error::{RuntimeError, RuntimeErrorKind, err};
use crate::profile::Assembly;
use crate::registry::{self, Origin, Registry};
use crate::store::{Batch, HistoryStore, StoreErrorKind};
use crate::{builtin, decode, state_dir};

impl Runtime {
    pub(super) async fn open(b: RuntimeBuilder) -> Result<Self, RuntimeError> {
        let dir = &b.state_dir;
        b.check_store_locations()?;
        let workspace_root = b.workspace_dir();
        std::fs::create_dir_all(dir)
            .map_err(|e| err(RuntimeErrorKind::Io, "cannot create the state directory")(&e))?;
        let state_lock = state_dir::lock(dir)?;
        let state_identity = state_dir::StateIdentity::of(dir)?;
        let evidence = state_dir::conversation_evidence(dir)?;
        let artifacts: Arc<dyn ArtifactStore> = match b.artifacts.clone() {
            Some(store) => store,
            None => Arc::new(
                DiskArtifactStore::open(dir.join("artifacts"))
                    .map_err(|e| err(RuntimeErrorKind::Io, "artifacts")(&e))?,
            ),
        };
        let assets: Arc<dyn AssetStore> = match b.assets.clone() {
            Some(store) => store,
            None => Arc::new(
                DiskAssetStore::open(dir.join("assets"))
                    .map_err(|e| err(RuntimeErrorKind::Io, "assets")(&e))?,
            ),
        };
        std::fs::create_dir_all(&workspace_root)
            .map_err(|e| err(RuntimeErrorKind::Io, "cannot create the workspace")(&e))?;
        let workspace = Arc::new(
            WorkspaceScheme::new(&workspace_root)
                .map_err(|e| err(RuntimeErrorKind::Io, "workspace")(&e))?,
        );
        let center = ResourceCenter::new();
        center.register_file_scheme(workspace.clone());
        // The context engine's archives read back in this conversation only.
        let own_archives = Arc::new(crate::archives::OwnArchives::default());
        center.register_file_scheme(Arc::new(crate::archives::ConversationArtifacts::new(
            artifacts.clone(),
            own_archives.clone(),
        )));
        center.register_file_scheme(Arc::new(AssetScheme(assets.clone())));
        if !b.local_roots.is_empty() {
            center.register_file_scheme(Arc::new(LocalScheme::new(b.local_roots.clone())));
        }
        for scheme in &b.file_schemes {
            center.register_file_scheme(scheme.clone());
        }
        for handler in &b.schemes {
            center.register(handler.clone());
        }

        let assembly = b.assembly;
        let codemode_on = assembly.profile.codemode.enable;
        builtin::programs::check_available(codemode_on)?;
        let toolsearch_on = assembly.profile.toolsearch.enable;
        let catalog = semantic_catalog(
            if toolsearch_on {
                Catalog::with_toolsearch()
            } else {
                Catalog::without_toolsearch()
            },
            &assembly,
            dir,
            #[cfg(feature = "semantic")]
            b.semantic_model,
        )?;
        let shared = Arc::new(Shared {
            center: center.clone(),
            artifacts: artifacts.clone(),
            assets,
            workspace,
            platform: b.platform,
            vision: b.vision,
            vision_target: assembly.vision.as_ref().map(|v| v.name.clone()),
            image_input: assembly.image_input,
            clock: b.clock,
            abandoned: b
                .abandoned
                .clone()
                .unwrap_or_else(crate::guard::AbandonedWork::process),
            assembly,
            catalog: std::sync::Mutex::new(catalog),
            searches: std::sync::Mutex::default(),
        });

        // Built-ins first, resident: read, search, codemode, send_message, finish, wait.
        // `read` and `codemode` serve direct calls their own way (builtin::DirectTool).
        let read = Arc::new(builtin::ReadTool::for_model(shared.clone()));
        let mut direct: HashMap<String, Arc<dyn builtin::DirectTool>> = HashMap::new();
        direct.insert(read.definition().name, read.clone());
        let mut tools: Vec<Arc<dyn Tool>> = vec![read];
        if toolsearch_on {
            tools.push(Arc::new(builtin::SearchTool::new(shared.clone())));
        }
        let codemode_index = codemode_on.then_some(tools.len());
        tools.push(Arc::new(builtin::SendMessageTool::new(shared.clone())));
        tools.push(Arc::new(builtin::ControlTool::finish()));
        tools.push(Arc::new(builtin::ControlTool::wait()));
        let registered = b.tools.len();
        tools.extend(b.tools);
        if let Some(index) = codemode_index
            && let Some(codemode) = builtin::programs::insert_tool(&mut tools, index, toolsearch_on)
        {
            direct.insert(codemode.definition().name, codemode);
        }
        // Everything before the registered tools is built in (codemode among them).
        let builtin_count = tools.len() - registered;
        let mut registry = Registry::default();
        for (k, tool) in tools.into_iter().enumerate() {
            let (def, validator) = checked_definition(tool.as_ref(), "registered")?;
            let origin = match direct.remove(&def.name) {
                Some(direct) => Origin::BuiltinDirect(direct),
                None if k < builtin_count => Origin::Builtin,
                None => Origin::Registered,
            };
            let entry = registry::Entry {
                def,
                tool,
                validator,
                origin,
            };
            registry.register(entry, &mut shared.catalog_mut())?;
        }

        let store: Box<dyn HistoryStore> = match b.store {
            Some(store) => store,
            None => state_dir::open_history(dir, b.durability, evidence)?,
        };
        // A row the store itself could not read is damage (its message names table and row);
        // RuntimeError::store gives it that kind and keeps the store's own.
        let stored = store.load().await.map_err(|e| {
            let context = match e.kind() {
                StoreErrorKind::Corrupt => "the history store is damaged",
                _ => "cannot load the history store",
            };
            RuntimeError::store(context, &e)
        })?;

        let mut history = super::history::History::default();
        for (m, withdrawn) in stored.messages {
            let row = format!("id `{}`", m.id);
            // The record's usage and input transformations are decoded as strictly as the
            // message, and stay in the store (nothing in a request reads them back).
            let MessageRecord { message, .. } = decode::strict("messages", &row, m.json)?;
            if message.id != m.id {
                return Err(decode::damaged(
                    "messages",
                    &row,
                    format!("the record's id is `{}`", message.id),
                ));
            }
            history.push(Entry::new(Arc::new(message), withdrawn));
        }
        let mut records = Vec::new();
        let mut not_downloaded = BTreeMap::new();
        for a in stored.attachments {
            let row = format!("id `{}`", a.id);
            let stored: StoredRecord = decode::strict("attachments", &row, a.json)?;
            if stored.record.id != a.id {
                return Err(decode::damaged(
                    "attachments",
                    &row,
                    format!("the record's id is `{}`", stored.record.id),
                ));
            }
            if let Some(reason) = stored.not_downloaded {
                not_downloaded.insert(stored.record.id.clone(), reason);
            }
            records.push(stored.record);
        }
        let delivery = delivery_state(stored.delivery, stored.delivery_records)?;
        let catalog_stored = stored.catalog.clone();
        let blob: CatalogBlob = match stored.catalog {
            Some(v) => decode::strict("state", "key `catalog`", v)?,
            None => CatalogBlob::default(),
        };
        if let Some(state) = &blob.catalog {
            shared.catalog_mut().restore(state);
        }
        let announced = if Meta::Step.is_in(&stored.meta) {
            blob.announced
        } else {
            // A new session: what the first request lists needs no announcement.
            registry
                .defs()
                .filter(|d| d.resident || !shared.assembly.profile.toolsearch.enable)
                .map(|d| d.name.clone())
                .collect()
        };
        let step: u64 = Meta::Step.read(&stored.meta)?.unwrap_or(0);
        let context: ContextState = Meta::Context.read(&stored.meta)?.unwrap_or_default();
        for url in context.archive_urls() {
            own_archives.insert(url);
        }
        let window = b.window.or_else(|| {
            let caps = &shared.assembly.main.capabilities;
            caps.context_window.map(|tokens| Window {
                tokens: u64::from(tokens),
                output: u64::from(caps.max_output_tokens.unwrap_or(0)),
            })
        });
        let context_config = shared.assembly.profile.context.clone();
        let interrupted: Vec<PlannedCall> =
            Meta::PendingCalls.read(&stored.meta)?.unwrap_or_default();

        let sandbox =
            builtin::programs::sandbox(shared.assembly.profile.codemode.enable, b.programs);

        let mut runtime = Self {
            shared,
            outlet: Outlet::new(artifacts).with_budget(b.budget),
            tools: registry,
            sandbox,
            store,
            in_doubt: None,
            history,
            records,
            not_downloaded,
            rejected: BTreeMap::new(),
            delivery,
            catalog_stored,
            announced,
            step,
            planned: Vec::new(),
            executing: false,
            edit_policy: b.edit_policy,
            last_sent: Vec::new(),
            context,
            context_config,
            window,
            fold_cache: Mutex::new(HashMap::new()),
            own_archives,
            media_cache: Mutex::new(HashMap::new()),
            state_identity,
            _state_lock: state_lock,
        };
        runtime.answer_interrupted(&interrupted).await?;
        Ok(runtime)
    }

    /// Calls whose results were never stored — a crash between committing a response and
    /// committing its results, or an `execute` that was dropped (cancelled) or failed before
    /// storing them — are answered with an error the model can act on, so history stays
    /// well-formed and nothing runs twice behind the model's back (SEC-4).
    pub(super) async fn answer_interrupted(
        &mut self,
        calls: &[PlannedCall],
    ) -> Result<Vec<CallReport>, RuntimeError> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let reports: Vec<CallReport> = calls
            .iter()
            .map(|c| CallReport {
                call_id: c.id.clone(),
                name: c.name.clone(),
                is_error: true,
                error_kind: Some(ToolErrorKind::Unavailable),
                text: format!(
                    "the call to `{}` was interrupted (the runtime stopped before its result was saved); it may or may not have taken effect: check, then call it again if needed",
                    c.name
                ),
                attachments: Vec::new(),
                continuation: None,
                missed_by_search: Vec::new(),
            })
            .collect();
        let message = self.results_message(self.step, &reports);
        let mut batch = Batch::default();
        batch.messages.push(stored_message(&message)?);
        Meta::PendingCalls.put(&mut batch, &[] as &[PlannedCall])?;
        self.commit_batch(&batch, "cannot store the interrupted results")
            .await?;
        self.history.push(Entry::new(Arc::new(message), false));
        Ok(reports)
    }
}

/// The file in the state directory that keeps the vectors of the catalog's tools between runs
/// (TS-7): derived data, so a damaged one is recomputed.
#[cfg(feature = "semantic")]
pub(crate) const EMBEDDINGS_FILE: &str = "toolsearch-embeddings.json";

/// The catalog with the hybrid ranker when the profile sets `toolsearch.semantic` (TS-7),
/// vectors cached in the state directory. The model is the one given, else loaded from the
/// profile's path; one that cannot be loaded fails the build, naming the path.
#[cfg(feature = "semantic")]
fn semantic_catalog(
    mut catalog: Catalog,
    assembly: &Assembly,
    dir: &std::path::Path,
    model: Option<Arc<ishiki_toolsearch::semantic::Embedder>>,
) -> Result<Catalog, RuntimeError> {
    if assembly.profile.toolsearch.semantic.is_none() {
        return Ok(catalog);
    }
    let model = match model {
        Some(model) => model,
        None => match crate::profile::load_semantic_model(&assembly.profile) {
            Ok(Some(model)) => model,
            Ok(None) => return Ok(catalog),
            Err(e) => return Err(RuntimeError::new(RuntimeErrorKind::Config, e.message())),
        },
    };
    catalog.set_semantic(
        ishiki_toolsearch::semantic::SemanticRanker::with_cache_file(
            model,
            dir.join(EMBEDDINGS_FILE),
        ),
    );
    Ok(catalog)
}

/// Without the `semantic` feature there is no hybrid ranker: a profile that asks for one is
/// refused, never ranked lexically in its place.
#[cfg(not(feature = "semantic"))]
fn semantic_catalog(
    catalog: Catalog,
    assembly: &Assembly,
    _dir: &std::path::Path,
) -> Result<Catalog, RuntimeError> {
    if assembly.profile.toolsearch.semantic.is_some() {
        return Err(RuntimeError::new(
            RuntimeErrorKind::Config,
            "the profile sets toolsearch.semantic, but ishiki-core was built without its \
             `semantic` feature",
        ));
    }
    Ok(catalog)
}

/// The delivery state from the store: a whole state (what stores before schema version 2
/// kept, or a store that still writes one) with the single records' states over it. A record
/// in both has the union of the flags, which only ever turn on.
fn delivery_state(
    whole: Option<Value>,
    records: BTreeMap<String, Value>,
) -> Result<DeliveryState, RuntimeError> {
    let mut rows = Vec::new();
    if let Some(v) = whole {
        let state: DeliveryState = decode::strict("state", "key `delivery`", v)?;
        if records.is_empty() {
            return Ok(state);
        }
        rows.extend_from_slice(state.rows());
    }
    for (id, value) in records {
        // Each row on its own, so a damaged one is named by its id.
        let row = format!("id `{id}`");
        let decoded: DeliveryRow = decode::strict("delivery", &row, value)?;
        if decoded.id != id {
            return Err(decode::damaged(
                "delivery",
                &row,
                format!("the row holds the state of record `{}`", decoded.id),
            ));
        }
        rows.push(decoded);
    }
    Ok(rows.into_iter().collect())
}
