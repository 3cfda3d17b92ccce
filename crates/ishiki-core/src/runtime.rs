//! The step loop: project a request, commit the response with its delivery state, execute the
//! calls, send each result through the outlet, commit results and attachment records.
//!
//! Invariants:
//! - a request's delivery-state change is written in the same store transaction as the
//!   assistant response it was sent for; a failed or aborted step writes nothing (PRJ-4, PRJ-13);
//! - nothing but the outlet decides what the model sees of a tool result (OUT-1);
//! - history stores resource references and source links, never a request's display choice
//!   (PRJ-1): attachment messages are recomputed by the projection for every request.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ishiki_codemode::{Limits, Sandbox, SandboxConfig, WorkerSpawn};
use ishiki_outlet::{Budget, Display, Emitted, Outlet};
use ishiki_projection::{
    AttachmentConfig, AttachmentContent, AttachmentRecord, DeliveryState, Lifetime, PendingChange,
    ProjectionInput, SourceLink, Verdict,
};
use ishiki_resources::{
    ArtifactScheme, ArtifactStore, AssetScheme, AssetStore, DiskArtifactStore, DiskAssetStore,
    FileScheme, LocalScheme, ResourceCenter, SchemeHandler, WorkspaceScheme,
};
use ishiki_toolsearch::{Catalog, CatalogState, ToolDef};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::builtin::{self, Shared};
use crate::clock::{Clock, SystemClock, rfc3339};
use crate::decode;
use crate::message::{
    DeltaEntry, MediaPart, Message, Model, ModelResponse, Part, Request, Role, ToolCall, ToolSpec,
};
use crate::platform::{NullPlatform, Platform, VisionModel};
use crate::profile::{Assembly, ToolCalling};
use crate::state_dir;
use crate::store::{
    Batch, Durability, HistoryStore, StoreErrorKind, StoredAttachment, StoredMessage,
};
use crate::text_protocol::{self, Segment};
use crate::tool::{Tool, ToolContext, ToolError};

/// What went wrong in the runtime itself (tool failures are results, not errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeError {
    message: String,
}

impl RuntimeError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuntimeError {}

fn err(context: &str) -> impl Fn(&dyn std::fmt::Display) -> RuntimeError + '_ {
    move |e| RuntimeError::new(format!("{context}: {e}"))
}

/// Builds a [`Runtime`]: the assembled profile, a state directory, and what to plug in.
#[derive(Debug)]
pub struct RuntimeBuilder {
    assembly: Assembly,
    state_dir: PathBuf,
    workspace_root: Option<PathBuf>,
    local_roots: Vec<(String, PathBuf)>,
    clock: Arc<dyn Clock>,
    platform: Arc<dyn Platform>,
    vision: Option<Arc<dyn VisionModel>>,
    tools: Vec<Arc<dyn Tool>>,
    schemes: Vec<Arc<dyn SchemeHandler>>,
    file_schemes: Vec<Arc<dyn FileScheme>>,
    worker: WorkerSpawn,
    durability: Durability,
    store: Option<Box<dyn HistoryStore>>,
    budget: Budget,
    codemode_limits: Option<Limits>,
    artifacts: Option<Arc<dyn ArtifactStore>>,
    assets: Option<Arc<dyn AssetStore>>,
    sandbox: Option<Sandbox>,
}

impl RuntimeBuilder {
    /// The workspace root on the host (default: `<state>/workspace`).
    pub fn workspace_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.workspace_root = Some(root.into());
        self
    }

    /// Adds a `local://` root; the name `""` is the default root (`local:///path`).
    pub fn local_root(mut self, name: impl Into<String>, dir: impl Into<PathBuf>) -> Self {
        self.local_roots.push((name.into(), dir.into()));
        self
    }

    /// The clock for timestamps and ids (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Where `send_message` delivers (default: nowhere).
    pub fn platform(mut self, platform: Arc<dyn Platform>) -> Self {
        self.platform = platform;
        self
    }

    /// The side model for `read(…?question=…)` (VIS-1).
    pub fn vision(mut self, vision: Arc<dyn VisionModel>) -> Self {
        self.vision = Some(vision);
        self
    }

    /// Registers a tool (resident or deferred, per its definition).
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Registers a scheme handler (e.g. `http`), RES-2.
    pub fn scheme(mut self, handler: Arc<dyn SchemeHandler>) -> Self {
        self.schemes.push(handler);
        self
    }

    /// Registers a file scheme, RES-3.
    pub fn file_scheme(mut self, scheme: Arc<dyn FileScheme>) -> Self {
        self.file_schemes.push(scheme);
        self
    }

    /// How codemode workers start (default: re-execute this binary; `main` must call
    /// [`ishiki_codemode::run_if_worker`] first).
    pub fn codemode_worker(mut self, worker: WorkerSpawn) -> Self {
        self.worker = worker;
        self
    }

    /// The codemode limits (wall clock, memory, instruction budget, sizes); default
    /// [`Limits::default`].
    pub fn codemode_limits(mut self, limits: Limits) -> Self {
        self.codemode_limits = Some(limits);
        self
    }

    /// Store durability (default: `Full`, survives power loss). Applies to the default
    /// SQLite store only; a store passed with [`store`](Self::store) has its own setting.
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// The history store (default: SQLite at `<state>/history.sqlite`). Any
    /// [`HistoryStore`] works: [`crate::MemoryStore`] for tests and embedders, a PostgreSQL
    /// store for several machines. Artifacts, assets and the default workspace stay in the
    /// state directory.
    pub fn store(mut self, store: Box<dyn HistoryStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// The outlet's display budget (default: 2000 lines, 30,000 UTF-16 units).
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Where artifacts live (default: `<state>/artifacts` on disk). Stores are shared: many
    /// runtimes may use one, e.g. an object store (`ishiki-objects`).
    pub fn artifacts(mut self, store: Arc<dyn ArtifactStore>) -> Self {
        self.artifacts = Some(store);
        self
    }

    /// Where inbound assets live (default: `<state>/assets` on disk).
    pub fn assets(mut self, store: Arc<dyn AssetStore>) -> Self {
        self.assets = Some(store);
        self
    }

    /// Runs codemode programs in this sandbox (its worker pool is shared by every runtime
    /// given a clone) instead of starting a pool of its own; the builder's worker and limits
    /// settings are then unused. Many conversations per process share one pool this way.
    pub fn codemode_sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// Opens the state directory and restores the runtime from it.
    pub fn build(self) -> Result<Runtime, RuntimeError> {
        Runtime::open(self)
    }
}

