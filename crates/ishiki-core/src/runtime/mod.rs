//! The step loop: project a request, commit the response with its delivery state, execute the
//! calls, send each result through the outlet, commit results and attachment records.
//!
//! Invariants:
//! - a request's delivery-state change is written in the same store transaction as the
//!   assistant response it was sent for; a failed or aborted step writes nothing (PRJ-4, PRJ-13);
//! - nothing but the outlet decides what the model sees of a tool result (OUT-1);
//! - history stores resource references and source links, never a request's display choice
//!   (PRJ-1): attachment messages are recomputed by the projection for every request.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ishiki_outlet::{Budget, Outlet};
use ishiki_projection::{AttachmentConfig, AttachmentRecord, DeliveryState, PendingChange};
use ishiki_resources::{
    ArtifactStore, AssetStore, FileScheme, ResourceCenter, SchemeHandler, WorkspaceScheme,
};
use ishiki_tool::{Tool, ToolErrorKind, ToolSet};
use ishiki_toolsearch::{CatalogState, ToolDef};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::attachment::AttachmentInfo;
use crate::builtin::{self, Shared};
use crate::clock::{Clock, SystemClock, rfc3339};
use crate::context::{ContextConfig, ContextReport, ContextState, Window};
use crate::edits::{EditPolicy, EditReport};
use crate::message::{Message, Request};
use crate::platform::{NullPlatform, Platform, VisionModel};
use crate::profile::Assembly;
use crate::registry::{self, Origin, Registry};
use crate::state_dir;
use crate::store::{Batch, Durability, HistoryStore, StoredAttachment, StoredMessage};

mod commit;
mod compact;
mod execute;
mod history;
mod media;
mod meta;
mod open;
mod prepare;

pub(crate) use crate::error::{RuntimeError, RuntimeErrorKind, err};

/// Why persisted media could not be loaded for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
enum MediaFailure {
    /// An asset the store no longer has: retention deleted it, for good (issue 24).
    Deleted,
    /// Anything else, retried in a later request (PRJ-10).
    Unreadable(String),
}

/// Builds a [`Runtime`]: the assembled profile, a state directory, and what to plug in.
#[derive(Debug)]
pub struct RuntimeBuilder {
    assembly: Assembly,
    state_dir: PathBuf,
    workspace_root: Option<PathBuf>,
    local_roots: Vec<(String, PathBuf)>,
    store_locations: Vec<(String, PathBuf)>,
    clock: Arc<dyn Clock>,
    platform: Arc<dyn Platform>,
    vision: Option<Arc<dyn VisionModel>>,
    tools: Vec<Arc<dyn Tool>>,
    schemes: Vec<Arc<dyn SchemeHandler>>,
    file_schemes: Vec<Arc<dyn FileScheme>>,
    durability: Durability,
    store: Option<Box<dyn HistoryStore>>,
    budget: Budget,
    artifacts: Option<Arc<dyn ArtifactStore>>,
    assets: Option<Arc<dyn AssetStore>>,
    pub(crate) programs: builtin::ProgramSettings,
    edit_policy: EditPolicy,
    window: Option<Window>,
    abandoned: Option<Arc<crate::guard::AbandonedWork>>,
    #[cfg(feature = "semantic")]
    semantic_model: Option<Arc<ishiki_toolsearch::semantic::Embedder>>,
}

#[cfg(feature = "codemode")]
impl RuntimeBuilder {
    /// How codemode workers start (default: re-execute this binary; `main` must call
    /// [`ishiki_codemode::run_if_worker`] first). Feature `codemode`.
    pub fn codemode_worker(mut self, worker: ishiki_codemode::WorkerSpawn) -> Self {
        self.programs.set_worker(worker);
        self
    }

    /// The codemode limits (wall clock, memory, instruction budget, sizes); default
    /// [`ishiki_codemode::Limits::default`]. Feature `codemode`.
    pub fn codemode_limits(mut self, limits: ishiki_codemode::Limits) -> Self {
        self.programs.set_limits(limits);
        self
    }

