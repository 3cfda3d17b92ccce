//! `ishiki chat`: a live session in the terminal against a configured model (OpenAI Chat
//! Completions, OpenAI Responses or Anthropic Messages over HTTP), with the real tools and the
//! SQLite store. Each line on standard input is a user message; the model then runs steps until
//! it answers without tool calls. Answers stream: text is printed as it arrives and tool calls
//! as they start; each step prints its token usage (input, cache read, cache write, output) and
//! each turn the session's total, so a user sees whether the prompt cache works. The profile's
//! MCP servers (`mcp.servers`, local or remote) are connected at the start, and a server's
//! changed tool list is listed again before each step.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ishiki_core::{
    ModelsDoc, Profile, Runtime, SystemClock, Usage, WorkerSpawn, WorkspaceScheme, assemble,
};
use ishiki_provider::{HttpConfig, HttpModel, ModelFamily, Protocol, StreamEvent, Thinking};

use crate::pretty::EscapingWriter;
use crate::runner::Exit;

/// Options of `ishiki chat`.
#[derive(Debug, Clone)]
pub struct ChatOptions {
    /// The profile (YAML).
    pub profile: PathBuf,
    /// The models document (YAML); the main model needs `provider`, `baseUrl`, `model`.
    pub models: PathBuf,
    /// Which model answers (default: `main`, or the only model).
    pub main: Option<String>,
    /// The state directory (history, artifacts, assets); the session resumes from it.
    pub state: PathBuf,
    /// The sandbox workspace root (default: `<state>/workspace`).
    pub workspace: Option<PathBuf>,
    /// At most this many model requests per user message.
    pub max_steps: u32,
    /// How codemode workers start.
    pub worker: WorkerSpawn,
    /// Where history lives instead of the state directory: a `postgres://` connection string
    /// (credentials in it or in the `PG*` environment variables).
    pub store: Option<String>,
    /// The conversation kept in `store` (one writer at a time per conversation).
    pub conversation: String,
    /// What to do when another runtime holds the conversation's lease: refuse (the default)
    /// or take it over at once (`--take-over`, for a holder known to be gone). A holder on
    /// this host whose process ended is taken over either way.
    pub when_held: ishiki_postgres::WhenHeld,
    /// Artifacts and assets in object storage (`s3://bucket/prefix`), not the state directory.
    pub objects: Option<String>,
    /// `--semantic-model DIR`: sets the profile's `toolsearch.semantic.model` (TS-7).
    pub semantic_model: Option<PathBuf>,
}

/// Runs a chat session until standard input ends.
pub fn run(
    options: &ChatOptions,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    // Everything chat prints comes from the provider, tools, files or errors about them: no
    // control character reaches the terminal unescaped.
    let mut out = EscapingWriter::new(out);
    let mut err = EscapingWriter::new(err);
    let exit = match run_inner(options, input, &mut out) {
        Ok(()) => Exit::Ok,
        Err((exit, message)) => {
            let _ = writeln!(err, "ishiki: {message}");
            exit
        }
    };
    let _ = out.flush();
    let _ = err.flush();
    exit
}

type Failure = (Exit, String);

fn read(path: &PathBuf) -> Result<String, Failure> {
    std::fs::read_to_string(path).map_err(|e| {
        (
            Exit::Invalid,
            format!("cannot read {}: {e}", path.display()),
        )
    })
}

