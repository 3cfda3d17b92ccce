//! Profile and `models.yaml` assembly (requirements §1, PRO-1..PRO-8).
//!
//! A profile says which capabilities run (`codemode`, `toolsearch`) and how attachments and
//! assets behave; `models.yaml` declares what each model accepts. [`assemble`] joins the two
//! with the name of the main model and answers the questions the runtime asks at every step:
//! may the main model see images (PRO-8), and which model answers `read(...?question=)`.
//!
//! Both documents are decoded by hand from a small located tree instead of a serde derive, so
//! that YAML text ([`Profile::from_yaml`]) and JSON values embedded in other documents
//! ([`Profile::from_value`]) follow exactly the same rules, and every error names its key path
//! (plus line and column for YAML). Unknown keys are refused everywhere (PRO-7).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_saphyr::{Location, Spanned, UserMessageFormatter};

pub use ishiki_projection::ImageLimits;

/// The exact message of PRO-6, for a profile that still sets `attachment.maxImageRenders`.
pub const MAX_IMAGE_RENDERS_REMOVED: &str = "attachment.maxImageRenders was removed; use image lifetimes (once, recent, retain) and attachment.recentImageCount/imagePruneBatchSize";

// ---------------------------------------------------------------------------------------------
// Public types.

/// A profile document (PRO-1): every section is optional and takes its defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// `codemode`: whether the model may run programs (CM-1).
    pub codemode: CodemodeSection,
    /// `toolsearch`: whether non-resident tools wait in a pool (TS-1).
    pub toolsearch: ToolsearchSection,
    /// `attachment`: image input switches, the vision side-model and per-request budgets (PRO-2).
    pub attachment: AttachmentSection,
    /// `assets`: inbound media download and cleanup (PRO-3).
    pub assets: AssetsSection,
    /// `mcp`: MCP servers whose tools join the pool (issue 9). Left out of the serialized
    /// profile when no server is declared.
    #[serde(skip_serializing_if = "McpSection::is_empty")]
    pub mcp: McpSection,
    /// `tools`: the deadline and result cap of every tool call (issue 13). Left out of the
    /// serialized profile while it has its defaults.
    #[serde(skip_serializing_if = "ToolsSection::is_default")]
    pub tools: ToolsSection,
}

/// The `tools` section: limits on every tool call, direct or from a program. Both must be at
/// least 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsSection {
    /// `timeoutMs` (default 60000): a call still running after this fails and is abandoned.
    pub timeout_ms: u64,
    /// `maxResultBytes` (default 16777216): a raw result larger than this, as JSON, fails.
    pub max_result_bytes: u64,
}

impl Default for ToolsSection {
    fn default() -> Self {
        Self {
            timeout_ms: 60_000,
            max_result_bytes: 16 << 20,
        }
    }
}

impl ToolsSection {
    /// Whether every value is the default.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// The `codemode` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CodemodeSection {
    /// `codemode.enable` (default false).
    pub enable: bool,
}

/// The `toolsearch` section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolsearchSection {
    /// `toolsearch.enable` (default false).
    pub enable: bool,
}

/// The `attachment` section (PRO-2). Ranges: `imagePruneBatchSize`, `maxImageBytes`,
/// `maxTotalImageBytes`, `maxImageCount` and `maxImageDimension` must be at least 1 (zero would
/// make every image wait or be refused for ever; `imageInput: false` is the way to turn images
/// off). `recentImageCount` may be 0: `recent` images then last only until a pruning batch is
/// full.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentSection {
    /// `imageInput` (default true): the profile's upper bound on the main model's image input.
    pub image_input: bool,
    /// `messageImageInput` (default true): whether platform-message images enter the main
    /// context by themselves (PRJ-2).
    pub message_image_input: bool,
    /// `visionModel` (default none): a model or model-group name for `read(...?question=)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vision_model: Option<String>,
    /// `recentImageCount` (default 3).
    pub recent_image_count: usize,
    /// `imagePruneBatchSize` (default 2, at least 1).
    pub image_prune_batch_size: usize,
    /// `maxImageBytes` (default 5242880, at least 1).
    pub max_image_bytes: u64,
    /// `maxTotalImageBytes` (default 10485760, at least 1).
    pub max_total_image_bytes: u64,
    /// `maxImageCount` (default 4, at least 1).
    pub max_image_count: usize,
    /// `maxImageDimension` (default 1568, at least 1).
    pub max_image_dimension: u32,
}

impl Default for AttachmentSection {
    fn default() -> Self {
        Self {
            image_input: true,
            message_image_input: true,
            vision_model: None,
            recent_image_count: 3,
            image_prune_batch_size: 2,
            max_image_bytes: 5_242_880,
            max_total_image_bytes: 10_485_760,
            max_image_count: 4,
            max_image_dimension: 1568,
        }
    }
}

/// The `assets` section (PRO-3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AssetsSection {
    /// `autoDownloadMaxBytes` (default 20971520; 0 disables inbound auto-download).
    pub auto_download_max_bytes: u64,
    /// `cleanup`: periodic deletion of old assets.
    pub cleanup: CleanupSection,
}

impl Default for AssetsSection {
    fn default() -> Self {
        Self {
            auto_download_max_bytes: 20_971_520,
            cleanup: CleanupSection::default(),
        }
    }
}

/// The `assets.cleanup` section (PRO-3). `retentionDays` and `intervalMinutes` must be at
/// least 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CleanupSection {
    /// `enabled` (default false).
    pub enabled: bool,
    /// `retentionDays` (default 30): assets older than this are deleted.
    pub retention_days: u32,
    /// `intervalMinutes` (default 60): how often a cleanup pass runs.
    pub interval_minutes: u32,
}

impl Default for CleanupSection {
    fn default() -> Self {
        Self {
            enabled: false,
            retention_days: 30,
            interval_minutes: 60,
        }
    }
}

/// The `mcp` section: MCP servers started as child processes; their tools are named
/// `<server>_<tool>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct McpSection {
    /// `mcp.servers`: server name → how to start it. A name uses letters, digits, `-` and `_`
    /// only, since it prefixes tool names.
    pub servers: BTreeMap<String, McpServerDecl>,
}