#[derive(Debug, Clone)]
struct Entry {
    message: Message,
    withdrawn: bool,
}

/// A call planned from a committed response. Persisted with the response, so a crash before the
/// results are committed can be answered on restart (SEC-4).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PlannedCall {
    id: String,
    name: String,
    input: Value,
    malformed: Option<String>,
}

/// A projected request, not yet committed. Dropping it (a failed or aborted step) changes
/// nothing (PRJ-4).
#[derive(Debug)]
pub struct Prepared {
    /// The step number (1-based count of model requests made by this session).
    pub step: u64,
    /// What the model receives.
    pub request: Request,
    pending: PendingChange,
    delta: Option<Message>,
    announced: Vec<String>,
}

/// One media attachment of a tool result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentInfo {
    /// The resource URL (`artifact://…` or `asset://…`).
    pub url: String,
    /// Media type.
    pub media_type: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Lifetime: `once`, `recent` or `retain`.
    pub lifetime: String,
}

/// What one call produced, as the model will see it.
#[derive(Debug, Clone, PartialEq)]
pub struct CallReport {
    /// The call id.
    pub call_id: String,
    /// The tool name.
    pub name: String,
    /// Whether the tool failed.
    pub is_error: bool,
    /// Exactly the text the model will see.
    pub text: String,
    /// Media attachments committed for this result.
    pub attachments: Vec<AttachmentInfo>,
    /// The `read` input that continues this output, if there is more.
    pub continuation: Option<String>,
    /// Retrieval telemetry: for a deferred (searchable) tool, the queries of earlier `search`
    /// calls in this conversation whose hits did not include it — the searches that missed
    /// the tool the model went on to use.
    pub missed_by_search: Vec<String>,
}

/// An inbound image as registered (PRJ-2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundImage {
    /// `asset://<UUID v7>`, or empty when the image was not downloaded.
    pub url: String,
    /// Media type.
    pub media_type: String,
    /// Size in bytes.
    pub bytes: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct CatalogBlob {
    catalog: Option<CatalogState>,
    announced: Vec<String>,
}

/// The Ishiki runtime for one conversation.
#[derive(Debug)]
pub struct Runtime {
    shared: Arc<Shared>,
    outlet: Outlet,
    /// Every registered tool with its definition, read once at start (definitions are fixed).
    tools: Vec<(ToolDef, Arc<dyn Tool>)>,
    validators: HashMap<String, Arc<jsonschema::Validator>>,
    sandbox: Option<Sandbox>,
    /// Behind a mutex only so that `Runtime` is `Sync` (stores need only be `Send`), which lets
    /// `execute` run in a task on a multi-threaded executor; every use has `&mut self`, so the
    /// lock is never contended (`get_mut`).
    store: Mutex<Box<dyn HistoryStore>>,
    history: Vec<Entry>,
    records: Vec<AttachmentRecord>,
    not_downloaded: BTreeMap<String, String>,
    /// Records a provider refused (record id → its reason): terminal from the next request.
    /// In memory only; their reason is persisted as delivered with the next response.
    rejected: BTreeMap<String, String>,
    delivery: DeliveryState,
    announced: Vec<String>,
    step: u64,
    planned: Vec<PlannedCall>,
    media_cache: Mutex<HashMap<String, Result<Option<String>, String>>>,
    /// Held for the runtime's lifetime; the last field, so it is released after the store.
    _state_lock: state_dir::StateLock,
}

impl Runtime {
    /// Starts building a runtime whose state lives in `state_dir` (history store, artifacts,
    /// assets; the workspace too unless set).
    pub fn builder(assembly: Assembly, state_dir: impl Into<PathBuf>) -> RuntimeBuilder {
        RuntimeBuilder {
            assembly,
            state_dir: state_dir.into(),
            workspace_root: None,
            local_roots: Vec::new(),
            clock: Arc::new(SystemClock),
            platform: Arc::new(NullPlatform),
            vision: None,
            tools: Vec::new(),
            schemes: Vec::new(),
            file_schemes: Vec::new(),
            worker: WorkerSpawn::CurrentExe,
            durability: Durability::Full,
            store: None,
            budget: Budget::default(),
            codemode_limits: None,
            artifacts: None,
            assets: None,
            sandbox: None,
        }
    }