    /// Runs codemode programs in this sandbox (its worker pool is shared by every runtime
    /// given a clone) instead of starting a pool of its own; the builder's worker and limits
    /// settings are then unused. Many conversations per process share one pool this way.
    /// Feature `codemode`.
    pub fn codemode_sandbox(mut self, sandbox: builtin::Sandbox) -> Self {
        self.programs.set_sandbox(sandbox);
        self
    }
}

impl RuntimeBuilder {
    /// The sentence-embedding model for `toolsearch.semantic` (TS-7), loaded once by
    /// [`load_semantic_model`](crate::load_semantic_model) and shared by many runtimes. Without
    /// it, `build` loads the model the profile names itself (and fails as that function does).
    /// Ignored when the profile does not set `toolsearch.semantic`.
    #[cfg(feature = "semantic")]
    pub fn semantic_model(mut self, model: Arc<ishiki_toolsearch::semantic::Embedder>) -> Self {
        self.semantic_model = Some(model);
        self
    }

    /// Where this runtime counts tool calls abandoned at their deadline that still run
    /// (default: [`AbandonedWork::process`](crate::AbandonedWork::process), shared by every
    /// runtime of the process). At the limit, a new call fails at once.
    pub fn abandoned_work(mut self, work: Arc<crate::guard::AbandonedWork>) -> Self {
        self.abandoned = Some(work);
        self
    }

    /// The main model's window (default: `contextWindow` and `maxOutputTokens` of its
    /// models.yaml entry, when set). Without a window the context engine only estimates.
    pub fn window(mut self, window: Window) -> Self {
        self.window = Some(window);
        self
    }

    /// When the projection's edits of earlier context reach the model (default
    /// [`EditPolicy::Immediate`]); [`EditPolicy::AtUserTurns`] for models that bind thinking to
    /// its prefix (see [`crate::edits`]).
    pub fn edit_policy(mut self, policy: EditPolicy) -> Self {
        self.edit_policy = policy;
        self
    }

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

