//! The profile and `models.yaml` schema: the public types both documents decode into, with
//! their defaults (PRO-1..PRO-8).

use std::collections::BTreeMap;

use ishiki_projection::{AttachmentConfig, ImageLimits};
use serde::Serialize;

use crate::context::ContextConfig;

/// A profile document (PRO-1): every section is optional and takes its defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    /// `codemode`: whether the model may run programs (CM-1).
    pub codemode: CodemodeSection,
    /// `toolsearch`: whether non-resident tools wait in a pool (TS-1).
    pub toolsearch: ToolsearchSection,
    /// `attachment`: image input switches, the vision side-model and per-request budgets
    /// (PRO-2): projection's own [`AttachmentConfig`], its defaults and ranges defined there
    /// once. Its `provider_limits` stay empty here: the runtime adds the main model's.
    pub attachment: AttachmentConfig,
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
    /// `context`: when the context engine folds results and compacts turns (issue 23). Left
    /// out of the serialized profile while it has its defaults.
    #[serde(skip_serializing_if = "ContextConfig::is_default")]
    pub context: ContextConfig,
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
    /// `toolsearch.semantic`: rank searches with the hybrid ranker (TS-7). Only with `enable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub semantic: Option<SemanticSection>,
}

/// The `toolsearch.semantic` section (TS-7).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SemanticSection {
    /// `model`: the directory of the sentence-embedding model (`config.json`,
    /// `tokenizer.json`, `model.safetensors`, as all-MiniLM-L6-v2 is published). The runtime
    /// reads it as given; the `ishiki` binary resolves a relative one against the profile's
    /// (or scenario's) directory.
    pub model: String,
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

/// One entry of `mcp.servers`: a local server started by `command`, or a remote one reached at
/// `url` (exactly one of the two). `timeoutMs` must be at least 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServerDecl {
    /// `command`: the program that starts the server, e.g. `node` or `npx`; empty when the
    /// server is remote (`url`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// `url`: the Streamable HTTP endpoint of a remote server (`http://` or `https://`),
    /// instead of `command`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `transport` (remote only, default: Streamable HTTP, and the older HTTP+SSE at the same
    /// URL when the server answers the `initialize` POST with 400, 404 or 405):
    /// `"streamable-http"` for Streamable HTTP only, `"sse"` for a server that speaks only
    /// the older HTTP+SSE transport (MCP `2024-11-05`; `url` is then its SSE stream's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<String>,
    /// `headers` (remote only, default none): HTTP headers sent with every request; `${NAME}`
    /// in a value is replaced by the environment variable `NAME` when the server is connected,
    /// so secrets stay out of the profile.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// `auth` (remote only, default none): how the client authenticates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<McpAuthDecl>,
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
    /// `protocol` (default: `initialize` with `2025-11-25`, and `server/discover` with
    /// `2026-07-28` when a server refuses it): `"2025-11-25"` or `"2026-07-28"` to speak
    /// only that revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// `mcp.servers.<name>.auth`: how a client authenticates to a remote server, exactly one of
/// `tokenEnv`, `oauth` and `clientCredentials`. Secrets are named by environment variables,
/// never written in the profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpAuthDecl {
    /// `tokenEnv`: the environment variable holding a bearer token, sent as
    /// `Authorization: Bearer <token>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_env: Option<String>,
    /// `oauth`: OAuth 2.1 sign-in by a person (the authorization-code flow with PKCE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oauth: Option<McpOAuthDecl>,
    /// `clientCredentials`: OAuth 2.1 for a client acting on its own behalf.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<McpClientCredentialsDecl>,
}

/// `mcp.servers.<name>.auth.oauth`: every key optional. Without `clientId` the client names
/// itself by `clientMetadataUrl` where the authorization server accepts that, and registers
/// itself otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct McpOAuthDecl {
    /// `clientId`: a client ID issued beforehand.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// `clientSecretEnv`: the variable holding that client's secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// `clientMetadataUrl`: the HTTPS URL of the client's metadata document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// `scopes` (default: what the server names).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

/// `mcp.servers.<name>.auth.clientCredentials`: `clientId` and exactly one of
/// `clientSecretEnv` and `privateKeyEnv` (with `algorithm`, `ES256` or `RS256`, default
/// `ES256`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct McpClientCredentialsDecl {
    /// `clientId` (required).
    pub client_id: String,
    /// `clientSecretEnv`: the variable holding the client secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// `privateKeyEnv`: the variable holding a PKCS#8 PEM private key (`private_key_jwt`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub private_key_env: Option<String>,
    /// `algorithm`: how the private key signs (`ES256` or `RS256`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// `scopes` (default none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

impl McpServerDecl {
    /// The default of `timeoutMs`.
    pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

    /// A server started by `command`, with every other key at its default.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            url: None,
            transport: None,
            headers: BTreeMap::new(),
            auth: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            resident: false,
            timeout_ms: Self::DEFAULT_TIMEOUT_MS,
            protocol: None,
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

    pub(super) fn from_name(name: &str) -> Option<Modality> {
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
    /// What the model can do and how to ask for it; each key unset takes the default of the
    /// model's family (`ishiki-provider` knows the families).
    #[serde(flatten)]
    pub capabilities: ModelCapabilities,
}

/// A model's capability keys in `models.yaml`, each optional: unset means "the default of
/// the model's family".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCapabilities {
    /// `thinking`: `off`, `adaptive` (the model decides, with `effort`) or `budget` (older
    /// Anthropic models, with `thinkingBudget`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// `effort`: `none`, `minimal`, `low`, `medium`, `high`, `xhigh` or `max`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// `thinkingBudget`: thinking tokens when `thinking: budget` (at least 1024).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// `preservedThinking`: the model binds each thinking block to its prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preserved_thinking: Option<bool>,
    /// `dropInvalidThinking`: ask the provider to drop, not refuse, thinking whose prefix
    /// changed (a safety net on models with preserved thinking).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop_invalid_thinking: Option<bool>,
    /// `nativeCompaction`: the provider compacts the conversation itself (Anthropic
    /// `compaction: {type: "summarize"}`); the context engine then asks it, not a summary model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub native_compaction: Option<bool>,
    /// `systemMessages`: the model takes mid-conversation system messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_messages: Option<bool>,
    /// `reasoningSummary`: `auto`, `concise` or `detailed` (OpenAI reasoning summaries).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_summary: Option<String>,
    /// `maxOutputTokens`: the output token limit of one request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// `contextWindow`: the model's context window in tokens (at least 1024).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
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
            capabilities: ModelCapabilities::default(),
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