    fn open(b: RuntimeBuilder) -> Result<Self, RuntimeError> {
        let dir = &b.state_dir;
        let workspace_root = b
            .workspace_root
            .clone()
            .unwrap_or_else(|| dir.join("workspace"));
        let mut roots = vec![("the workspace root".to_owned(), workspace_root.clone())];
        for (name, root) in &b.local_roots {
            roots.push((format!("the local root `{name}`"), root.clone()));
        }
        state_dir::check_roots(dir, &roots)?;
        std::fs::create_dir_all(dir).map_err(|e| err("cannot create the state directory")(&e))?;
        let state_lock = state_dir::lock(dir)?;
        let evidence = state_dir::conversation_evidence(dir)?;
        let artifacts: Arc<dyn ArtifactStore> = match b.artifacts.clone() {
            Some(store) => store,
            None => Arc::new(
                DiskArtifactStore::open(dir.join("artifacts")).map_err(|e| err("artifacts")(&e))?,
            ),
        };
        let assets: Arc<dyn AssetStore> = match b.assets.clone() {
            Some(store) => store,
            None => {
                Arc::new(DiskAssetStore::open(dir.join("assets")).map_err(|e| err("assets")(&e))?)
            }
        };
        std::fs::create_dir_all(&workspace_root)
            .map_err(|e| err("cannot create the workspace")(&e))?;
        let workspace =
            Arc::new(WorkspaceScheme::new(&workspace_root).map_err(|e| err("workspace")(&e))?);
        let center = ResourceCenter::new();
        center.register_file_scheme(workspace.clone());
        center.register_file_scheme(Arc::new(ArtifactScheme(artifacts.clone())));
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
        let toolsearch_on = assembly.profile.toolsearch.enable;
        let parts = builtin::SharedParts {
            center: center.clone(),
            artifacts: artifacts.clone(),
            assets,
            workspace,
            platform: b.platform,
            vision: b.vision,
            vision_target: assembly.vision.as_ref().map(|v| v.name.clone()),
            image_input: assembly.image_input,
            clock: b.clock,
        };
        let shared = Arc::new(Shared::new(parts, Catalog::new(toolsearch_on), assembly));

        // Built-ins first, resident: read, search, codemode, send_message, finish, wait.
        let mut tools: Vec<Arc<dyn Tool>> =
            vec![Arc::new(builtin::ReadTool::new(shared.clone(), false))];
        if toolsearch_on {
            tools.push(Arc::new(builtin::SearchTool::new(shared.clone())));
        }
        let codemode_index = codemode_on.then_some(tools.len());
        tools.push(Arc::new(builtin::SendMessageTool::new(shared.clone())));
        tools.push(Arc::new(builtin::ControlTool::finish()));
        tools.push(Arc::new(builtin::ControlTool::wait()));
        tools.extend(b.tools);
        if let Some(index) = codemode_index {
            // The codemode description lists the signatures of the resident callable tools; it
            // is fixed at start so the prefix stays stable; later tools come with deltas.
            let resident: Vec<ToolDef> = tools
                .iter()
                .map(|t| t.definition())
                .filter(|d| {
                    (d.resident || !toolsearch_on) && builtin::callable_from_program(&d.name)
                })
                .collect();
            tools.insert(index, Arc::new(builtin::CodemodeTool::new(&resident)));
        }
        let mut validators = HashMap::new();
        let mut seen = BTreeSet::new();
        for tool in &tools {
            let def = tool.definition();
            if !seen.insert(def.name.clone()) {
                return Err(RuntimeError::new(format!(
                    "two tools are named `{}`",
                    def.name
                )));
            }
            let validator = jsonschema::validator_for(&def.input_schema).map_err(|e| {
                RuntimeError::new(format!(
                    "tool `{}` has an invalid input schema: {e}",
                    def.name
                ))
            })?;
            validators.insert(def.name.clone(), Arc::new(validator));
            shared.catalog_mut().add(def);
        }

        let store: Box<dyn HistoryStore> = match b.store {
            Some(store) => store,
            None => Box::new(state_dir::open_history(dir, b.durability, evidence)?),
        };
        let stored = store.load().map_err(|e| match e.kind() {
            StoreErrorKind::Corrupt => decode::damaged_store(&e),
            _ => err("cannot load the history store")(&e),
        })?;

        let mut history = Vec::new();
        for (m, withdrawn) in stored.messages {
            let row = format!("id `{}`", m.id);
            let mut json = m.json;
            // The provider's usage is stored beside the assistant message it paid for (see
            // `commit`); it is no field of `Message`, but it is decoded as strictly.
            if let Value::Object(record) = &mut json
                && let Some(usage) = record.remove("usage")
            {
                let _: crate::message::Usage = decode::strict("messages", &row, usage)?;
            }
            let message: Message = decode::strict("messages", &row, json)?;
            if message.id != m.id {
                return Err(decode::damaged(
                    "messages",
                    &row,
                    format!("the record's id is `{}`", message.id),
                ));
            }
            history.push(Entry { message, withdrawn });
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
        let delivery: DeliveryState = match stored.delivery {
            Some(v) => decode::strict("state", "key `delivery`", v)?,
            None => DeliveryState::default(),
        };
        let blob: CatalogBlob = match stored.catalog {
            Some(v) => decode::strict("state", "key `catalog`", v)?,
            None => CatalogBlob::default(),
        };
        if let Some(state) = &blob.catalog {
            shared.catalog_mut().restore(state);
        }
        let announced = if stored.meta.contains_key("step") {
            blob.announced
        } else {
            // A new session: what the first request lists needs no announcement.
            tools
                .iter()
                .map(|t| t.definition())
                .filter(|d| d.resident || !shared.assembly.profile.toolsearch.enable)
                .map(|d| d.name)
                .collect()
        };
        let step: u64 = match stored.meta.get("step") {
            Some(v) => decode::strict("meta", "key `step`", v.clone())?,
            None => 0,
        };
        let interrupted: Vec<PlannedCall> = match stored.meta.get("pending_calls") {
            Some(v) => decode::strict("meta", "key `pending_calls`", v.clone())?,
            None => Vec::new(),
        };

        let sandbox = if !shared.assembly.profile.codemode.enable {
            None
        } else if let Some(sandbox) = b.sandbox {
            Some(sandbox)
        } else {
            let mut config = SandboxConfig {
                worker: b.worker,
                ..SandboxConfig::default()
            };
            if let Some(limits) = b.codemode_limits {
                config.limits = limits;
            }
            Some(Sandbox::new(config))
        };

        let mut runtime = Self {
            shared,
            outlet: Outlet::new(artifacts).with_budget(b.budget),
            tools: tools.into_iter().map(|t| (t.definition(), t)).collect(),
            validators,
            sandbox,
            store: Mutex::new(store),
            history,
            records,
            not_downloaded,
            rejected: BTreeMap::new(),
            delivery,
            announced,
            step,
            planned: Vec::new(),
            media_cache: Mutex::new(HashMap::new()),
            _state_lock: state_lock,
        };
        runtime.answer_interrupted(interrupted)?;
        Ok(runtime)
    }

    /// A crash between committing a response and committing its results leaves calls without
    /// results: they are answered with an error the model can act on, so history stays
    /// well-formed and nothing runs twice behind the model's back (SEC-4).
    fn answer_interrupted(&mut self, calls: Vec<PlannedCall>) -> Result<(), RuntimeError> {
        if calls.is_empty() {
            return Ok(());
        }
        let message = Message {
            id: format!("s{}-tools", self.step),
            role: Role::Tool,
            created_at: self.now(),
            content: calls
                .iter()
                .map(|c| Part::ToolResult {
                    call_id: c.id.clone(),
                    is_error: true,
                    text: format!(
                        "the call to `{}` was interrupted (the runtime stopped before its result was saved); it may or may not have taken effect: check, then call it again if needed",
                        c.name
                    ),
                })
                .collect(),
        };
        let mut batch = Batch::default();
        batch.messages.push(stored_message(&message)?);
        batch.meta.push(("pending_calls".to_owned(), json!([])));
        self.store_mut()
            .commit(&batch)
            .map_err(|e| err("cannot store the interrupted results")(&e))?;
        self.history.push(Entry {
            message,
            withdrawn: false,
        });
        Ok(())
    }

    fn store_mut(&mut self) -> &mut dyn HistoryStore {
        &mut **self
            .store
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The resource center (to register more handlers at run time, RES-2).
    pub fn resources(&self) -> &ResourceCenter {
        &self.shared.center
    }

    /// The workspace handler (fixtures and embedders write files through it).
    pub fn workspace(&self) -> &Arc<WorkspaceScheme> {
        &self.shared.workspace
    }

    /// The asset store (inbound media, cleanup).
    pub fn assets(&self) -> &Arc<dyn AssetStore> {
        &self.shared.assets
    }

    /// The number of model requests committed or attempted so far.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The assembled profile.
    pub fn assembly(&self) -> &Assembly {
        &self.shared.assembly
    }

    fn now(&self) -> String {
        rfc3339(self.shared.clock.now())
    }

    fn attachment_config(&self) -> AttachmentConfig {
        let a = &self.shared.assembly.profile.attachment;
        AttachmentConfig {
            image_input: a.image_input,
            message_image_input: a.message_image_input,
            recent_image_count: a.recent_image_count,
            image_prune_batch_size: a.image_prune_batch_size,
            max_image_bytes: a.max_image_bytes,
            max_total_image_bytes: a.max_total_image_bytes,
            max_image_count: a.max_image_count,
            max_image_dimension: a.max_image_dimension,
            vision_model: a.vision_model.clone(),
            provider_limits: self.shared.assembly.main.image_limits(),
        }
    }

    /// Registers an inbound platform message (PRJ-2): its images become `asset://<UUID v7>`
    /// resources (when within `assets.autoDownloadMaxBytes`, RES-9) and attachment records of
    /// lifetime `once` (unless `messageImageInput` is off).
    pub fn add_user_message(
        &mut self,
        id: &str,
        text: &str,
        images: &[Vec<u8>],
    ) -> Result<Vec<InboundImage>, RuntimeError> {
        if self.history.iter().any(|e| e.message.id == id) {
            return Err(RuntimeError::new(format!(
                "message id `{id}` is already used"
            )));
        }
        let limit = self.shared.assembly.profile.assets.auto_download_max_bytes;
        let message_images = self.shared.assembly.profile.attachment.message_image_input;
        let now = self.shared.clock.now();
        let created_at = rfc3339(now);
        let mut body = text.to_owned();
        let mut inbound = Vec::new();
        let mut records = Vec::new();
        for (k, bytes) in images.iter().enumerate() {
            let info = ishiki_resources::sniff(bytes);
            let size = bytes.len() as u64;
            let record_id = format!("{id}-image-{}", k + 1);
            if limit == 0 || size > limit {
                let reason = if limit == 0 {
                    "inbound downloads are off (assets.autoDownloadMaxBytes is 0)".to_owned()
                } else {
                    format!("it is {size} bytes, over assets.autoDownloadMaxBytes ({limit} bytes)")
                };
                let url = format!("inbound:{id}/{}", k + 1);
                body.push_str(&format!(
                    "\n[attachment not downloaded: image {} of this message; {}; {size} bytes: {reason}]",
                    k + 1,
                    info.media_type
                ));
                self.not_downloaded
                    .insert(record_id.clone(), reason.clone());
                inbound.push(InboundImage {
                    url: url.clone(),
                    media_type: info.media_type.clone(),
                    bytes: size,
                });
                records.push((
                    AttachmentRecord {
                        id: record_id,
                        source: SourceLink::Message {
                            message_id: id.to_owned(),
                        },
                        url,
                        media_type: info.media_type,
                        bytes: size,
                        dimensions: info.dimensions,
                        lifetime: Lifetime::Once,
                        seq: 0,
                        created_at: created_at.clone(),
                    },
                    Some(reason),
                ));
                continue;
            }
            // A replayed clock (a scenario run again on its own state) repeats ids: skip taken
            // ones rather than refuse the message.
            let mut uuid = self.shared.clock.new_uuid_v7();
            for _ in 0..10_000 {
                if self.shared.assets.meta(&uuid.to_string()).is_err() {
                    break;
                }
                uuid = self.shared.clock.new_uuid_v7();
            }
            let meta = self
                .shared
                .assets
                .put_with_id(uuid, bytes, now)
                .map_err(|e| err("cannot store an inbound image")(&e))?;
            body.push_str(&format!(
                "\n{}",
                ishiki_outlet::marker(&ishiki_outlet::MediaRef {
                    url: meta.url.clone(),
                    media_type: meta.media_type.clone(),
                    bytes: size,
                    dimensions: meta.dimensions,
                })
            ));
            inbound.push(InboundImage {
                url: meta.url.clone(),
                media_type: meta.media_type.clone(),
                bytes: size,
            });
            if message_images {
                records.push((
                    AttachmentRecord {
                        id: record_id,
                        source: SourceLink::Message {
                            message_id: id.to_owned(),
                        },
                        url: meta.url,
                        media_type: meta.media_type,
                        bytes: size,
                        dimensions: meta.dimensions,
                        lifetime: Lifetime::Once,
                        seq: 0,
                        created_at: created_at.clone(),
                    },
                    None,
                ));
            }
        }
        let message = Message {
            id: id.to_owned(),
            role: Role::User,
            created_at,
            content: vec![Part::Text { text: body }],
        };
        let mut batch = Batch::default();
        batch.messages.push(stored_message(&message)?);
        let mut new_records = Vec::new();
        for (mut record, not_downloaded) in records {
            record.seq = (self.records.len() + new_records.len()) as u64;
            batch
                .attachments
                .push(stored_record(&record, not_downloaded)?);
            new_records.push(record);
        }
        self.store_mut()
            .commit(&batch)
            .map_err(|e| err("cannot store the message")(&e))?;
        self.history.push(Entry {
            message,
            withdrawn: false,
        });
        self.records.extend(new_records);
        Ok(inbound)
    }

    /// Whether a message with this id is in the history (ids must be unique).
    pub fn has_message(&self, id: &str) -> bool {
        self.history.iter().any(|e| e.message.id == id)
    }

    /// Withdraws a platform message: it and its attachments leave the context (PRJ-7, PRJ-11).
    pub fn withdraw(&mut self, id: &str) -> Result<(), RuntimeError> {
        let Some(entry) = self.history.iter_mut().find(|e| e.message.id == id) else {
            return Err(RuntimeError::new(format!("no message `{id}` to withdraw")));
        };
        let batch = Batch {
            withdrawn: vec![id.to_owned()],
            ..Batch::default()
        };
        self.store
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .commit(&batch)
            .map_err(|e| err("cannot store the withdrawal")(&e))?;
        entry.withdrawn = true;
        Ok(())
    }

    /// Runs one asset-cleanup pass (RES-9); returns the deleted asset URLs.
    pub fn cleanup_assets(&self) -> Result<Vec<String>, RuntimeError> {
        let days = u64::from(self.shared.assembly.profile.assets.cleanup.retention_days);
        self.shared
            .assets
            .cleanup(
                self.shared.clock.now(),
                Duration::from_secs(days.saturating_mul(86_400)),
            )
            .map_err(|e| err("asset cleanup failed")(&e))
    }

    fn active_sources(&self) -> (BTreeSet<String>, BTreeSet<String>) {
        let mut messages = BTreeSet::new();
        let mut calls = BTreeSet::new();
        for entry in self.history.iter().filter(|e| !e.withdrawn) {
            match entry.message.role {
                Role::User => {
                    messages.insert(entry.message.id.clone());
                }
                Role::Tool => {
                    for part in &entry.message.content {
                        if let Part::ToolResult { call_id, .. } = part {
                            calls.insert(call_id.clone());
                        }
                    }
                }
                Role::System | Role::Assistant => {}
            }
        }
        (messages, calls)
    }

    /// Reads a persisted media resource once and remembers what it found: the URLs are
    /// immutable, so neither availability nor a decode check changes. Images that fit the
    /// dimension limit are decoded once, so a valid header with garbage behind it is caught.
    fn media_info(&self, url: &str, image_check: Option<u32>) -> Result<Option<String>, String> {
        let mut cache = self
            .media_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(hit) = cache.get(url) {
            return hit.clone();
        }
        let result = self.load_media(url).map(|bytes| {
            image_check.and_then(|max| ishiki_resources::check_image(&bytes, max).err())
        });
        cache.insert(url.to_owned(), result.clone());
        result
    }

    fn load_media(&self, url: &str) -> Result<Vec<u8>, String> {
        if url.starts_with("artifact:") {
            self.shared.artifacts.get(url).map_err(|e| e.to_string())
        } else if url.starts_with("asset:") {
            self.shared.assets.get(url).map_err(|e| e.to_string())
        } else {
            Err(format!("`{url}` is not a persisted resource"))
        }
    }

    fn verdict(&self, record: &AttachmentRecord) -> Verdict {
        if let Some(reason) = self.not_downloaded.get(&record.id) {
            return Verdict::NotDownloaded {
                reason: reason.clone(),
            };
        }
        if let Some(reason) = self.rejected.get(&record.id) {
            return Verdict::Rejected {
                reason: reason.clone(),
            };
        }
        if record.media_type.starts_with("image/") {
            if !matches!(
                record.media_type.as_str(),
                "image/png" | "image/jpeg" | "image/gif" | "image/webp"
            ) {
                return Verdict::Unsupported {
                    reason: format!("{} images are not supported", record.media_type),
                };
            }
            if record.dimensions.is_none() {
                return Verdict::Unsupported {
                    reason: "the image is broken: its header cannot be read".to_owned(),
                };
            }
        } else if !record.media_type.starts_with("audio/") {
            return Verdict::Unsupported {
                reason: format!("{} cannot be shown to the model", record.media_type),
            };
        }
        let fits = record.dimensions.is_some_and(|(w, h)| {
            let max = self.shared.assembly.profile.attachment.max_image_dimension;
            w <= max && h <= max
        });
        let check = (record.media_type.starts_with("image/") && fits)
            .then_some(self.shared.assembly.profile.attachment.max_image_dimension);
        match self.media_info(&record.url, check) {
            Ok(None) => Verdict::Available,
            Ok(Some(broken)) => Verdict::Unsupported { reason: broken },
            Err(reason) => Verdict::Unavailable { reason },
        }
    }

    /// Projects the next request (PRJ-3): history, attachment messages after their sources,
    /// and the catalog delta at the end (TS-3). Nothing is committed until
    /// [`Runtime::commit`]. Fails while the last committed response's calls wait for
    /// [`Runtime::execute`].
    pub fn prepare(&mut self) -> Result<Prepared, RuntimeError> {
        // A request with calls that have no results is malformed, and committing another
        // response would drop the waiting calls for good.
        if !self.planned.is_empty() {
            return Err(RuntimeError::new(format!(
                "the calls of step {} have not run yet: call execute before preparing the next request",
                self.step
            )));
        }
        let step = self.step + 1;
        let step_catalog = self.shared.catalog_mut().begin_step();
        let tools: Vec<ToolSpec> = step_catalog
            .tools
            .iter()
            .map(|d| ToolSpec {
                name: d.name.clone(),
                description: d.description.clone(),
                input_schema: d.input_schema.clone(),
            })
            .collect();
        let announced_set: BTreeSet<&String> = self.announced.iter().collect();
        // Removed tools keep their place in the list (the prefix stays) but are not announced
        // as added; those the model was told about are announced as gone, once (TS-5).
        let gone: BTreeSet<String> = {
            let catalog = self.shared.catalog_mut();
            step_catalog
                .tools
                .iter()
                .filter(|d| catalog.is_removed(&d.name))
                .map(|d| d.name.clone())
                .collect()
        };
        let added: Vec<&ToolDef> = step_catalog
            .tools
            .iter()
            .filter(|d| !announced_set.contains(&d.name) && !gone.contains(&d.name))
            .collect();
        let removed: Vec<String> = step_catalog
            .removed
            .iter()
            .filter(|n| announced_set.contains(n) && gone.contains(*n))
            .cloned()
            .collect();
        let with_signatures = self.sandbox.is_some();
        let delta = (!added.is_empty() || !removed.is_empty()).then(|| {
            let mut content = Vec::new();
            if !added.is_empty() {
                content.push(Part::Text {
                    text: ishiki_toolsearch::delta_text(
                        &added.iter().map(|d| (*d).clone()).collect::<Vec<_>>(),
                        with_signatures,
                    ),
                });
                content.push(Part::CatalogDelta {
                    added: added
                        .iter()
                        .map(|d| DeltaEntry {
                            name: d.name.clone(),
                            description: d.description.clone(),
                            input_schema: d.input_schema.clone(),
                            signature: with_signatures.then(|| ishiki_toolsearch::signature(d)),
                        })
                        .collect(),
                });
            }
            if !removed.is_empty() {
                content.push(Part::Text {
                    text: ishiki_toolsearch::removed_text(&removed),
                });
            }
            Message {
                id: format!("s{step}-catalog"),
                role: Role::System,
                created_at: self.now(),
                content,
            }
        });
        let mut announced = self.announced.clone();
        announced.extend(added.iter().map(|d| d.name.clone()));
        announced.retain(|n| !removed.contains(n));

        let (active_messages, active_calls) = self.active_sources();
        let active = |link: &SourceLink| match link {
            SourceLink::Message { message_id } => active_messages.contains(message_id),
            SourceLink::ToolResult { call_id } => active_calls.contains(call_id),
        };
        let verdicts: HashMap<String, Verdict> = self
            .records
            .iter()
            .filter(|r| active(&r.source))
            .map(|r| (r.id.clone(), self.verdict(r)))
            .collect();
        let verdict = |r: &AttachmentRecord| {
            verdicts
                .get(&r.id)
                .cloned()
                .unwrap_or(Verdict::Unavailable {
                    reason: "its source is no longer in the conversation".to_owned(),
                })
        };
        let config = self.attachment_config();
        let projection = ishiki_projection::project(&ProjectionInput {
            records: &self.records,
            active: &active,
            verdict: &verdict,
            state: &self.delivery,
            config: &config,
            image_input: self.shared.assembly.image_input,
            audio_input: self.shared.assembly.audio_input,
        });

        let mut by_source: HashMap<String, Vec<Message>> = HashMap::new();
        for m in projection.messages {
            let key = source_key(&m.after);
            let mut content = Vec::new();
            for c in m.content {
                match c {
                    AttachmentContent::Text(text) => content.push(Part::Text { text }),
                    AttachmentContent::Media {
                        url, media_type, ..
                    } => content.push(self.media_part(&url, &media_type)),
                }
            }
            by_source.entry(key).or_default().push(Message {
                id: m.id,
                role: Role::User,
                created_at: m.created_at,
                content,
            });
        }
        let mut messages = Vec::new();
        for entry in self.history.iter().filter(|e| !e.withdrawn) {
            messages.push(entry.message.clone());
            let keys: Vec<String> = match entry.message.role {
                Role::User => vec![format!("m:{}", entry.message.id)],
                Role::Tool => entry
                    .message
                    .content
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolResult { call_id, .. } => Some(format!("c:{call_id}")),
                        _ => None,
                    })
                    .collect(),
                Role::System | Role::Assistant => Vec::new(),
            };
            for key in keys {
                if let Some(attached) = by_source.remove(&key) {
                    messages.extend(attached);
                }
            }
        }
        if let Some(delta) = &delta {
            messages.push(delta.clone());
        }
        Ok(Prepared {
            step,
            request: Request { tools, messages },
            pending: projection.pending,
            delta,
            announced,
        })
    }