    /// Declares a directory on this host where a store passed to the builder keeps its data
    /// (an object store's `file://` directory, a database's Unix socket directory, a token
    /// store); `what` names it in errors ("the object store"). Like the state directory, it
    /// is refused at build when it lies inside the workspace or a `local://` root, or a root
    /// lies inside it: the model must never read or change a store through a root (SEC-2).
    pub fn store_location(mut self, what: impl Into<String>, dir: impl Into<PathBuf>) -> Self {
        self.store_locations.push((what.into(), dir.into()));
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

    fn workspace_dir(&self) -> PathBuf {
        self.workspace_root
            .clone()
            .unwrap_or_else(|| self.state_dir.join("workspace"))
    }

    /// Checks every store location (the state directory and each
    /// [`store_location`](Self::store_location)) against every root the model can reach (the
    /// workspace and each `local://` root), as [`build`](Self::build) does first. An embedder
    /// calls it before connecting to a store it declared, so nothing is contacted or created
    /// for a refused configuration.
    pub fn check_store_locations(&self) -> Result<(), RuntimeError> {
        let mut roots = vec![("the workspace root".to_owned(), self.workspace_dir())];
        for (name, root) in &self.local_roots {
            roots.push((format!("the local root `{name}`"), root.clone()));
        }
        let mut stores = vec![state_dir::StoreLocation::State(self.state_dir.clone())];
        stores.extend(
            self.store_locations
                .iter()
                .map(|(what, dir)| state_dir::StoreLocation::Other(what.clone(), dir.clone())),
        );
        state_dir::check_stores(&stores, &roots)
    }

    /// Opens the state directory and restores the runtime from it (loading the history
    /// store, and storing results for calls a crash or a cut step left without them).
    pub async fn build(self) -> Result<Runtime, RuntimeError> {
        Runtime::open(self).await
    }
}

#[derive(Debug, Clone)]
struct Entry {
    /// Shared with the requests that carry it: preparing a request clones a pointer, not the
    /// message (issue 16).
    message: Arc<Message>,
    withdrawn: bool,
    /// The message's raw token estimate ([`crate::context::message_tokens`]), made once.
    tokens: u64,
}

impl Entry {
    fn new(message: Arc<Message>, withdrawn: bool) -> Self {
        let tokens = crate::context::message_tokens(&message);
        Self {
            message,
            withdrawn,
            tokens,
        }
    }
}

/// A tool message as folded: how many of its parts were folded, the message, its raw tokens.
type FoldedMessage = (usize, Arc<Message>, u64);

/// History as a request shows it, before the catalog delta and the edit planner.
#[derive(Debug)]
struct Projected {
    messages: Vec<Arc<Message>>,
    pending: PendingChange,
    /// Raw token estimate of `messages`.
    raw: u64,
}

/// A summary request for compacting the oldest turns ([`Prepared::compaction`]): send
/// [`request`](Self::request) to the compaction model and give its text to
/// [`Runtime::compact`].
#[derive(Debug, Clone)]
pub struct CompactionRequest {
    /// The request: this request's own prefix up to the cut, then the summary instruction.
    pub request: Request,
    /// The id of the last history message the compaction replaces.
    pub through: String,
    replaced: Vec<Arc<Message>>,
    /// The index in `replaced` of the first message no earlier compaction replaced.
    fresh: usize,
    /// The request for the provider's own compaction, when the runtime may ask for one.
    native: Option<NativePlan>,
}

/// A provider's own compaction of the oldest turns: its request and what it replaces (the
/// provider cuts only after a finished turn, so its cut may be later than the text one).
#[derive(Debug, Clone)]
struct NativePlan {
    request: Request,
    through: String,
    replaced: Vec<Arc<Message>>,
}

impl CompactionRequest {
    /// How many history messages the compaction replaces (with a text summary).
    pub fn replaces(&self) -> usize {
        self.replaced.len()
    }