fn model_for(
    models: &ModelsDoc,
    main: &str,
    state: &std::path::Path,
) -> Result<HttpModel, Failure> {
    let invalid = |m: String| (Exit::Invalid, m);
    let decl = models
        .models
        .get(main)
        .ok_or_else(|| invalid(format!("models.yaml has no model `{main}`")))?;
    let provider = decl.provider.as_deref().ok_or_else(|| {
        invalid(format!(
            "models.{main}.provider is required for a live session (openai, anthropic or openai-responses)"
        ))
    })?;
    let protocol: Protocol = provider
        .parse()
        .map_err(|e: ishiki_provider::ProviderError| {
            invalid(format!("models.{main}.provider: {e}"))
        })?;
    let base_url = decl.base_url.clone().ok_or_else(|| {
        invalid(format!(
            "models.{main}.baseUrl is required for a live session"
        ))
    })?;
    let model = decl.model.clone().ok_or_else(|| {
        invalid(format!(
            "models.{main}.model is required for a live session"
        ))
    })?;
    let mut config = HttpConfig::new(protocol, base_url, model);
    config.api_key_env = decl.api_key_env.clone();
    config.prompt_cache_key = Some(cache_key(state));
    apply_capabilities(&mut config, &decl.capabilities);
    HttpModel::new(config).map_err(|e| invalid(format!("models.{main}: {e}")))
}

/// The model's capability keys over its family's defaults ([`ModelFamily`]): thinking on where
/// the family thinks adaptively (with summaries shown), reasoning summaries for reasoning
/// models, the replay rule and `drop_block` safety net where thinking is bound to its prefix.
fn apply_capabilities(config: &mut HttpConfig, caps: &ishiki_core::profile::ModelCapabilities) {
    let family = ModelFamily::of(config.protocol, &config.model);
    config.max_tokens = caps.max_output_tokens.unwrap_or(family.max_output_tokens);
    config.preserved_thinking = caps.preserved_thinking.unwrap_or(family.preserved_thinking);
    config.drop_invalid_thinking = caps
        .drop_invalid_thinking
        .unwrap_or(config.preserved_thinking && family.known);
    config.system_messages = caps.system_messages.unwrap_or(family.system_messages);
    config.native_compaction = caps.native_compaction.unwrap_or(family.native_compaction);
    config.cache_breakpoints = family.cache_breakpoints;
    let effort = caps.effort.clone();
    config.thinking = match (caps.thinking.as_deref(), caps.thinking_budget) {
        (Some("off"), _) => None,
        (Some("budget"), Some(budget)) => Some(Thinking::Budget(budget)),
        (Some("adaptive"), _) => Some(Thinking::Adaptive {
            effort,
            summarized: true,
        }),
        (_, Some(budget)) if !family.adaptive_thinking => Some(Thinking::Budget(budget)),
        _ if family.adaptive_thinking => Some(Thinking::Adaptive {
            effort,
            summarized: true,
        }),
        _ => None,
    };
    if config.protocol == Protocol::OpenAiResponses
        && (family.reasoning || caps.effort.is_some() || caps.reasoning_summary.is_some())
        && caps.thinking.as_deref() != Some("off")
    {
        let mut reasoning = serde_json::Map::new();
        if let Some(effort) = &caps.effort {
            reasoning.insert("effort".into(), serde_json::json!(effort));
        }
        let summary = caps.reasoning_summary.as_deref().unwrap_or("auto");
        reasoning.insert("summary".into(), serde_json::json!(summary));
        config.reasoning = Some(serde_json::Value::Object(reasoning));
    }
}

/// The history store `--store` names.
async fn history_store(
    url: &str,
    conversation: &str,
    when_held: ishiki_postgres::WhenHeld,
) -> Result<Box<dyn ishiki_core::HistoryStore>, Failure> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err((
            Exit::Invalid,
            "--store takes a postgres:// or postgresql:// url; without it history stays in the state directory".to_owned(),
        ));
    }
    let store = ishiki_postgres::PostgresStore::connect(
        url,
        conversation,
        &ishiki_postgres::PostgresOptions {
            when_held,
            ..ishiki_postgres::PostgresOptions::default()
        },
    )
    .await
    .map_err(|e| (Exit::Failed, format!("--store: {e}")))?;
    Ok(Box::new(store))
}

/// A stable prompt-cache key for the session kept in `state` (a hash of its path: the same
/// state directory, the same key across runs, without saying where it is).
fn cache_key(state: &std::path::Path) -> String {
    use std::hash::Hasher as _;
    let path = std::fs::canonicalize(state).unwrap_or_else(|_| state.to_path_buf());
    let mut hasher = rustc_hash::FxHasher::default();
    hasher.write(path.as_os_str().as_encoded_bytes());
    format!("ishiki-{:016x}", hasher.finish())
}