    fn media_part(&self, url: &str, media_type: &str) -> Part {
        match self.load_media(url) {
            Ok(bytes) => {
                use base64::Engine as _;
                let part = MediaPart {
                    media_type: media_type.to_owned(),
                    url: url.to_owned(),
                    bytes: bytes.len() as u64,
                    sha256: sha256_hex(&bytes),
                    data: Some(base64::engine::general_purpose::STANDARD.encode(&bytes)),
                };
                if media_type.starts_with("audio/") {
                    Part::Audio(part)
                } else {
                    Part::Image(part)
                }
            }
            Err(reason) => Part::Text {
                text: format!("[attachment {url} could not be read: {reason}]"),
            },
        }
    }

    /// Marks a step as attempted without committing anything (a failed or aborted model call):
    /// the next request gets the next step number and retries every delivery (PRJ-4).
    pub fn abandon(&mut self, prepared: Prepared) {
        self.step = self.step.max(prepared.step);
    }

    /// A model request that failed with `error`: nothing is committed, as with
    /// [`Runtime::abandon`]. When the provider refused an image ([`crate::image_rejection`]:
    /// a 400 about an image), the images of that request turn terminal with the provider's
    /// reason, so the next request states it instead of the bytes and can succeed.
    ///
    /// Which images: the one whose URL the error names; otherwise those this request carried
    /// for the first time (the earlier ones were accepted before); otherwise all it carried.
    /// Returns the URLs turned terminal (empty when the failure was not about an image).
    pub fn abandon_failed(&mut self, prepared: Prepared, error: &str) -> Vec<String> {
        let reason = crate::image_rejection(error);
        let urls: Vec<String> = prepared
            .request
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|p| match p {
                Part::Image(media) => Some(media.url.clone()),
                _ => None,
            })
            .collect();
        self.abandon(prepared);
        let Some(reason) = reason else {
            return Vec::new();
        };
        let carried: Vec<&AttachmentRecord> = self
            .records
            .iter()
            .filter(|r| urls.contains(&r.url))
            .collect();
        let named: Vec<&AttachmentRecord> = carried
            .iter()
            .copied()
            .filter(|r| error.contains(r.url.as_str()))
            .collect();
        let new: Vec<&AttachmentRecord> = carried
            .iter()
            .copied()
            .filter(|r| !self.delivery.state_of(r).viewed)
            .collect();
        let chosen = [named, new, carried]
            .into_iter()
            .find(|set| !set.is_empty())
            .unwrap_or_default();
        let marked: Vec<(String, String)> = chosen
            .iter()
            .map(|r| (r.id.clone(), r.url.clone()))
            .collect();
        let mut turned = Vec::new();
        for (id, url) in marked {
            self.rejected.insert(id, reason.clone());
            if !turned.contains(&url) {
                turned.push(url);
            }
        }
        turned
    }

    /// Commits the model's response together with the delivery state of the request it
    /// answered, in one store transaction (PRJ-13). Returns the calls to execute.
    pub fn commit(
        &mut self,
        prepared: Prepared,
        response: ModelResponse,
    ) -> Result<Vec<ToolCall>, RuntimeError> {
        let step = prepared.step;
        let text_protocol = self.shared.assembly.main.tool_calling == ToolCalling::Text;
        // Reasoning first, verbatim: the provider replays it ahead of the text and calls.
        let mut content: Vec<Part> = response
            .reasoning
            .iter()
            .cloned()
            .map(Part::Reasoning)
            .collect();
        let mut planned = Vec::new();
        if let Some(text) = &response.text {
            if !text.is_empty() {
                content.push(Part::Text { text: text.clone() });
            }
            if text_protocol {
                let schema_of = |name: &str| {
                    self.tools
                        .iter()
                        .find(|(d, _)| d.name == name)
                        .map(|(d, _)| d.input_schema.clone())
                };
                for segment in text_protocol::parse(text, &schema_of) {
                    let id = format!("s{step}-call{}", planned.len() + 1);
                    match segment {
                        Segment::Text(_) => {}
                        Segment::Call(call) => planned.push(PlannedCall {
                            id,
                            name: call.name,
                            input: call.arguments,
                            malformed: None,
                        }),
                        Segment::Malformed { raw: _, error } => planned.push(PlannedCall {
                            id,
                            name: "(malformed)".to_owned(),
                            input: Value::Null,
                            malformed: Some(error),
                        }),
                    }
                }
            }
        }
        for call in &response.calls {
            content.push(Part::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            });
            planned.push(PlannedCall {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
                malformed: None,
            });
        }
        let assistant = Message {
            id: format!("s{step}-assistant"),
            role: Role::Assistant,
            created_at: self.now(),
            content,
        };
        let mut delivery = self.delivery.clone();
        delivery.commit(&prepared.pending);
        let mut batch = Batch::default();
        if let Some(delta) = &prepared.delta {
            batch.messages.push(stored_message(delta)?);
        }
        let mut stored = stored_message(&assistant)?;
        if let (Some(usage), Value::Object(record)) = (&response.usage, &mut stored.json) {
            // Persisted beside the message it paid for; `Message` ignores the key on load.
            record.insert("usage".to_owned(), to_json(usage)?);
        }
        batch.messages.push(stored);
        batch.delivery = Some(to_json(&delivery)?);
        batch.catalog = Some(to_json(&CatalogBlob {
            catalog: Some(self.shared.catalog_mut().state()),
            announced: prepared.announced.clone(),
        })?);
        batch.meta.push(("step".to_owned(), json!(step)));
        batch
            .meta
            .push(("pending_calls".to_owned(), to_json(&planned)?));
        self.store_mut()
            .commit(&batch)
            .map_err(|e| err("cannot store the response")(&e))?;
        self.step = step;
        self.delivery = delivery;
        self.announced = prepared.announced;
        if let Some(delta) = prepared.delta {
            self.history.push(Entry {
                message: delta,
                withdrawn: false,
            });
        }
        self.history.push(Entry {
            message: assistant,
            withdrawn: false,
        });
        let calls = planned
            .iter()
            .map(|p| ToolCall {
                id: p.id.clone(),
                name: p.name.clone(),
                input: p.input.clone(),
            })
            .collect();
        self.planned = planned;
        Ok(calls)
    }

    /// Executes the committed response's calls in order, passes each result through the
    /// outlet, and commits results and attachment records in one transaction.
    pub async fn execute(&mut self) -> Result<Vec<CallReport>, RuntimeError> {
        let planned = std::mem::take(&mut self.planned);
        if planned.is_empty() {
            return Ok(Vec::new());
        }
        let step = self.step;
        let mut reports = Vec::new();
        let mut new_records = Vec::new();
        for call in planned {
            let (report, records) = self.run_call(&call, step).await;
            new_records.extend(records);
            reports.push(report);
        }
        let message = Message {
            id: format!("s{step}-tools"),
            role: Role::Tool,
            created_at: self.now(),
            content: reports
                .iter()
                .map(|r| Part::ToolResult {
                    call_id: r.call_id.clone(),
                    is_error: r.is_error,
                    text: r.text.clone(),
                })
                .collect(),
        };
        let mut batch = Batch::default();
        batch.messages.push(stored_message(&message)?);
        for (k, record) in new_records.iter_mut().enumerate() {
            record.seq = (self.records.len() + k) as u64;
            batch.attachments.push(stored_record(record, None)?);
        }
        batch.catalog = Some(to_json(&CatalogBlob {
            catalog: Some(self.shared.catalog_mut().state()),
            announced: self.announced.clone(),
        })?);
        batch.meta.push(("pending_calls".to_owned(), json!([])));
        self.store_mut()
            .commit(&batch)
            .map_err(|e| err("cannot store the tool results")(&e))?;
        self.history.push(Entry {
            message,
            withdrawn: false,
        });
        self.records.extend(new_records);
        Ok(reports)
    }

    /// One whole step against a model: prepare, respond, commit, execute.
    pub async fn step_with(&mut self, model: &dyn Model) -> Result<Vec<CallReport>, RuntimeError> {
        let prepared = self.prepare()?;
        match model.respond(&prepared.request).await {
            Ok(response) => {
                self.commit(prepared, response)?;
                self.execute().await
            }
            Err(reason) => {
                self.abandon_failed(prepared, reason.message());
                Err(RuntimeError::new(format!(
                    "the model request failed: {reason}"
                )))
            }
        }
    }

    /// Adds a tool after start (TS-5), e.g. one an MCP server now lists. It enters the catalog
    /// like a tool given to the builder, except that a resident one joins at the next step and
    /// is announced in that step's catalog delta; a deferred one waits in the pool. A tool with
    /// the name of a registered one replaces it (its place in the list stays); built-in tools
    /// cannot be replaced. The codemode tool's own description does not change (it lists the
    /// tools of the start); programs see the new tool from the next step on.
    pub fn add_tool(&mut self, tool: Arc<dyn Tool>) -> Result<(), RuntimeError> {
        let def = tool.definition();
        if self.is_builtin(&def.name) {
            return Err(RuntimeError::new(format!(
                "the tool `{}` is built in and cannot be replaced",
                def.name
            )));
        }
        let validator = jsonschema::validator_for(&def.input_schema).map_err(|e| {
            RuntimeError::new(format!(
                "tool `{}` has an invalid input schema: {e}",
                def.name
            ))
        })?;
        self.validators
            .insert(def.name.clone(), Arc::new(validator));
        self.shared.catalog_mut().add(def.clone());
        match self.tools.iter_mut().find(|(d, _)| d.name == def.name) {
            Some(slot) => *slot = (def, tool),
            None => self.tools.push((def, tool)),
        }
        Ok(())
    }

    /// Removes a tool added earlier (e.g. an MCP server no longer lists it). It stays in the
    /// native tool list, so the request prefix does not change; the next request appends a
    /// "no longer available" note (earlier messages are never edited), and a call to it gets
    /// a clear error. Built-in tools cannot be removed. Returns whether a tool was removed.
    pub fn remove_tool(&mut self, name: &str) -> bool {
        if self.is_builtin(name) {
            return false;
        }
        let before = self.tools.len();
        self.tools.retain(|(d, _)| d.name != name);
        self.validators.remove(name);
        let removed = self.shared.catalog_mut().remove(name);
        removed || self.tools.len() != before
    }

    fn is_builtin(&self, name: &str) -> bool {
        self.tools
            .iter()
            .any(|(d, _)| d.name == name && d.origin.as_deref() == Some("builtin"))
    }

    fn tool(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools
            .iter()
            .find(|(d, _)| d.name == name)
            .map(|(_, t)| t)
    }

    async fn run_call(
        &mut self,
        call: &PlannedCall,
        step: u64,
    ) -> (CallReport, Vec<AttachmentRecord>) {
        let failed = |text: String| CallReport {
            call_id: call.id.clone(),
            name: call.name.clone(),
            is_error: true,
            text,
            attachments: Vec::new(),
            continuation: None,
            missed_by_search: Vec::new(),
        };
        if let Some(error) = &call.malformed {
            return (failed(error.clone()), Vec::new());
        }
        if self.shared.catalog_mut().is_removed(&call.name) {
            return (
                failed(format!(
                    "the tool `{}` is no longer available: it was removed from the catalog (its server no longer offers it)",
                    call.name
                )),
                Vec::new(),
            );
        }
        let available = self
            .shared
            .catalog_mut()
            .available()
            .iter()
            .any(|d| d.name == call.name);
        let Some(tool) = self.tool(&call.name).cloned() else {
            return (
                failed(format!("there is no tool named `{}`", call.name)),
                Vec::new(),
            );
        };
        if !available {
            return (
                failed(format!(
                    "the tool `{}` is not loaded yet: find it with search first; it becomes callable from the next step",
                    call.name
                )),
                Vec::new(),
            );
        }
        if let Some(message) = crate::guard::imprecise_number(&call.input).or_else(|| {
            self.validators
                .get(&call.name)
                .and_then(|validator| validation_error(validator, &call.input))
        }) {
            return (
                failed(format!("invalid input for `{}`: {message}", call.name)),
                Vec::new(),
            );
        }
        let context = ToolContext {
            call_id: call.id.clone(),
            step,
            from_program: false,
        };
        // Every call has a deadline and a result cap (issue 13); a program has its own limits.
        let limits = crate::guard::CallLimits::from_profile(&self.shared.assembly.profile.tools);
        let outcome = match call.name.as_str() {
            "read" => {
                let read = builtin::read_direct(&self.shared, &self.outlet, &call.input);
                crate::guard::with_deadline("read", limits, read).await
            }
            "codemode" => self.run_codemode(&call.input, &context).await,
            _ => match crate::guard::execute(
                tool.clone(),
                &call.name,
                call.input.clone(),
                &context,
                limits,
            )
            .await
            {
                Ok(raw) => {
                    let display = tool.to_model_output(&raw);
                    self.emit(&call.name, display, Vec::new())
                }
                Err(e) => Err(e),
            },
        };
        match outcome {
            Ok(done) => {
                let now = self.now();
                let mut records = Vec::new();
                let mut infos = Vec::new();
                for (k, (media, lifetime)) in done.attachments.iter().enumerate() {
                    infos.push(AttachmentInfo {
                        url: media.url.clone(),
                        media_type: media.media_type.clone(),
                        bytes: media.bytes,
                        lifetime: lifetime_name(*lifetime).to_owned(),
                    });
                    records.push(AttachmentRecord {
                        id: format!("s{step}-{}-att-{}", call.id, k + 1),
                        source: SourceLink::ToolResult {
                            call_id: call.id.clone(),
                        },
                        url: media.url.clone(),
                        media_type: media.media_type.clone(),
                        bytes: media.bytes,
                        dimensions: media.dimensions,
                        lifetime: *lifetime,
                        seq: 0,
                        created_at: now.clone(),
                    });
                }
                (
                    CallReport {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        is_error: false,
                        text: done.text,
                        attachments: infos,
                        continuation: done.continuation,
                        missed_by_search: self.missed_by_search(&call.name),
                    },
                    records,
                )
            }
            Err(e) => (failed(e.message().to_owned()), Vec::new()),
        }
    }

    /// Earlier searches that did not return `tool`, when it is a deferred tool.
    fn missed_by_search(&self, tool: &str) -> Vec<String> {
        let deferred = self
            .shared
            .catalog_mut()
            .get(tool)
            .is_some_and(|d| !d.resident);
        if deferred {
            self.shared.searches_missing(tool)
        } else {
            Vec::new()
        }
    }

    fn emit(
        &self,
        tool: &str,
        display: Display,
        lifetimes: Vec<Lifetime>,
    ) -> Result<builtin::Done, ToolError> {
        let emitted: Emitted = self
            .outlet
            .emit(tool, display)
            .map_err(|e| ToolError::new(e.to_string()))?;
        Ok(builtin::Done::from_emitted(emitted, &lifetimes))
    }

    async fn run_codemode(
        &self,
        input: &Value,
        context: &ToolContext,
    ) -> Result<builtin::Done, ToolError> {
        let Some(sandbox) = &self.sandbox else {
            return Err(ToolError::new("codemode is not enabled in this profile"));
        };
        let code = input
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let callable = builtin::callable_tools(&self.shared, &self.tools, context);
        // Date.now() in the program is the runtime's clock, so scenario runs stay deterministic.
        let clock_ms = crate::clock::unix_millis(self.shared.clock.now());
        let outcome = sandbox
            .run_at(code, callable, clock_ms)
            .await
            .map_err(|e| ToolError::new(e.to_string()))?;
        let limits = crate::guard::CallLimits::from_profile(&self.shared.assembly.profile.tools);
        let (display, lifetimes) = builtin::codemode_display(&self.shared, outcome, limits).await?;
        self.emit("codemode", display, lifetimes)
    }
}