    /// The request for the provider's own compaction ([`Model::compact`](crate::Model::compact)):
    /// this request's own prefix up to a finished turn, without an instruction (the provider
    /// has its own). Give the answer to [`Runtime::compact_natively`]; a model without native
    /// compaction answers `None` and gets [`request`](Self::request) instead. `None` when no
    /// finished turn lies past the cut.
    pub fn native_request(&self) -> Option<&Request> {
        self.native.as_ref().map(|n| &n.request)
    }
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
    /// What the edit planner did to this request ([`crate::edits`]).
    pub edits: EditReport,
    /// What the context engine did to this request ([`crate::context`]).
    pub context: ContextReport,
    /// Set when folding could not bring the request under `context.compactAt`: the summary
    /// request to answer through [`Runtime::compact`] before sending.
    pub compaction: Option<CompactionRequest>,
    pending: PendingChange,
    /// The context state this request was made under, committed with its response.
    next_context: ContextState,
    /// The raw token estimate of the request (for calibration against the provider's count).
    raw_estimate: u64,
    delta: Option<Arc<Message>>,
    announced: Vec<String>,
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
    /// What kind of failure it was; `Some` exactly when `is_error`.
    pub error_kind: Option<ToolErrorKind>,
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
    /// Every tool with its definition (read once), compiled schema and origin: the one list,
    /// which alone changes the catalog's. Built-ins are known from where they were made, not
    /// from a definition's `origin` label, which any tool may set.
    tools: Registry,
    sandbox: Option<builtin::Sandbox>,
    store: Box<dyn HistoryStore>,
    /// Set while a commit is awaited, cleared when the store answers: still set on the next
    /// call means that commit's future was dropped (the step was cancelled) after the store
    /// may have started it, so whether it landed is unknown (`commit_batch`).
    in_doubt: Option<String>,
    history: history::History,
    records: Vec<AttachmentRecord>,
    not_downloaded: BTreeMap<String, String>,
    /// Records a provider refused (record id → its reason): terminal from the next request.
    /// In memory only; their reason is persisted as delivered with the next response.
    rejected: BTreeMap<String, String>,
    delivery: DeliveryState,
    /// The catalog state as the store holds it: a commit writes the catalog only when it
    /// differs (issue 26). It carries the catalog's step, so the response's commit writes it
    /// and the results' commit of the same step does not.
    catalog_stored: Option<Value>,
    announced: Vec<String>,
    step: u64,
    planned: Vec<PlannedCall>,
    /// Set while `execute` runs the planned calls, cleared once their results are stored: still
    /// set at the next `execute`, the last one was dropped (cancelled) or failed in between,
    /// and its calls are answered as interrupted, as a reopened runtime answers them.
    executing: bool,
    edit_policy: EditPolicy,
    /// The messages of the last request that got an answer: what the edit planner compares.
    last_sent: Vec<Arc<Message>>,
    /// What the context engine folded and compacted, and its calibration (committed state).
    context: ContextState,
    context_config: ContextConfig,
    window: Option<Window>,
    /// Folded versions of tool messages: message id → (folded results, message, raw tokens).
    fold_cache: Mutex<HashMap<String, FoldedMessage>>,
    /// The archives this conversation made: the only ones its `artifact:` scheme reads back
    /// of the context engine's kinds (`crate::archives`).
    own_archives: Arc<crate::archives::OwnArchives>,
    media_cache: Mutex<HashMap<String, Result<Option<String>, MediaFailure>>>,
    /// The state directory as opened; checked before every commit (issue 24).
    state_identity: state_dir::StateIdentity,
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
            store_locations: Vec::new(),
            clock: Arc::new(SystemClock),
            platform: Arc::new(NullPlatform),
            vision: None,
            tools: Vec::new(),
            schemes: Vec::new(),
            file_schemes: Vec::new(),
            durability: Durability::Full,
            store: None,
            budget: Budget::default(),
            artifacts: None,
            assets: None,
            programs: builtin::ProgramSettings::default(),
            edit_policy: EditPolicy::default(),
            window: None,
            abandoned: None,
            #[cfg(feature = "semantic")]
            semantic_model: None,
        }
    }

    /// Commits `batch`, after checking that the state directory is still the one opened (a
    /// moved or deleted state directory stops the step with an error naming it).
    ///
    /// Cancel-safe the only way it can be: the store's commit is all or nothing even when
    /// its future is dropped, but then this runtime cannot know which one it was (a networked
    /// store may have committed before the reply was lost). So the commit is marked in doubt
    /// while it is awaited; a runtime whose commit was cut refuses every later request and
    /// write ([`Runtime::refuse_in_doubt`]) until it is reopened from its store, which holds
    /// exactly what landed.
    async fn commit_batch(&mut self, batch: &Batch, context: &str) -> Result<(), RuntimeError> {
        self.refuse_in_doubt()?;
        self.state_identity.check()?;
        self.in_doubt = Some(context.to_owned());
        let outcome = self.store.commit(batch).await;
        // The store answered: the outcome is known, whatever it is (an `InDoubt` error from
        // the store says so itself, and marks the runtime as doubtful too).
        self.in_doubt = match &outcome {
            Err(e) if e.kind() == crate::store::StoreErrorKind::InDoubt => Some(context.to_owned()),
            _ => None,
        };
        outcome.map_err(|e| RuntimeError::store(context, &e))
    }

    /// Refuses to go on after a commit whose outcome is unknown (its future was dropped while
    /// the store worked, or the store lost the reply): the runtime's memory may disagree with
    /// the store, and only reopening reads what the store holds.
    pub(super) fn refuse_in_doubt(&self) -> Result<(), RuntimeError> {
        match &self.in_doubt {
            None => Ok(()),
            Some(context) => Err(RuntimeError::in_doubt(context)),
        }
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

    /// Where this runtime's abandoned tool calls are counted (how many still run, the limit).
    pub fn abandoned_work(&self) -> &Arc<crate::guard::AbandonedWork> {
        &self.shared.abandoned
    }

    /// What the context engine has folded and compacted so far, as committed with the last
    /// response ([`crate::context`]).
    pub fn context(&self) -> &ContextState {
        &self.context
    }

    /// Lets this conversation read back an archive it just made.
    fn own_archive(&self, url: &str) {
        self.own_archives.insert(url);
    }

    /// The assembled profile.
    pub fn assembly(&self) -> &Assembly {
        &self.shared.assembly
    }

    fn now(&self) -> String {
        rfc3339(self.shared.clock.now())
    }

    fn attachment_config(&self) -> AttachmentConfig {
        AttachmentConfig {
            provider_limits: self.shared.assembly.main.image_limits(),
            ..self.shared.assembly.profile.attachment.clone()
        }
    }

    /// Adds a tool after start (TS-5), e.g. one an MCP server now lists. It enters the catalog
    /// like a tool given to the builder, except that a resident one joins at the next step and
    /// is announced in that step's catalog delta; a deferred one waits in the pool. A tool with
    /// the name of a registered one replaces it (its place in the list stays); built-in tools
    /// cannot be replaced. The codemode tool's own description does not change (it lists the
    /// tools of the start); programs see the new tool from the next step on.
    pub fn add_tool(&mut self, tool: Arc<dyn Tool>) -> Result<(), RuntimeError> {
        let (def, validator) = checked_definition(tool.as_ref(), "added")?;
        let entry = registry::Entry {
            def,
            tool,
            validator,
            origin: Origin::Registered,
        };
        self.tools.add(entry, &mut self.shared.catalog_mut())
    }

    /// Removes a tool added earlier (e.g. an MCP server no longer lists it). It stays in the
    /// native tool list, so the request prefix does not change; the next request appends a
    /// "no longer available" note (earlier messages are never edited), and a call to it gets
    /// a clear error. Built-in tools cannot be removed. Returns whether a tool was removed.
    pub fn remove_tool(&mut self, name: &str) -> bool {
        self.tools.remove(name, &mut self.shared.catalog_mut())
    }
}