impl McpSection {
    /// Whether no server is declared.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// One entry of `mcp.servers`. `timeoutMs` must be at least 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerDecl {
    /// `command` (required): the program that starts the server, e.g. `node` or `npx`.
    pub command: String,
    /// `args` (default none): its arguments.
    pub args: Vec<String>,
    /// `env` (default none): variables added to the inherited environment.
    pub env: BTreeMap<String, String>,
    /// `cwd` (default: the runtime's working directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `resident` (default false): whether its tools are always in the catalog instead of
    /// waiting in the toolsearch pool (TS-1).
    pub resident: bool,
    /// `timeoutMs` (default 30000): the limit for starting the server and for each call.
    pub timeout_ms: u64,
}

impl McpServerDecl {
    /// The default of `timeoutMs`.
    pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

    /// A server started by `command`, with every other key at its default.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            resident: false,
            timeout_ms: Self::DEFAULT_TIMEOUT_MS,
        }
    }
}

/// An input modality a model declares (PRO-4).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Modality {
    /// `text`.
    Text,
    /// `image`.
    Image,
    /// `audio`.
    Audio,
    /// `video`.
    Video,
    /// `file`: documents such as PDFs, passed to the model whole.
    File,
}

impl Modality {
    /// Every modality, in declaration order.
    pub const ALL: [Modality; 5] = [
        Modality::Text,
        Modality::Image,
        Modality::Audio,
        Modality::Video,
        Modality::File,
    ];

    /// The name used in `models.yaml`.
    pub fn as_str(self) -> &'static str {
        match self {
            Modality::Text => "text",
            Modality::Image => "image",
            Modality::Audio => "audio",
            Modality::Video => "video",
            Modality::File => "file",
        }
    }

    fn from_name(name: &str) -> Option<Modality> {
        Modality::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

/// How a model calls tools: natively through the provider API, or in its text (TP-1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCalling {
    /// `native` (the default): the provider returns structured tool calls.
    #[default]
    Native,
    /// `text`: tool calls are parsed out of the model's text by the text protocol.
    Text,
}

impl ToolCalling {
    /// The name used in `models.yaml`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolCalling::Native => "native",
            ToolCalling::Text => "text",
        }
    }
}

/// One model of `models.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelDecl {
    /// `input`: the modalities the model accepts (required, at least one).
    pub input: Vec<Modality>,
    /// `toolCalling` (default `native`).
    pub tool_calling: ToolCalling,
    /// `provider`: accepted and kept, not used yet (a later issue connects providers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// `baseUrl`: accepted and kept, not used yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// `model`: the provider's model id; accepted and kept, not used yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `apiKeyEnv`: the environment variable holding the API key; accepted, not used yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// `imageLimits`: overrides of the provider's image limits, key by key (see
    /// [`ModelDecl::image_limits`]); the `provider` field is unused here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_limits: Option<ImageLimits>,
}

impl ModelDecl {
    /// A model accepting `input`, calling tools natively, with no provider settings.
    pub fn new(input: impl Into<Vec<Modality>>) -> Self {
        Self {
            input: input.into(),
            tool_calling: ToolCalling::Native,
            provider: None,
            base_url: None,
            model: None,
            api_key_env: None,
            image_limits: None,
        }
    }

    /// The image limits projection enforces for this model besides the profile's budgets:
    /// the defaults of its `provider` ([`ImageLimits::for_provider`]: Anthropic, OpenAI),
    /// each replaced by the model's `imageLimits` key when set.
    pub fn image_limits(&self) -> ImageLimits {
        let provider = self.provider.as_deref().unwrap_or_default();
        let mut limits = ImageLimits::for_provider(provider);
        limits.provider = provider.to_owned();
        if let Some(o) = &self.image_limits {
            limits.image_bytes = o.image_bytes.or(limits.image_bytes);
            limits.request_bytes = o.request_bytes.or(limits.request_bytes);
            limits.images = o.images.or(limits.images);
            limits.dimension = o.dimension.or(limits.dimension);
            limits.many_images = o.many_images.or(limits.many_images);
            limits.many_images_dimension = o.many_images_dimension.or(limits.many_images_dimension);
        }
        limits
    }

    /// Whether the model declares `modality` among its inputs.
    pub fn accepts(&self, modality: Modality) -> bool {
        self.input.contains(&modality)
    }
}

/// A `models.yaml` document (PRO-4): models by name, and groups naming candidate models.
/// A group name may not also be a model name, a group lists at least one model and only
/// declared models.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ModelsDoc {
    /// `models`: each model's declaration.
    pub models: BTreeMap<String, ModelDecl>,
    /// `groups`: group name → candidate model names.
    pub groups: BTreeMap<String, Vec<String>>,
}

/// The target of `attachment.visionModel` once assembled: the name as written and the models
/// it stands for (the model itself, or the group's candidates in order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VisionTarget {
    /// The model or group name from the profile.
    pub name: String,
    /// The candidate models, each declaring `input: [text, image]` (PRO-5).
    pub candidates: Vec<String>,
}

/// A profile joined with its models: what the runtime reads at every step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assembly {
    /// The profile as decoded.
    pub profile: Profile,
    /// The models document as decoded.
    pub models: ModelsDoc,
    /// The main model's name.
    pub main_model: String,
    /// The main model's declaration.
    pub main: ModelDecl,
    /// Effective image input (PRO-8): `attachment.imageInput` and the main model declares
    /// `image`.
    pub image_input: bool,
    /// Whether the main model declares `audio` input (no profile switch exists for audio).
    pub audio_input: bool,
    /// The vision side-model (VIS-1), when `attachment.visionModel` is set.
    pub vision: Option<VisionTarget>,
}

/// What went wrong during assembly, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AssemblyErrorKind {
    /// The profile is not valid YAML, or has an unknown key, a wrong type or an out-of-range
    /// value (PRO-7).
    InvalidProfile,
    /// `models.yaml` is not valid YAML or is malformed.
    InvalidModels,
    /// The profile uses a key that was removed (PRO-6).
    RemovedKey,
    /// A model or group name does not exist (PRO-5).
    UnknownModel,
    /// `attachment.visionModel` names a model, or a group with a candidate, that does not
    /// declare `input: [text, image]` (PRO-5).
    VisionModelUnsupported,
}