/// What the context engine did to a request, with its token figures.
fn context_line(report: &ishiki_core::context::ContextReport) -> String {
    let mut parts = Vec::new();
    if !report.folded.is_empty() {
        parts.push(format!(
            "folded {} older results (each reads back by its URL)",
            report.folded.len()
        ));
    }
    if let Some(c) = &report.compacted {
        parts.push(format!(
            "compacted {} messages{} (they read back from {})",
            c.messages,
            if c.native {
                " into the provider's own summary"
            } else if c.summarized {
                " into a summary"
            } else {
                " without a summary"
            },
            c.url
        ));
    }
    let window = report
        .window
        .map(|w| format!(" of a {w}-token window"))
        .unwrap_or_default();
    format!(
        "{}; about {} → {} tokens{window}",
        parts.join(", "),
        report.estimated_before,
        report.estimated_after
    )
}

/// One line of token counts.
fn tokens(usage: &Usage) -> String {
    format!(
        "{} in ({} cache read, {} cache write), {} out",
        usage.input_tokens, usage.cache_read_tokens, usage.cache_write_tokens, usage.output_tokens
    )
}

fn run_inner(
    options: &ChatOptions,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let invalid = |e: ishiki_core::AssemblyError| (Exit::Invalid, e.to_string());
    let mut profile = Profile::from_yaml(&read(&options.profile)?).map_err(invalid)?;
    let profile_dir = options
        .profile
        .parent()
        .unwrap_or(std::path::Path::new("."));
    crate::runner::semantic_profile(&mut profile, options.semantic_model.as_deref(), profile_dir);
    let models = ModelsDoc::from_yaml(&read(&options.models)?).map_err(invalid)?;
    let main = match &options.main {
        Some(m) => m.clone(),
        None if models.models.contains_key("main") => "main".to_owned(),
        None if models.models.len() == 1 => {
            models.models.keys().next().cloned().unwrap_or_default()
        }
        None => {
            return Err((
                Exit::Invalid,
                "several models are declared: name the main one with --main".to_owned(),
            ));
        }
    };
    let model = model_for(&models, &main, &options.state)?;
    // Summaries are written by `context.compactionModel`, else by the main model.
    let compactor = match &profile.context.compaction_model {
        Some(name) if *name != main => Some(model_for(&models, name, &options.state)?),
        _ => None,
    };
    let window = {
        let config = model.config();
        let family = ModelFamily::of(config.protocol, &config.model);
        let caps = models.models.get(&main).map(|d| d.capabilities.clone());
        ishiki_core::context::Window {
            tokens: caps
                .and_then(|c| c.context_window)
                .map_or(u64::from(family.context_window), u64::from),
            output: u64::from(config.max_tokens),
        }
    };
    let assembly = assemble(profile, models, &main).map_err(invalid)?;
    // A model that cannot be loaded ends the session before it starts (TS-7).
    let semantic_model = ishiki_core::load_semantic_model(&assembly.profile).map_err(invalid)?;
    let failed = |e: &dyn std::fmt::Display| (Exit::Failed, e.to_string());
    let workspace = options
        .workspace
        .clone()
        .unwrap_or_else(|| options.state.join("workspace"));
    std::fs::create_dir_all(&workspace).map_err(|e| failed(&e))?;
    WorkspaceScheme::new(&workspace).map_err(|e| failed(&e))?;
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(&e))?;
    // A model that binds thinking to its prefix gets its edits at user turns (ishiki_core::edits).
    let binds = model.config().protocol == Protocol::Anthropic && model.config().preserved_thinking;
    let policy = if binds {
        ishiki_core::EditPolicy::AtUserTurns
    } else {
        ishiki_core::EditPolicy::Immediate
    };
    // The profile's MCP servers (local and remote) start once for the session; one that does
    // not start is reported and the session goes on without it.
    // OAuth credentials outlive the session in the state directory, which no scheme the model
    // reads reaches (it is refused inside the workspace).
    let token_dir = options.state.join("mcp-tokens");
    let configs: Vec<_> = ishiki_mcp::McpServerConfig::from_profile(&assembly.profile)
        .into_iter()
        .map(|c| c.token_dir(&token_dir))
        .collect();
    let authorizer = tokio.block_on(sign_in(&configs)).map_err(|e| failed(&e))?;
    let (servers, errors) =
        tokio.block_on(ishiki_mcp::start_all_authorized(&configs, None, authorizer));
    for error in &errors {
        writeln!(out, "[mcp] {error}").map_err(|e| failed(&e))?;
    }
    let mut builder = Runtime::builder(assembly, &options.state)
        .workspace_root(&workspace)
        .edit_policy(policy)
        .window(window);
    if let Some(model) = semantic_model {
        builder = builder.semantic_model(model);
    }
    for server in &servers {
        let (tools, left_out) = ishiki_mcp::server_tools_checked(server, ishiki_core::check_tool);
        for error in &left_out {
            writeln!(out, "[mcp] {error}").map_err(|e| failed(&e))?;
        }
        builder = tools.into_iter().fold(builder, |b, t| b.tool(t));
    }
    if let Some(url) = &options.store {
        // The socket directories are checked against the roots with the state directory.
        if let Ok(config) = ishiki_postgres::config_from(url, &|name| std::env::var(name).ok()) {
            for dir in ishiki_postgres::socket_dirs(&config) {
                builder = builder.store_location("the postgres socket directory", dir);
            }
        }
        builder.check_store_locations().map_err(|e| failed(&e))?;
        // The store's connections run on this runtime, which drives every step.
        builder = builder.store(tokio.block_on(history_store(
            url,
            &options.conversation,
            options.when_held,
        ))?);
    }
    if let Some(location) = &options.objects {
        let objects = ishiki_objects::Objects::open(location)
            .map_err(|e| (Exit::Invalid, format!("--objects: {e}")))?;
        if let Some(dir) = objects.local_dir() {
            builder = builder.store_location("the object store (--objects)", dir);
        }
        builder = builder
            .artifacts(Arc::new(objects.artifacts()))
            .assets(Arc::new(objects.assets()));
    }
    let runtime = builder
        .clock(Arc::new(SystemClock))
        .codemode_worker(options.worker.clone())
        .codemode_limits(ishiki_core::Limits {
            timeout: Duration::from_secs(30),
            ..ishiki_core::Limits::default()
        })
        .build();
    let mut runtime = tokio.block_on(runtime).map_err(|e| failed(&e))?;
    let mut line = String::new();
    let mut turn = 0u64;
    let mut session = Usage::default();
    loop {
        line.clear();
        let n = input.read_line(&mut line).map_err(|e| failed(&e))?;
        if n == 0 {
            return Ok(());
        }
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        turn += 1;
        let mut id = format!("u{turn}");
        while runtime.has_message(&id) {
            turn += 1;
            id = format!("u{turn}");
        }
        tokio
            .block_on(runtime.add_user_message(&id, text, &[]))
            .map_err(|e| failed(&e))?;
        tokio.block_on(turn_loop(
            &mut runtime,
            &servers,
            &model,
            compactor.as_ref().unwrap_or(&model),
            options.max_steps,
            &mut session,
            out,
        ))?;
        writeln!(out, "[session] tokens: {}", tokens(&session)).map_err(|e| failed(&e))?;
    }
}