/// A persisted attachment record: the projection's record plus what core knows of inbound
/// media that was not downloaded.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredRecord {
    #[serde(flatten)]
    record: AttachmentRecord,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    not_downloaded: Option<String>,
}

fn stored_record(
    record: &AttachmentRecord,
    not_downloaded: Option<String>,
) -> Result<StoredAttachment, RuntimeError> {
    Ok(StoredAttachment {
        id: record.id.clone(),
        json: to_json(&StoredRecord {
            record: record.clone(),
            not_downloaded,
        })?,
    })
}

fn stored_message(message: &Message) -> Result<StoredMessage, RuntimeError> {
    Ok(StoredMessage {
        id: message.id.clone(),
        json: to_json(message)?,
    })
}

fn to_json<T: Serialize>(value: &T) -> Result<Value, RuntimeError> {
    serde_json::to_value(value).map_err(|e| err("cannot serialize state")(&e))
}

fn source_key(link: &SourceLink) -> String {
    match link {
        SourceLink::Message { message_id } => format!("m:{message_id}"),
        SourceLink::ToolResult { call_id } => format!("c:{call_id}"),
    }
}

pub(crate) fn lifetime_name(l: Lifetime) -> &'static str {
    match l {
        Lifetime::Once => "once",
        Lifetime::Recent => "recent",
        Lifetime::Retain => "retain",
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The first schema violation, as `at <path>: <message>`.
pub(crate) fn validation_error(validator: &jsonschema::Validator, input: &Value) -> Option<String> {
    validator.iter_errors(input).next().map(|e| {
        let path = e.instance_path().to_string();
        if path.is_empty() {
            e.to_string()
        } else {
            format!("at {path}: {e}")
        }
    })
}