impl AssemblyErrorKind {
    /// The stable error code printed by the scenario runner's `error` event.
    pub fn code(self) -> &'static str {
        match self {
            AssemblyErrorKind::InvalidProfile => "invalid_profile",
            AssemblyErrorKind::InvalidModels => "invalid_models",
            AssemblyErrorKind::RemovedKey => "removed_key",
            AssemblyErrorKind::UnknownModel => "unknown_model",
            AssemblyErrorKind::VisionModelUnsupported => "vision_model_unsupported",
        }
    }
}

/// A profile or models document that cannot be assembled. The message names the key path and,
/// for YAML, the line and column (PRO-7); `Display` prints the message alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssemblyError {
    kind: AssemblyErrorKind,
    message: String,
    path: Option<String>,
    location: Option<(usize, usize)>,
    snippet: Option<String>,
}

impl AssemblyError {
    fn new(kind: AssemblyErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            path: None,
            location: None,
            snippet: None,
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> AssemblyErrorKind {
        self.kind
    }

    /// The stable error code (`invalid_profile`, `vision_model_unsupported`, …).
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The message: lower-case, naming the key path and (for YAML) line and column.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The key path of the offending entry (`attachment.maxImageCount`,
    /// `models.main.input[1]`), when the error concerns one.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// The 1-based line and column in the YAML text, when the error came from YAML.
    pub fn location(&self) -> Option<(usize, usize)> {
        self.location
    }

    /// The offending YAML line with a caret under the column, for terminals.
    pub fn snippet(&self) -> Option<&str> {
        self.snippet.as_deref()
    }
}

impl fmt::Display for AssemblyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AssemblyError {}

// ---------------------------------------------------------------------------------------------
// Entry points.

impl Profile {
    /// Decodes a profile from YAML text. An empty document is the default profile.
    pub fn from_yaml(text: &str) -> Result<Profile, AssemblyError> {
        let doc = Doc {
            kind: DocKind::Profile,
            source: Some(text),
        };
        let tree = doc.parse_yaml(text)?;
        doc.profile(&tree)
    }

    /// Decodes a profile embedded in another document (the scenario file's `profile`). Errors
    /// name the key path; there are no line numbers to give.
    pub fn from_value(value: &Value) -> Result<Profile, AssemblyError> {
        let doc = Doc {
            kind: DocKind::Profile,
            source: None,
        };
        let tree = doc.tree_from_json(value)?;
        doc.profile(&tree)
    }
}

impl<'de> Deserialize<'de> for Profile {
    /// Goes through [`Profile::from_value`], so embedding a profile in a serde type applies the
    /// same checks (with key paths, without locations).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Profile::from_value(&value).map_err(de::Error::custom)
    }
}

impl ModelsDoc {
    /// Decodes a `models.yaml` document. An empty document declares nothing.
    pub fn from_yaml(text: &str) -> Result<ModelsDoc, AssemblyError> {
        let doc = Doc {
            kind: DocKind::Models,
            source: Some(text),
        };
        let tree = doc.parse_yaml(text)?;
        doc.models(&tree)
    }

    /// Decodes a models document embedded in another document (the scenario file's `models`).
    pub fn from_value(value: &Value) -> Result<ModelsDoc, AssemblyError> {
        let doc = Doc {
            kind: DocKind::Models,
            source: None,
        };
        let tree = doc.tree_from_json(value)?;
        doc.models(&tree)
    }
}

impl<'de> Deserialize<'de> for ModelsDoc {
    /// Goes through [`ModelsDoc::from_value`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        ModelsDoc::from_value(&value).map_err(de::Error::custom)
    }
}

/// Joins a profile with its models and the main model's name (PRO-5, PRO-8).
///
/// Fails with `unknown_model` when the main model, the vision model or group, or a group
/// candidate is not declared, and with `vision_model_unsupported` when a vision candidate does
/// not declare both `text` and `image` input. The models document is checked again here, so
/// one built in code gets the same checks as one decoded from YAML.
pub fn assemble(
    profile: Profile,
    models: ModelsDoc,
    main_model: &str,
) -> Result<Assembly, AssemblyError> {
    check_groups(&models, &|_, _| None, None)?;

    let main = match models.models.get(main_model) {
        Some(decl) => decl.clone(),
        None if models.groups.contains_key(main_model) => {
            return Err(AssemblyError::new(
                AssemblyErrorKind::UnknownModel,
                format!("main model `{main_model}` is a group; the main model must be one model"),
            ));
        }
        None => {
            return Err(AssemblyError::new(
                AssemblyErrorKind::UnknownModel,
                format!(
                    "unknown main model `{main_model}` (declared models: {})",
                    name_list(models.models.keys())
                ),
            ));
        }
    };

    let vision = match &profile.attachment.vision_model {
        None => None,
        Some(name) => Some(vision_target(name, &models)?),
    };

    let image_input = profile.attachment.image_input && main.accepts(Modality::Image);
    let audio_input = main.accepts(Modality::Audio);
    Ok(Assembly {
        profile,
        models,
        main_model: main_model.to_owned(),
        main,
        image_input,
        audio_input,
        vision,
    })
}

fn vision_target(name: &str, models: &ModelsDoc) -> Result<VisionTarget, AssemblyError> {
    const PATH: &str = "attachment.visionModel";
    let (candidates, group) = if models.models.contains_key(name) {
        (vec![name.to_owned()], false)
    } else if let Some(members) = models.groups.get(name) {
        (members.clone(), true)
    } else {
        let mut error = AssemblyError::new(
            AssemblyErrorKind::UnknownModel,
            format!(
                "{PATH}: unknown model or group `{name}` (models: {}; groups: {})",
                name_list(models.models.keys()),
                name_list(models.groups.keys())
            ),
        );
        error.path = Some(PATH.to_owned());
        return Err(error);
    };

    let unsupported: Vec<String> = candidates
        .iter()
        .filter_map(|candidate| {
            let decl = models.models.get(candidate)?;
            if decl.accepts(Modality::Text) && decl.accepts(Modality::Image) {
                None
            } else {
                Some(format!(
                    "`{candidate}` declares {}",
                    input_list(&decl.input)
                ))
            }
        })
        .collect();
    if !unsupported.is_empty() {
        let problem = if group {
            format!(
                "every candidate of group `{name}` must declare `input: [text, image]`, but {}",
                unsupported.join(" and ")
            )
        } else {
            let declared = models
                .models
                .get(name)
                .map_or_else(String::new, |decl| input_list(&decl.input));
            format!(
                "model `{name}` must declare `input: [text, image]`, but it declares {declared}"
            )
        };
        let mut error = AssemblyError::new(
            AssemblyErrorKind::VisionModelUnsupported,
            format!("{PATH}: {problem}"),
        );
        error.path = Some(PATH.to_owned());
        return Err(error);
    }
    Ok(VisionTarget {
        name: name.to_owned(),
        candidates,
    })
}

