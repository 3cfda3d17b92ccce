//! Decoding a profile (PRO-1..PRO-7): its keys, sections and MCP server entries.

use std::collections::BTreeMap;

use ishiki_projection::AttachmentConfig;

use super::MAX_IMAGE_RENDERS_REMOVED;
use super::decode::{Doc, Entries};
use super::diagnostic::{AssemblyError, AssemblyErrorKind, describe};
use super::schema::{
    AssetsSection, CleanupSection, CodemodeSection, McpAuthDecl, McpClientCredentialsDecl,
    McpOAuthDecl, McpSection, McpServerDecl, Profile, SemanticSection, ToolsSection,
    ToolsearchSection,
};
use super::tree::{At, Node, Path, Tree, field, root_field};
use crate::context::ContextConfig;

const ROOT_KEYS: &[&str] = &[
    "codemode",
    "toolsearch",
    "attachment",
    "assets",
    "mcp",
    "tools",
    "context",
];
const CONTEXT_KEYS: &[&str] = &[
    "foldAt",
    "foldAtLeast",
    "keep",
    "neverFold",
    "foldInputs",
    "compactAt",
    "compactionModel",
];
const TOOLS_KEYS: &[&str] = &["timeoutMs", "maxResultBytes"];
const MCP_KEYS: &[&str] = &["servers"];
const MCP_SERVER_KEYS: &[&str] = &[
    "command",
    "url",
    "transport",
    "headers",
    "auth",
    "args",
    "env",
    "cwd",
    "resident",
    "timeoutMs",
    "protocol",
];
const MCP_AUTH_KEYS: &[&str] = &["tokenEnv", "oauth", "clientCredentials"];
const MCP_OAUTH_KEYS: &[&str] = &["clientId", "clientSecretEnv", "clientMetadataUrl", "scopes"];
const MCP_CLIENT_CREDENTIALS_KEYS: &[&str] = &[
    "clientId",
    "clientSecretEnv",
    "privateKeyEnv",
    "algorithm",
    "scopes",
];
pub(super) const ENABLE_KEYS: &[&str] = &["enable"];
const TOOLSEARCH_KEYS: &[&str] = &["enable", "semantic"];
const SEMANTIC_KEYS: &[&str] = &["model"];
pub(super) const ATTACHMENT_KEYS: &[&str] = &[
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

impl Doc<'_> {
    pub(super) fn profile(&self, tree: &Tree) -> Result<Profile, AssemblyError> {
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
        let t = self.section(entries, &root, "toolsearch", TOOLSEARCH_KEYS)?;
        let enable = self.bool(t, &path, "enable", false)?;
        let semantic = match field(t, "semantic") {
            None => None,
            Some(tree) => {
                let semantic_path = path.key("semantic");
                let s = self.mapping(tree, &semantic_path, SEMANTIC_KEYS)?;
                let model = match self.opt_string(s, &semantic_path, "model")? {
                    Some(model) if !model.trim().is_empty() => model,
                    Some(_) => {
                        return Err(self.error(
                            self.invalid(),
                            &semantic_path.key("model"),
                            field(s, "model").and_then(|t| t.at),
                            "expected the directory of the sentence-embedding model, found an empty string",
                        ));
                    }
                    None => {
                        return Err(self.error(
                            self.invalid(),
                            &semantic_path,
                            tree.at,
                            "missing key `model` (the directory of the sentence-embedding model: config.json, tokenizer.json, model.safetensors)",
                        ));
                    }
                };
                if !enable {
                    return Err(self.error(
                        self.invalid(),
                        &semantic_path,
                        tree.at,
                        "ranks the search of deferred tools, so it needs `toolsearch.enable: true`",
                    ));
                }
                Some(SemanticSection { model })
            }
        };
        let toolsearch = ToolsearchSection { enable, semantic };

        let path = root.key("attachment");
        let a = self.section(entries, &root, "attachment", ATTACHMENT_KEYS)?;
        let d = AttachmentConfig::default();
        let min = AttachmentConfig::minimum;
        let attachment = AttachmentConfig {
            image_input: self.bool(a, &path, "imageInput", d.image_input)?,
            message_image_input: self.bool(a, &path, "messageImageInput", d.message_image_input)?,
            vision_model: self.opt_string(a, &path, "visionModel")?,
            recent_image_count: self.uint(
                a,
                &path,
                "recentImageCount",
                min("recentImageCount"),
                d.recent_image_count,
            )?,
            image_prune_batch_size: self.uint(
                a,
                &path,
                "imagePruneBatchSize",
                min("imagePruneBatchSize"),
                d.image_prune_batch_size,
            )?,
            max_image_bytes: self.uint(
                a,
                &path,
                "maxImageBytes",
                min("maxImageBytes"),
                d.max_image_bytes,
            )?,
            max_total_image_bytes: self.uint(
                a,
                &path,
                "maxTotalImageBytes",
                min("maxTotalImageBytes"),
                d.max_total_image_bytes,
            )?,
            max_image_count: self.uint(
                a,
                &path,
                "maxImageCount",
                min("maxImageCount"),
                d.max_image_count,
            )?,
            max_image_dimension: self.uint(
                a,
                &path,
                "maxImageDimension",
                min("maxImageDimension"),
                d.max_image_dimension,
            )?,
            provider_limits: d.provider_limits,
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

        let path = root.key("context");
        let c = self.section(entries, &root, "context", CONTEXT_KEYS)?;
        let d = ContextConfig::default();
        let fold_at = self.share(c, &path, "foldAt", d.fold_at)?;
        let compact_at = self.share(c, &path, "compactAt", d.compact_at)?;
        if compact_at < fold_at {
            return Err(self.error(
                self.invalid(),
                &path.key("compactAt"),
                field(c, "compactAt").and_then(|t| t.at),
                format!("must be at least foldAt ({fold_at}): compaction comes after folding"),
            ));
        }
        let context = ContextConfig {
            fold_at,
            fold_at_least: match field(c, "foldAtLeast") {
                Some(_) => Some(self.uint(c, &path, "foldAtLeast", 1, 0u64)?),
                None => None,
            },
            keep: self.uint(c, &path, "keep", 0, d.keep)?,
            never_fold: self.strings(c, &path, "neverFold")?,
            fold_inputs: self.bool(c, &path, "foldInputs", d.fold_inputs)?,
            compact_at,
            compaction_model: self.opt_string(c, &path, "compactionModel")?,
        };

        Ok(Profile {
            context,
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

    pub(super) fn mcp_server(
        &self,
        tree: &Tree,
        path: &Path,
        key_at: At,
    ) -> Result<McpServerDecl, AssemblyError> {
        let entries = self.mapping(tree, path, MCP_SERVER_KEYS)?;
        let command = self.opt_string(entries, path, "command")?;
        let url = self.opt_string(entries, path, "url")?;
        let command = match (command, &url) {
            (Some(command), None) => command,
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    let at = field(entries, "url").map_or(key_at, |t| t.at);
                    return Err(self.error(
                        self.invalid(),
                        &path.key("url"),
                        at,
                        "expected an http:// or https:// URL (the server's Streamable HTTP endpoint)",
                    ));
                }
                String::new()
            }
            (Some(_), Some(_)) => {
                return Err(self.error(
                    self.invalid(),
                    path,
                    key_at,
                    "both `command` and `url`: a server is either started here (`command`) or reached over HTTP (`url`)",
                ));
            }
            (None, None) => {
                return Err(self.error(
                    self.invalid(),
                    path,
                    key_at,
                    "missing key `command` (the program that starts the server, e.g. npx) or `url` (a remote server's endpoint)",
                ));
            }
        };
        let remote = url.is_some();
        let local_only = ["args", "env", "cwd"];
        let remote_only = ["headers", "auth", "transport"];
        let misplaced = if remote {
            &local_only[..]
        } else {
            &remote_only[..]
        };
        // An empty value is as good as none (what `Serialize` writes for the other kind).
        let given = |key: &str| {
            field(entries, key).is_some_and(|t| match &t.node {
                Node::Null => false,
                Node::Seq(items) => !items.is_empty(),
                Node::Map(entries) => !entries.is_empty(),
                _ => true,
            })
        };
        if let Some(key) = misplaced.iter().find(|k| given(k)) {
            let at = field(entries, key).map_or(key_at, |t| t.at);
            let why = if remote {
                "applies to a server started with `command`, not to one reached at `url`"
            } else {
                "applies to a server reached at `url`, not to one started with `command`"
            };
            return Err(self.error(self.invalid(), &path.key(key), at, format!("`{key}` {why}")));
        }

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

        let env = self.string_map(entries, path, "env")?;

        let headers = self.string_map(entries, path, "headers")?;
        let auth = match field(entries, "auth") {
            None => None,
            Some(tree) => {
                let auth_path = path.key("auth");
                Some(self.mcp_auth(tree, &auth_path, url.as_deref().unwrap_or_default())?)
            }
        };

        let transport = self.opt_string(entries, path, "transport")?;
        if let Some(name) = &transport
            && !matches!(name.as_str(), "streamable-http" | "sse")
        {
            let at = field(entries, "transport").map_or(key_at, |t| t.at);
            return Err(self.error(
                self.invalid(),
                &path.key("transport"),
                at,
                format!("expected \"streamable-http\" or \"sse\" (how the server at `url` is reached), found `{name}`"),
            ));
        }
        let protocol = self.opt_string(entries, path, "protocol")?;
        if let Some(name) = &protocol
            && !matches!(name.as_str(), "2025-11-25" | "2026-07-28")
        {
            let at = field(entries, "protocol").map_or(key_at, |t| t.at);
            return Err(self.error(
                self.invalid(),
                &path.key("protocol"),
                at,
                format!("expected \"2025-11-25\" or \"2026-07-28\" (the MCP revision to speak), found `{name}`"),
            ));
        }
        Ok(McpServerDecl {
            command,
            url,
            transport,
            headers,
            auth,
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
            protocol,
        })
    }

    /// `mcp.servers.<name>.auth`: exactly one way to authenticate.
    fn mcp_auth(&self, tree: &Tree, path: &Path, url: &str) -> Result<McpAuthDecl, AssemblyError> {
        let entries = self.mapping(tree, path, MCP_AUTH_KEYS)?;
        let token_env = self.opt_string(entries, path, "tokenEnv")?;
        let oauth = match field(entries, "oauth") {
            None => None,
            Some(tree) => {
                let path = path.key("oauth");
                let entries = match &tree.node {
                    Node::Null => &[][..],
                    _ => self.mapping(tree, &path, MCP_OAUTH_KEYS)?,
                };
                let url = self.opt_string(entries, &path, "clientMetadataUrl")?;
                // An https:// URL with a path: the document's own address, never a site root.
                let has_path = |u: &str| {
                    u.strip_prefix("https://")
                        .and_then(|rest| rest.split_once('/'))
                        .is_some_and(|(host, path)| !host.is_empty() && !path.is_empty())
                };
                if let Some(url) = &url
                    && !has_path(url)
                {
                    let at = field(entries, "clientMetadataUrl").map_or(tree.at, |t| t.at);
                    return Err(self.error(
                        self.invalid(),
                        &path.key("clientMetadataUrl"),
                        at,
                        "expected an https:// URL with a path (the client's metadata document)",
                    ));
                }
                let client_id = self.opt_string(entries, &path, "clientId")?;
                if client_id.is_none() && field(entries, "clientSecretEnv").is_some() {
                    let at = field(entries, "clientSecretEnv").map_or(tree.at, |t| t.at);
                    return Err(self.error(
                        self.invalid(),
                        &path.key("clientSecretEnv"),
                        at,
                        "a client secret needs the `clientId` it was issued with",
                    ));
                }
                Some(McpOAuthDecl {
                    client_id,
                    client_secret_env: self.opt_string(entries, &path, "clientSecretEnv")?,
                    client_metadata_url: url,
                    scopes: self.strings(entries, &path, "scopes")?,
                })
            }
        };
        let client_credentials = match field(entries, "clientCredentials") {
            None => None,
            Some(tree) => {
                let path = path.key("clientCredentials");
                let entries = self.mapping(tree, &path, MCP_CLIENT_CREDENTIALS_KEYS)?;
                let Some(client_id) = self.opt_string(entries, &path, "clientId")? else {
                    return Err(self.error(
                        self.invalid(),
                        &path,
                        tree.at,
                        "missing key `clientId`",
                    ));
                };
                let secret = self.opt_string(entries, &path, "clientSecretEnv")?;
                let key = self.opt_string(entries, &path, "privateKeyEnv")?;
                if secret.is_some() == key.is_some() {
                    return Err(self.error(
                        self.invalid(),
                        &path,
                        tree.at,
                        "expected exactly one of `clientSecretEnv` and `privateKeyEnv` (the \
                         variable holding the client's secret or its private key)",
                    ));
                }
                let algorithm = self.opt_string(entries, &path, "algorithm")?;
                if algorithm.is_some() && key.is_none() {
                    let at = field(entries, "algorithm").map_or(tree.at, |t| t.at);
                    return Err(self.error(
                        self.invalid(),
                        &path.key("algorithm"),
                        at,
                        "`algorithm` says how `privateKeyEnv` signs; a client secret has none",
                    ));
                }
                if let Some(name) = &algorithm
                    && !matches!(name.as_str(), "ES256" | "RS256")
                {
                    let at = field(entries, "algorithm").map_or(tree.at, |t| t.at);
                    return Err(self.error(
                        self.invalid(),
                        &path.key("algorithm"),
                        at,
                        format!("expected ES256 or RS256, found `{name}`"),
                    ));
                }
                Some(McpClientCredentialsDecl {
                    client_id,
                    client_secret_env: secret,
                    private_key_env: key,
                    algorithm,
                    scopes: self.strings(entries, &path, "scopes")?,
                })
            }
        };
        let ways = [
            token_env.is_some(),
            oauth.is_some(),
            client_credentials.is_some(),
        ];
        if ways.iter().filter(|w| **w).count() != 1 {
            return Err(self.error(
                self.invalid(),
                path,
                tree.at,
                "expected exactly one of `tokenEnv` (a bearer token's variable), `oauth` (sign-in \
                 by a person) and `clientCredentials` (a client acting on its own behalf)",
            ));
        }
        // OAuth sends tokens and secrets: never in the clear past this machine.
        // The host as a client reads it: after any `user@`, before the port or path.
        let authority = url
            .strip_prefix("http://")
            .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or_default())
            .unwrap_or_default();
        let host_port = authority.rsplit('@').next().unwrap_or_default();
        let host = if host_port.starts_with('[') {
            host_port.split(']').next().map_or("", |h| &h[1..])
        } else {
            host_port.split(':').next().unwrap_or_default()
        };
        let loopback = matches!(host, "localhost" | "127.0.0.1" | "::1");
        if (oauth.is_some() || client_credentials.is_some())
            && url.starts_with("http://")
            && !loopback
        {
            return Err(self.error(
                self.invalid(),
                path,
                tree.at,
                "OAuth over http:// would send tokens in the clear: use the server's https:// URL \
                 (http:// is for localhost only)",
            ));
        }
        Ok(McpAuthDecl {
            token_env,
            oauth,
            client_credentials,
        })
    }

    /// A mapping of strings (`env`, `headers`) under `key`, empty when absent.
    fn string_map(
        &self,
        entries: Entries<'_>,
        path: &Path,
        key: &str,
    ) -> Result<BTreeMap<String, String>, AssemblyError> {
        let mut map = BTreeMap::new();
        let Some(tree) = field(entries, key) else {
            return Ok(map);
        };
        let map_path = path.key(key);
        for (name, value) in self.named_entries(tree, &map_path)? {
            match &value.node {
                Node::Str(text) => {
                    map.insert(name.name.clone(), text.clone());
                }
                other => {
                    return Err(self.error(
                        self.invalid(),
                        &map_path.key(&name.name),
                        value.at,
                        format!(
                            "expected a string, found {} (quote numbers and booleans)",
                            describe(other)
                        ),
                    ));
                }
            }
        }
        Ok(map)
    }
}