/// The runtime's tools as a [`ToolSet`], for what follows a changing tool source without
/// knowing the runtime (`ishiki_mcp::apply_tool_changes`).
impl ToolSet for Runtime {
    type Error = RuntimeError;

    fn add_tool(&mut self, tool: Arc<dyn Tool>) -> Result<(), RuntimeError> {
        Runtime::add_tool(self, tool)
    }

    fn remove_tool(&mut self, name: &str) -> bool {
        Runtime::remove_tool(self, name)
    }
}

/// Checks `tool` as the runtime will when it is registered or added: its definition
/// (`ToolDef::validate`) and its input schema, compiled. This is the one place schemas are
/// compiled for direct calls; an embedder that must not let one broken tool stop a build
/// (tools from an MCP server) checks each first and leaves out the ones refused.
pub fn check_tool(tool: &dyn Tool) -> Result<(), RuntimeError> {
    checked_definition(tool, "registered").map(drop)
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

/// A message as the history store keeps it: the message's own fields, and, beside an
/// assistant message, what its provider reported of the request it answered. Those are no
/// fields of `Message` (the model boundary), so they are fields here, in the same JSON object
/// as the message's: a record written before this type reads the same.
#[derive(Debug, Serialize, Deserialize)]
struct MessageRecord {
    #[serde(flatten)]
    message: Message,
    /// The provider's token counts for the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    usage: Option<crate::message::Usage>,
    /// What the provider changed in the request (thinking it dropped), verbatim, for
    /// diagnosis.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    input_transformations: Vec<Value>,
}

/// The delivery state of single records as the store keeps them: each row of `state`,
/// keyed by its record's id.
fn delivery_records(state: &DeliveryState) -> Result<Vec<(String, Value)>, RuntimeError> {
    state
        .rows()
        .iter()
        .map(|row| Ok((row.id.clone(), to_json(row)?)))
        .collect()
}

impl Runtime {
    /// Puts the catalog state (with `announced`) into `batch` when it differs from the one the
    /// store holds; [`Runtime::catalog_committed`] records it once the batch is stored.
    fn put_catalog(&self, batch: &mut Batch, announced: &[String]) -> Result<(), RuntimeError> {
        let catalog = to_json(&CatalogBlob {
            catalog: Some(self.shared.catalog_mut().state()),
            announced: announced.to_vec(),
        })?;
        if self.catalog_stored.as_ref() != Some(&catalog) {
            batch.catalog = Some(catalog);
        }
        Ok(())
    }

    /// After `batch` was stored: what the store now holds of the catalog.
    fn catalog_committed(&mut self, batch: Batch) {
        if let Some(catalog) = batch.catalog {
            self.catalog_stored = Some(catalog);
        }
    }
}

fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<Value, RuntimeError> {
    serde_json::to_value(value)
        .map_err(|e| err(RuntimeErrorKind::Internal, "cannot serialize state")(&e))
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A tool's definition, checked (`ToolDef::validate`) with its input schema compiled (or the
/// validator another runtime of the process compiled for the same schema): what registering
/// (`what` = `registered`) and adding after start (`added`) both require.
fn checked_definition(
    tool: &dyn Tool,
    what: &str,
) -> Result<(ToolDef, Arc<jsonschema::Validator>), RuntimeError> {
    let def = tool.definition();
    def.validate().map_err(|e| {
        RuntimeError::new(
            RuntimeErrorKind::Config,
            format!("a tool cannot be {what}: {e}"),
        )
    })?;
    // Compiled once per process while any runtime uses it (`schemas.rs`).
    let validator = crate::schemas::compiled(&def.input_schema).map_err(|e| {
        RuntimeError::new(
            RuntimeErrorKind::Config,
            format!("tool `{}` has an invalid input schema: {e}", def.name),
        )
    })?;
    Ok((def, validator))
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

#[cfg(test)]
mod tests {
    //! The one place input schemas are compiled (`check_tool`).

    use super::*;
    use async_trait::async_trait;
    use ishiki_tool::{ToolContext, ToolError};
    use serde_json::json;

    #[derive(Debug)]
    struct WithSchema(Value);

    #[async_trait]
    impl Tool for WithSchema {
        fn definition(&self) -> ToolDef {
            ToolDef::new(
                "shaped",
                "A tool with a given input schema.",
                self.0.clone(),
            )
        }

        async fn execute(&self, _: Value, _: &ToolContext) -> Result<Value, ToolError> {
            Ok(Value::Null)
        }
    }

    #[test]
    fn an_input_schema_whose_local_refs_fan_out_compiles_in_bounded_time() {
        // Each level refers four times to the next: 4^12 paths if references were expanded.
        let mut defs = serde_json::Map::new();
        for level in 0..12 {
            let next = json!({ "$ref": format!("#/$defs/L{}", level + 1) });
            defs.insert(
                format!("L{level}"),
                json!({ "type": "object", "properties": { "a": next, "b": next, "c": next, "d": next } }),
            );
        }
        defs.insert("L12".to_owned(), json!({ "type": "string" }));
        let tool = WithSchema(json!({ "$ref": "#/$defs/L0", "$defs": defs }));
        let started = std::time::Instant::now();
        let (_, validator) = checked_definition(&tool, "registered").expect("compiles");
        assert!(validator.is_valid(&json!({ "a": { "b": {} } })));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn check_tool_refuses_a_schema_that_does_not_compile_naming_the_tool() {
        let error = check_tool(&WithSchema(json!({ "type": 7 }))).unwrap_err();
        assert_eq!(error.kind(), RuntimeErrorKind::Config);
        assert!(
            error
                .message()
                .starts_with("tool `shaped` has an invalid input schema"),
            "{}",
            error.message()
        );
        assert!(check_tool(&WithSchema(json!({ "type": "object" }))).is_ok());
    }
}