/// Group rules shared by decoding (with locations) and [`assemble`] (without): no group shares
/// a model's name, none is empty, every candidate is a declared model.
fn check_groups(
    models: &ModelsDoc,
    at: &dyn Fn(&str, Option<usize>) -> At,
    source: Option<&str>,
) -> Result<(), AssemblyError> {
    let doc = Doc {
        kind: DocKind::Models,
        source,
    };
    for (group, members) in &models.groups {
        let group_path = Path::root().key("groups").key(group);
        if models.models.contains_key(group) {
            return Err(doc.error(
                AssemblyErrorKind::InvalidModels,
                &group_path,
                at(group, None),
                format!("`{group}` is already a model name; a group needs a name of its own"),
            ));
        }
        if members.is_empty() {
            return Err(doc.error(
                AssemblyErrorKind::InvalidModels,
                &group_path,
                at(group, None),
                "a group lists at least one model",
            ));
        }
        for (index, member) in members.iter().enumerate() {
            if models.models.contains_key(member) {
                continue;
            }
            let problem = if models.groups.contains_key(member) {
                format!("`{member}` is a group; a group lists models, not groups")
            } else {
                format!(
                    "unknown model `{member}` (declared models: {})",
                    name_list(models.models.keys())
                )
            };
            return Err(doc.error(
                AssemblyErrorKind::UnknownModel,
                &group_path.index(index),
                at(group, Some(index)),
                problem,
            ));
        }
    }
    Ok(())
}

fn name_list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<String> = names.map(|n| format!("`{n}`")).collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

fn input_list(input: &[Modality]) -> String {
    let names: Vec<&str> = input.iter().map(|m| m.as_str()).collect();
    format!("[{}]", names.join(", "))
}

// ---------------------------------------------------------------------------------------------
// The located tree both inputs are decoded from.

/// 1-based line and column, when the input had them.
type At = Option<(usize, usize)>;

#[derive(Debug)]
enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Tree>),
    Map(Vec<(Key, Tree)>),
}

#[derive(Debug)]
struct Tree {
    node: Node,
    at: At,
}

#[derive(Debug)]
struct Key {
    name: String,
    at: At,
}

/// Deeper nesting than this is refused; it bounds the recursion over JSON values (serde-saphyr
/// applies its own depth budget of the same size to YAML).
const MAX_DEPTH: usize = 64;

fn at_of(location: &Location) -> At {
    let line = usize::try_from(location.line()).ok()?;
    let column = usize::try_from(location.column()).ok()?;
    (line > 0).then_some((line, column))
}

/// A YAML node as serde-saphyr hands it over; its children carry their spans.
struct YamlNode(Node);

fn spanned_tree(spanned: Spanned<YamlNode>) -> Tree {
    Tree {
        at: at_of(&spanned.referenced),
        node: spanned.value.0,
    }
}

impl<'de> Deserialize<'de> for YamlNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(YamlNodeVisitor)
    }
}

struct YamlNodeVisitor;