/// Steps until the model answers without calls (or calls `finish`/`wait`).
async fn turn_loop(
    runtime: &mut Runtime,
    servers: &[Arc<ishiki_mcp::McpServer>],
    model: &HttpModel,
    compactor: &HttpModel,
    max_steps: u32,
    session: &mut Usage,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let failed = |e: &dyn std::fmt::Display| (Exit::Failed, e.to_string());
    let io = |e: std::io::Error| (Exit::Failed, e.to_string());
    // A request the model refuses as too long is folded and compacted, then tried once more.
    let mut retried = false;
    let mut steps = 0;
    while steps < max_steps {
        // A server that said its tool list changed is listed again: new tools join the pool
        // (the next catalog delta announces them), removed ones are withdrawn.
        for error in ishiki_mcp::apply_tool_changes(servers, runtime).await {
            writeln!(out, "[mcp] {error}").map_err(io)?;
        }
        let mut prepared = runtime.prepare().await.map_err(|e| failed(&e))?;
        let step = prepared.step;
        if let Some(compaction) = &prepared.compaction {
            writeln!(
                out,
                "[step {step}] context: compacting the {} oldest messages",
                compaction.replaces()
            )
            .map_err(io)?;
            // The main model compacts natively when it can and no other model is named for it.
            let mut native = None;
            if std::ptr::eq(compactor, model)
                && let Some(request) = compaction.native_request()
            {
                match model.compact_request(request).await {
                    Ok(block) => native = block,
                    Err(reason) => writeln!(
                        out,
                        "[step {step}] context: the provider's compaction failed ({reason}); asking for a summary instead"
                    )
                    .map_err(io)?,
                }
            }
            prepared = match native {
                Some(block) => runtime
                    .compact_natively(prepared, block)
                    .await
                    .map_err(|e| failed(&e))?,
                None => {
                    let summary = compactor
                        .send(&compaction.request)
                        .await
                        .map_err(|e| e.to_string())
                        .map(|parsed| parsed.response.text().unwrap_or_default());
                    if let Err(reason) = &summary {
                        writeln!(
                            out,
                            "[step {step}] context: the summary request failed ({reason}); the messages are replaced by a note saying where they read back"
                        )
                        .map_err(io)?;
                    }
                    runtime
                        .compact(prepared, summary)
                        .await
                        .map_err(|e| failed(&e))?
                }
            };
        }
        if prepared.context.changed() {
            writeln!(
                out,
                "[step {step}] context: {}",
                context_line(&prepared.context)
            )
            .map_err(io)?;
        }
        // Whether the text streamed so far ends without a line break.
        let mut open_line = false;
        let mut streamed = false;
        let sent = model
            .send_with(&prepared.request, |event| {
                // A terminal that cannot be written to loses the live view only; the step
                // itself goes on and its result is printed below.
                let _ = show(&mut *out, step, event, &mut open_line, &mut streamed);
            })
            .await;
        if open_line {
            writeln!(out).map_err(io)?;
        }
        let parsed = match sent {
            Ok(parsed) => parsed,
            Err(reason)
                if reason.kind() == ishiki_provider::ProviderErrorKind::ContextTooLong
                    && !retried =>
            {
                runtime.abandon_too_long(prepared);
                retried = true;
                writeln!(
                    out,
                    "[step {step}] the request was too long for the model ({reason}); folding and compacting, then trying once more"
                )
                .map_err(io)?;
                continue;
            }
            Err(reason) => {
                // A provider 400 about an image turns that request's images terminal.
                runtime.abandon_failed(prepared, &reason.to_string());
                writeln!(out, "[step {step}] the model request failed: {reason}").map_err(io)?;
                return Ok(());
            }
        };
        let response = parsed.response;
        if !streamed && let Some(text) = response.text().filter(|t| !t.trim().is_empty()) {
            writeln!(out, "assistant: {text}").map_err(io)?;
        }
        let replay = parsed.replay;
        if let Some(first) = replay.first_dropped {
            writeln!(
                out,
                "[step {step}] {} reasoning blocks from message {} on left out: their earlier context changed since they were made",
                replay.dropped_changed,
                first + 1
            )
            .map_err(io)?;
        }
        if !response.input_transformations.is_empty() {
            writeln!(
                out,
                "[step {step}] the provider dropped {} thinking blocks it could not use",
                response.input_transformations.len()
            )
            .map_err(io)?;
        }
        if let Some(usage) = response.usage {
            *session = session.plus(usage);
            writeln!(out, "[step {step}] tokens: {}", tokens(&usage)).map_err(io)?;
        }
        let calls = runtime
            .commit(prepared, response)
            .await
            .map_err(|e| failed(&e))?;
        steps += 1;
        retried = false;
        if calls.is_empty() {
            return Ok(());
        }
        for call in &calls {
            writeln!(out, "[step {step}] → {} {}", call.name, call.input).map_err(io)?;
        }
        let reports = runtime.execute().await.map_err(|e| failed(&e))?;
        let mut stop = false;
        for report in &reports {
            let mark = if report.is_error { "✗" } else { "←" };
            let mut shown: Vec<&str> = report.text.lines().take(12).collect();
            let more = report.text.lines().count().saturating_sub(shown.len());
            let tail = format!("… {more} more lines");
            if more > 0 {
                shown.push(&tail);
            }
            writeln!(
                out,
                "[step {step}] {mark} {}: {}",
                report.name,
                shown.join("\n    ")
            )
            .map_err(io)?;
            for a in &report.attachments {
                writeln!(
                    out,
                    "    [attachment {} {} {} bytes, {}]",
                    a.url, a.media_type, a.bytes, a.lifetime
                )
                .map_err(io)?;
            }
            stop |= matches!(report.name.as_str(), "finish" | "wait");
        }
        if stop {
            return Ok(());
        }
    }
    writeln!(
        out,
        "[stopped after {max_steps} steps without a final answer]"
    )
    .map_err(io)?;
    Ok(())
}