impl<'de> Visitor<'de> for YamlNodeVisitor {
    type Value = YamlNode;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Bool(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Int(v.into())))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Int(v.into())))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Int(v)))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<YamlNode, E> {
        Ok(YamlNode(match i128::try_from(v) {
            Ok(v) => Node::Int(v),
            // Beyond i128 only the magnitude matters for a range error.
            Err(_) => Node::Float(v as f64),
        }))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Float(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Str(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Str(v)))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Str(String::from_utf8_lossy(v).into_owned())))
    }

    fn visit_unit<E: de::Error>(self) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<YamlNode, D::Error> {
        YamlNode::deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<YamlNode, D::Error> {
        YamlNode::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<YamlNode, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<YamlNode>>()? {
            items.push(spanned_tree(item));
        }
        Ok(YamlNode(Node::Seq(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<YamlNode, A::Error> {
        let mut entries = Vec::new();
        // Keys are read as strings: serde-saphyr then keeps `on:` or `1:` as written instead of
        // resolving them to a boolean or a number.
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value::<Spanned<YamlNode>>()?;
            entries.push((
                Key {
                    at: at_of(&key.referenced),
                    name: key.value,
                },
                spanned_tree(value),
            ));
        }
        Ok(YamlNode(Node::Map(entries)))
    }
}

// ---------------------------------------------------------------------------------------------
// Key paths.

#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

#[derive(Debug, Clone)]
struct Path(Vec<Seg>);

impl Path {
    fn root() -> Path {
        Path(Vec::new())
    }

    fn key(&self, key: &str) -> Path {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_owned()));
        Path(segs)
    }

    fn index(&self, index: usize) -> Path {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        Path(segs)
    }

    fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(key) => {
                    let plain = !key.is_empty()
                        && key
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    if plain {
                        f.write_str(key)?;
                    } else {
                        // Quoting keeps `models."gpt-4.1"` unambiguous.
                        write!(f, "{}", Value::String(key.clone()))?;
                    }
                }
                Seg::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding.

#[derive(Debug, Clone, Copy)]
enum DocKind {
    Profile,
    Models,
}

struct Doc<'s> {
    kind: DocKind,
    source: Option<&'s str>,
}

const ROOT_KEYS: &[&str] = &[
    "codemode",
    "toolsearch",
    "attachment",
    "assets",
    "mcp",
    "tools",
];
const TOOLS_KEYS: &[&str] = &["timeoutMs", "maxResultBytes"];
const MCP_KEYS: &[&str] = &["servers"];
const MCP_SERVER_KEYS: &[&str] = &["command", "args", "env", "cwd", "resident", "timeoutMs"];
const ENABLE_KEYS: &[&str] = &["enable"];
const ATTACHMENT_KEYS: &[&str] = &[
    "imageInput",
    "messageImageInput",
    "visionModel",
    "recentImageCount",
    "imagePruneBatchSize",
    "maxImageBytes",
    "maxTotalImageBytes",
    "maxImageCount",
    "maxImageDimension",
];
const ASSETS_KEYS: &[&str] = &["autoDownloadMaxBytes", "cleanup"];
const CLEANUP_KEYS: &[&str] = &["enabled", "retentionDays", "intervalMinutes"];
const MODELS_ROOT_KEYS: &[&str] = &["models", "groups"];
// New model keys (e.g. pricing, context size) only need adding here and in `model_decl`.
const MODEL_KEYS: &[&str] = &[
    "input",
    "toolCalling",
    "provider",
    "baseUrl",
    "model",
    "apiKeyEnv",
    "imageLimits",
];
const IMAGE_LIMIT_KEYS: &[&str] = &[
    "imageBytes",
    "requestBytes",
    "images",
    "dimension",
    "manyImages",
    "manyImagesDimension",
];

type Entries<'t> = &'t [(Key, Tree)];

impl Doc<'_> {
    fn invalid(&self) -> AssemblyErrorKind {
        match self.kind {
            DocKind::Profile => AssemblyErrorKind::InvalidProfile,
            DocKind::Models => AssemblyErrorKind::InvalidModels,
        }
    }

    fn name(&self) -> &'static str {
        match self.kind {
            DocKind::Profile => "profile",
            DocKind::Models => "models file",
        }
    }

    fn error(
        &self,
        kind: AssemblyErrorKind,
        path: &Path,
        at: At,
        problem: impl fmt::Display,
    ) -> AssemblyError {
        let shown = if path.is_root() {
            self.name().to_owned()
        } else {
            path.to_string()
        };
        let mut message = format!("{shown}: {problem}");
        if let Some((line, column)) = at {
            message.push_str(&format!(" (line {line}, column {column})"));
        }
        AssemblyError {
            kind,
            message,
            path: (!path.is_root()).then_some(shown),
            location: at,
            snippet: at.and_then(|(line, column)| snippet(self.source?, line, column)),
        }
    }

    fn parse_yaml(&self, text: &str) -> Result<Tree, AssemblyError> {
        match serde_saphyr::from_str::<Spanned<YamlNode>>(text) {
            Ok(root) => Ok(spanned_tree(root)),
            Err(error) => {
                let at = error.location().as_ref().and_then(at_of);
                let mut problem =
                    crate::yaml_budget::yaml_budget_message(&error).unwrap_or_else(|| {
                        error
                            .without_snippet()
                            .render_with_formatter(&UserMessageFormatter)
                    });
                if let Some((line, column)) = at {
                    // The formatter appends the location; ours goes at the end in our format.
                    let suffix = format!(" at line {line}, column {column}");
                    if let Some(stripped) = problem.strip_suffix(&suffix) {
                        problem = stripped.to_owned();
                    }
                }
                Err(self.error(self.invalid(), &Path::root(), at, problem))
            }
        }
    }

    fn tree_from_json(&self, value: &Value) -> Result<Tree, AssemblyError> {
        self.json_tree(value, &Path::root(), 0)
    }

    fn json_tree(&self, value: &Value, path: &Path, depth: usize) -> Result<Tree, AssemblyError> {
        if depth > MAX_DEPTH {
            return Err(self.error(
                self.invalid(),
                path,
                None,
                format!("nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        let node = match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Node::Int(i.into()),
                (None, Some(u)) => Node::Int(u.into()),
                _ => Node::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Node::Str(s.clone()),
            Value::Array(items) => Node::Seq(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.json_tree(item, &path.index(i), depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Node::Map(
                map.iter()
                    .map(|(k, v)| {
                        Ok((
                            Key {
                                name: k.clone(),
                                at: None,
                            },
                            self.json_tree(v, &path.key(k), depth + 1)?,
                        ))
                    })
                    .collect::<Result<_, AssemblyError>>()?,
            ),
        };
        Ok(Tree { node, at: None })
    }

    /// The entries of a mapping whose keys must all be in `allowed`; `null` (an empty YAML
    /// section such as `codemode:`) counts as an empty mapping.
    fn mapping<'t>(
        &self,
        tree: &'t Tree,
        path: &Path,
        allowed: &[&str],
    ) -> Result<Entries<'t>, AssemblyError> {
        let entries: Entries<'t> = match &tree.node {
            Node::Map(entries) => entries,
            Node::Null => &[],
            other => {
                return Err(self.error(
                    self.invalid(),
                    path,
                    tree.at,
                    format!("expected a mapping, found {}", describe(other)),
                ));
            }
        };
        for (key, _) in entries {
            if !allowed.contains(&key.name.as_str()) {
                let hint = match suggest(&key.name, allowed) {
                    Some(known) => format!("did you mean `{known}`?"),
                    None => format!("expected one of: {}", allowed.join(", ")),
                };
                return Err(self.error(
                    self.invalid(),
                    &path.key(&key.name),
                    key.at,
                    format!("unknown key ({hint})"),
                ));
            }
        }
        Ok(entries)
    }

    fn bool(
        &self,
        entries: Entries<'_>,
        path: &Path,
        key: &str,
        default: bool,
    ) -> Result<bool, AssemblyError> {
        let Some(tree) = field(entries, key) else {
            return Ok(default);
        };
        match &tree.node {
            Node::Bool(b) => Ok(*b),
            other => Err(self.error(
                self.invalid(),
                &path.key(key),
                tree.at,
                format!("expected true or false, found {}", describe(other)),
            )),
        }
    }

    fn uint<T>(
        &self,
        entries: Entries<'_>,
        path: &Path,
        key: &str,
        min: u64,
        default: T,
    ) -> Result<T, AssemblyError>
    where
        T: TryFrom<i128> + Copy,
    {
        let Some(tree) = field(entries, key) else {
            return Ok(default);
        };
        let path = path.key(key);
        let value = match &tree.node {
            Node::Int(v) => *v,
            other => {
                return Err(self.error(
                    self.invalid(),
                    &path,
                    tree.at,
                    format!("expected a whole number, found {}", describe(other)),
                ));
            }
        };
        if value < i128::from(min) {
            return Err(self.error(
                self.invalid(),
                &path,
                tree.at,
                format!("must be at least {min}, found {value}"),
            ));
        }
        T::try_from(value).map_err(|_| {
            self.error(
                self.invalid(),
                &path,
                tree.at,
                format!("must be at most {}, found {value}", max_of::<T>()),
            )
        })
    }

    fn opt_string(
        &self,
        entries: Entries<'_>,
        path: &Path,
        key: &str,
    ) -> Result<Option<String>, AssemblyError> {
        let Some(tree) = field(entries, key) else {
            return Ok(None);
        };
        match &tree.node {
            Node::Null => Ok(None),
            Node::Str(s) if s.trim().is_empty() => Err(self.error(
                self.invalid(),
                &path.key(key),
                tree.at,
                "must not be empty (leave the key out instead)",
            )),
            Node::Str(s) => Ok(Some(s.clone())),
            other => Err(self.error(
                self.invalid(),
                &path.key(key),
                tree.at,
                format!("expected a string, found {}", describe(other)),
            )),
        }
    }

    fn section<'t>(
        &self,
        entries: Entries<'t>,
        path: &Path,
        key: &str,
        allowed: &[&str],
    ) -> Result<Entries<'t>, AssemblyError> {
        match field(entries, key) {
            Some(tree) => self.mapping(tree, &path.key(key), allowed),
            None => Ok(&[]),
        }
    }

    fn profile(&self, tree: &Tree) -> Result<Profile, AssemblyError> {
        let root = Path::root();
        // PRO-6 wins over every other complaint, so check it before the generic key checks.
        if let Some(Tree {
            node: Node::Map(entries),
            ..
        }) = root_field(tree, "attachment")
            && let Some((key, _)) = entries.iter().find(|(k, _)| k.name == "maxImageRenders")
        {
            let path = root.key("attachment").key("maxImageRenders");
            let mut error = self.error(AssemblyErrorKind::RemovedKey, &path, key.at, "");
            error.message = MAX_IMAGE_RENDERS_REMOVED.to_owned();
            return Err(error);
        }

        let entries = self.mapping(tree, &root, ROOT_KEYS)?;

        let path = root.key("codemode");
        let codemode = CodemodeSection {
            enable: self.bool(
                self.section(entries, &root, "codemode", ENABLE_KEYS)?,
                &path,
                "enable",
                false,
            )?,
        };

        let path = root.key("toolsearch");
        let toolsearch = ToolsearchSection {
            enable: self.bool(
                self.section(entries, &root, "toolsearch", ENABLE_KEYS)?,
                &path,
                "enable",
                false,
            )?,
        };

        let path = root.key("attachment");
        let a = self.section(entries, &root, "attachment", ATTACHMENT_KEYS)?;
        let d = AttachmentSection::default();
        let attachment = AttachmentSection {
            image_input: self.bool(a, &path, "imageInput", d.image_input)?,
            message_image_input: self.bool(a, &path, "messageImageInput", d.message_image_input)?,
            vision_model: self.opt_string(a, &path, "visionModel")?,
            recent_image_count: self.uint(a, &path, "recentImageCount", 0, d.recent_image_count)?,
            image_prune_batch_size: self.uint(
                a,
                &path,
                "imagePruneBatchSize",
                1,
                d.image_prune_batch_size,
            )?,
            max_image_bytes: self.uint(a, &path, "maxImageBytes", 1, d.max_image_bytes)?,
            max_total_image_bytes: self.uint(
                a,
                &path,
                "maxTotalImageBytes",
                1,
                d.max_total_image_bytes,
            )?,
            max_image_count: self.uint(a, &path, "maxImageCount", 1, d.max_image_count)?,
            max_image_dimension: self.uint(
                a,
                &path,
                "maxImageDimension",
                1,
                d.max_image_dimension,
            )?,
        };

        let path = root.key("assets");
        let s = self.section(entries, &root, "assets", ASSETS_KEYS)?;
        let d = AssetsSection::default();
        let auto_download_max_bytes = self.uint(
            s,
            &path,
            "autoDownloadMaxBytes",
            0,
            d.auto_download_max_bytes,
        )?;
        let c = self.section(s, &path, "cleanup", CLEANUP_KEYS)?;
        let path = path.key("cleanup");
        let cleanup = CleanupSection {
            enabled: self.bool(c, &path, "enabled", d.cleanup.enabled)?,
            retention_days: self.uint(c, &path, "retentionDays", 1, d.cleanup.retention_days)?,
            interval_minutes: self.uint(
                c,
                &path,
                "intervalMinutes",
                1,
                d.cleanup.interval_minutes,
            )?,
        };

        let path = root.key("mcp");
        let m = self.section(entries, &root, "mcp", MCP_KEYS)?;
        let mut servers = BTreeMap::new();
        if let Some(tree) = field(m, "servers") {
            let path = path.key("servers");
            for (key, decl) in self.named_entries(tree, &path)? {
                let server_path = path.key(&key.name);
                if !key
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    return Err(self.error(
                        self.invalid(),
                        &server_path,
                        key.at,
                        "a server name uses only letters, digits, `-` and `_` (it prefixes the names of its tools)",
                    ));
                }
                servers.insert(
                    key.name.clone(),
                    self.mcp_server(decl, &server_path, key.at)?,
                );
            }
        }

        let path = root.key("tools");
        let t = self.section(entries, &root, "tools", TOOLS_KEYS)?;
        let d = ToolsSection::default();
        let tools = ToolsSection {
            timeout_ms: self.uint(t, &path, "timeoutMs", 1, d.timeout_ms)?,
            max_result_bytes: self.uint(t, &path, "maxResultBytes", 1, d.max_result_bytes)?,
        };

        Ok(Profile {
            codemode,
            toolsearch,
            attachment,
            assets: AssetsSection {
                auto_download_max_bytes,
                cleanup,
            },
            mcp: McpSection { servers },
            tools,
        })
    }

    fn mcp_server(
        &self,
        tree: &Tree,
        path: &Path,
        key_at: At,
    ) -> Result<McpServerDecl, AssemblyError> {
        let entries = self.mapping(tree, path, MCP_SERVER_KEYS)?;
        let Some(command) = self.opt_string(entries, path, "command")? else {
            return Err(self.error(
                self.invalid(),
                path,
                key_at,
                "missing key `command` (the program that starts the server, e.g. npx)",
            ));
        };

        let mut args = Vec::new();
        if let Some(tree) = field(entries, "args") {
            let args_path = path.key("args");
            let items: &[Tree] = match &tree.node {
                Node::Seq(items) => items,
                Node::Null => &[],
                other => {
                    return Err(self.error(
                        self.invalid(),
                        &args_path,
                        tree.at,
                        format!("expected a list of strings, found {}", describe(other)),
                    ));
                }
            };
            for (index, item) in items.iter().enumerate() {
                match &item.node {
                    Node::Str(arg) => args.push(arg.clone()),
                    other => {
                        return Err(self.error(
                            self.invalid(),
                            &args_path.index(index),
                            item.at,
                            format!(
                                "expected a string, found {} (quote numbers and flags)",
                                describe(other)
                            ),
                        ));
                    }
                }
            }
        }

        let mut env = BTreeMap::new();
        if let Some(tree) = field(entries, "env") {
            let env_path = path.key("env");
            for (key, value) in self.named_entries(tree, &env_path)? {
                match &value.node {
                    Node::Str(text) => {
                        env.insert(key.name.clone(), text.clone());
                    }
                    other => {
                        return Err(self.error(
                            self.invalid(),
                            &env_path.key(&key.name),
                            value.at,
                            format!(
                                "expected a string, found {} (quote numbers and booleans)",
                                describe(other)
                            ),
                        ));
                    }
                }
            }
        }

        Ok(McpServerDecl {
            command,
            args,
            env,
            cwd: self.opt_string(entries, path, "cwd")?,
            resident: self.bool(entries, path, "resident", false)?,
            timeout_ms: self.uint(
                entries,
                path,
                "timeoutMs",
                1,
                McpServerDecl::DEFAULT_TIMEOUT_MS,
            )?,
        })
    }

    fn models(&self, tree: &Tree) -> Result<ModelsDoc, AssemblyError> {
        let root = Path::root();
        let entries = self.mapping(tree, &root, MODELS_ROOT_KEYS)?;

        let mut models = BTreeMap::new();
        if let Some(tree) = field(entries, "models") {
            let path = root.key("models");
            for (key, decl) in self.named_entries(tree, &path)? {
                models.insert(
                    key.name.clone(),
                    self.model_decl(decl, &path.key(&key.name), key.at)?,
                );
            }
        }

        let mut groups = BTreeMap::new();
        let mut locations: BTreeMap<(String, Option<usize>), At> = BTreeMap::new();
        if let Some(tree) = field(entries, "groups") {
            let path = root.key("groups");
            for (key, list) in self.named_entries(tree, &path)? {
                let group_path = path.key(&key.name);
                locations.insert((key.name.clone(), None), key.at);
                let items = match &list.node {
                    Node::Seq(items) => items,
                    other => {
                        return Err(self.error(
                            self.invalid(),
                            &group_path,
                            list.at,
                            format!("expected a list of model names, found {}", describe(other)),
                        ));
                    }
                };
                let mut members = Vec::new();
                for (index, item) in items.iter().enumerate() {
                    match &item.node {
                        Node::Str(name) => members.push(name.clone()),
                        other => {
                            return Err(self.error(
                                self.invalid(),
                                &group_path.index(index),
                                item.at,
                                format!("expected a model name, found {}", describe(other)),
                            ));
                        }
                    }
                    locations.insert((key.name.clone(), Some(index)), item.at);
                }
                groups.insert(key.name.clone(), members);
            }
        }

        let doc = ModelsDoc { models, groups };
        let at = |group: &str, index: Option<usize>| {
            locations.get(&(group.to_owned(), index)).copied().flatten()
        };
        check_groups(&doc, &at, self.source)?;
        Ok(doc)
    }

    /// A mapping from free names (models, groups) to values; names must not be blank.
    fn named_entries<'t>(&self, tree: &'t Tree, path: &Path) -> Result<Entries<'t>, AssemblyError> {
        let entries: Entries<'t> = match &tree.node {
            Node::Map(entries) => entries,
            Node::Null => &[],
            other => {
                return Err(self.error(
                    self.invalid(),
                    path,
                    tree.at,
                    format!("expected a mapping of names, found {}", describe(other)),
                ));
            }
        };
        if let Some((key, _)) = entries.iter().find(|(k, _)| k.name.trim().is_empty()) {
            return Err(self.error(
                self.invalid(),
                &path.key(&key.name),
                key.at,
                "a name must not be blank",
            ));
        }
        Ok(entries)
    }

    fn model_decl(&self, tree: &Tree, path: &Path, key_at: At) -> Result<ModelDecl, AssemblyError> {
        let entries = self.mapping(tree, path, MODEL_KEYS)?;
        let Some(input) = field(entries, "input") else {
            return Err(self.error(
                self.invalid(),
                path,
                key_at,
                "missing key `input` (the modalities the model accepts, e.g. [text, image])",
            ));
        };
        let input_path = path.key("input");
        let items = match &input.node {
            Node::Seq(items) => items,
            other => {
                return Err(self.error(
                    self.invalid(),
                    &input_path,
                    input.at,
                    format!("expected a list of modalities, found {}", describe(other)),
                ));
            }
        };
        if items.is_empty() {
            return Err(self.error(
                self.invalid(),
                &input_path,
                input.at,
                "must list at least one modality",
            ));
        }
        let mut modalities = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let modality = match &item.node {
                Node::Str(name) => Modality::from_name(name),
                _ => None,
            };
            match modality {
                Some(m) => modalities.push(m),
                None => {
                    let names: Vec<&str> = Modality::ALL.iter().map(|m| m.as_str()).collect();
                    let problem = match &item.node {
                        Node::Str(name) => format!("unknown modality `{name}`"),
                        other => format!("expected a modality, found {}", describe(other)),
                    };
                    return Err(self.error(
                        self.invalid(),
                        &input_path.index(index),
                        item.at,
                        format!("{problem} (expected one of: {})", names.join(", ")),
                    ));
                }
            }
        }

        let tool_calling = match field(entries, "toolCalling") {
            None => ToolCalling::default(),
            Some(tree) => match &tree.node {
                Node::Str(s) if s == "native" => ToolCalling::Native,
                Node::Str(s) if s == "text" => ToolCalling::Text,
                other => {
                    return Err(self.error(
                        self.invalid(),
                        &path.key("toolCalling"),
                        tree.at,
                        format!("expected `native` or `text`, found {}", describe(other)),
                    ));
                }
            },
        };

        Ok(ModelDecl {
            input: modalities,
            tool_calling,
            provider: self.opt_string(entries, path, "provider")?,
            base_url: self.opt_string(entries, path, "baseUrl")?,
            model: self.opt_string(entries, path, "model")?,
            api_key_env: self.opt_string(entries, path, "apiKeyEnv")?,
            image_limits: self.image_limits(entries, path)?,
        })
    }

    /// A model's `imageLimits` overrides; every key optional, every value at least 1.
    fn image_limits(
        &self,
        entries: Entries<'_>,
        path: &Path,
    ) -> Result<Option<ImageLimits>, AssemblyError> {
        let Some(tree) = field(entries, "imageLimits") else {
            return Ok(None);
        };
        let path = path.key("imageLimits");
        let limits = self.mapping(tree, &path, IMAGE_LIMIT_KEYS)?;
        let set = |key: &str| field(limits, key).is_some();
        let u64_of = |key: &str| -> Result<Option<u64>, AssemblyError> {
            if set(key) {
                Ok(Some(self.uint(limits, &path, key, 1, 0u64)?))
            } else {
                Ok(None)
            }
        };
        let usize_of = |key: &str| -> Result<Option<usize>, AssemblyError> {
            if set(key) {
                Ok(Some(self.uint(limits, &path, key, 0, 0usize)?))
            } else {
                Ok(None)
            }
        };
        let u32_of = |key: &str| -> Result<Option<u32>, AssemblyError> {
            if set(key) {
                Ok(Some(self.uint(limits, &path, key, 1, 0u32)?))
            } else {
                Ok(None)
            }
        };
        let images = if set("images") {
            Some(self.uint(limits, &path, "images", 1, 0usize)?)
        } else {
            None
        };
        Ok(Some(ImageLimits {
            provider: String::new(),
            image_bytes: u64_of("imageBytes")?,
            request_bytes: u64_of("requestBytes")?,
            images,
            dimension: u32_of("dimension")?,
            many_images: usize_of("manyImages")?,
            many_images_dimension: u32_of("manyImagesDimension")?,
        }))
    }
}

fn field<'t>(entries: Entries<'t>, key: &str) -> Option<&'t Tree> {
    entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v)
}

fn root_field<'t>(tree: &'t Tree, key: &str) -> Option<&'t Tree> {
    match &tree.node {
        Node::Map(entries) => field(entries, key),
        _ => None,
    }
}

fn max_of<T: TryFrom<i128>>() -> i128 {
    // The largest value of the form 2^n - 1 that converts: every unsigned target's maximum has
    // that form, and this needs no trait for MAX.
    (0..127u32)
        .map(|shift| i128::MAX >> shift)
        .find(|candidate| T::try_from(*candidate).is_ok())
        .unwrap_or(0)
}

fn describe(node: &Node) -> String {
    match node {
        Node::Null => "null".to_owned(),
        Node::Bool(b) => format!("`{b}`"),
        Node::Int(i) => format!("the number {i}"),
        Node::Float(x) => format!("the number {x}"),
        Node::Str(s) => {
            let shown: String = s.chars().take(40).collect();
            let ellipsis = if shown.len() < s.len() { "…" } else { "" };
            format!("the string {}{ellipsis}", Value::String(shown))
        }
        Node::Seq(_) => "a list".to_owned(),
        Node::Map(_) => "a mapping".to_owned(),
    }
}