/// Prints one stream event as it arrives.
fn show(
    out: &mut dyn Write,
    step: u64,
    event: StreamEvent,
    open_line: &mut bool,
    streamed: &mut bool,
) -> std::io::Result<()> {
    let mut end_line = |out: &mut dyn Write| -> std::io::Result<()> {
        if std::mem::take(open_line) {
            writeln!(out)?;
        }
        Ok(())
    };
    match event {
        StreamEvent::Text(text) => {
            if !*streamed {
                end_line(out)?;
                write!(out, "assistant: ")?;
                *streamed = true;
            }
            write!(out, "{text}")?;
            *open_line = !text.ends_with('\n');
        }
        StreamEvent::Reasoning(text) => {
            if !*open_line {
                write!(out, "thinking: ")?;
            }
            write!(out, "{text}")?;
            *open_line = !text.ends_with('\n');
        }
        StreamEvent::ToolCall { name, .. } => {
            end_line(out)?;
            writeln!(out, "[step {step}] calling {name}…")?;
        }
        StreamEvent::Retry { reason } => {
            end_line(out)?;
            *streamed = false;
            writeln!(
                out,
                "[step {step}] the stream broke ({reason}); asking again"
            )?;
        }
        _ => {}
    }
    out.flush()
}

/// Who approves the OAuth sign-ins of the profile's servers (`auth: { oauth: … }`): the
/// person at this terminal. Standard error shows the URL to open; the browser comes back to
/// `http://127.0.0.1:<port>/callback`, where this process listens while a sign-in waits.
/// `None` when no server signs in that way (no port is opened).
async fn sign_in(
    configs: &[ishiki_mcp::McpServerConfig],
) -> std::io::Result<Option<Arc<dyn ishiki_mcp::Authorizer>>> {
    let needed = configs.iter().any(|c| {
        matches!(
            c.oauth,
            Some(ishiki_mcp::OAuthConfig::AuthorizationCode { .. })
        )
    });
    if !needed {
        return Ok(None);
    }
    let show: ishiki_mcp::ShowUrl = Arc::new(|server: &str, url: &str| {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "[mcp] sign in to `{server}` in your browser: {url}\n[mcp] waiting for the sign-in…"
        );
    });
    let authorizer = ishiki_mcp::LoopbackAuthorizer::bind(show).await?;
    Ok(Some(Arc::new(authorizer)))
}