/// A known key the unknown one was probably meant to be: same letters ignoring case, `_` and
/// `-`, or within two edits.
fn suggest<'a>(unknown: &str, allowed: &[&'a str]) -> Option<&'a str> {
    fn norm(s: &str) -> Vec<char> {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    }
    let wanted = norm(unknown);
    if wanted.is_empty() || wanted.len() > 64 {
        return None;
    }
    let mut best: Option<(usize, &str)> = None;
    for known in allowed {
        let distance = edit_distance(&wanted, &norm(known));
        let close = distance == 0 || (distance <= 2 && wanted.len() > 3);
        if close && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, known));
        }
    }
    best.map(|(_, known)| known)
}

fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

fn snippet(source: &str, line: usize, column: usize) -> Option<String> {
    let text = source.lines().nth(line.checked_sub(1)?)?;
    // Tabs stay tabs so the caret lines up in a terminal.
    let pad: String = text
        .chars()
        .take(column.saturating_sub(1))
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let number = line.to_string();
    let gutter = " ".repeat(number.len());
    Some(format!("{gutter} |\n{number} | {text}\n{gutter} | {pad}^"))
}

// ---------------------------------------------------------------------------------------------
// Serialization helpers for callers that print an assembly.

impl Serialize for AssemblyError {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("AssemblyError", 2)?;
        s.serialize_field("code", self.code())?;
        s.serialize_field("message", &self.message)?;
        s.end()
    }
}

#[cfg(test)]
mod tests {
    //! Unit tests of the private helpers; behaviour is tested in `tests/suite/assembly.rs`.

    use super::*;

    #[test]
    fn max_of_matches_the_type() {
        assert_eq!(max_of::<u32>(), i128::from(u32::MAX));
        assert_eq!(max_of::<u64>(), i128::from(u64::MAX));
        assert_eq!(max_of::<usize>(), i128::try_from(usize::MAX).unwrap_or(0));
    }

    #[test]
    fn suggestions_cover_case_and_typos() {
        assert_eq!(suggest("image_input", ATTACHMENT_KEYS), Some("imageInput"));
        assert_eq!(
            suggest("maxImageCnt", ATTACHMENT_KEYS),
            Some("maxImageCount")
        );
        assert_eq!(suggest("enabled", ENABLE_KEYS), Some("enable"));
        assert_eq!(suggest("zzz", ENABLE_KEYS), None);
    }

    #[test]
    fn paths_quote_names_with_dots() {
        let path = Path::root()
            .key("models")
            .key("gpt-4.1")
            .key("input")
            .index(2);
        assert_eq!(path.to_string(), "models.\"gpt-4.1\".input[2]");
    }

    #[test]
    fn snippet_points_at_the_column() {
        let text = snippet("a: 1\n  bad: 2\n", 2, 3);
        assert_eq!(text.as_deref(), Some("  |\n2 |   bad: 2\n  |   ^"));
    }
}
