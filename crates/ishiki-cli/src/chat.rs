//! `ishiki chat`: a live session in the terminal against a configured model (OpenAI- or
//! Anthropic-style HTTP API), with the real tools and the SQLite store. Each line on standard
//! input is a user message; the model then runs steps until it answers without tool calls.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ishiki_core::{
    Model, ModelsDoc, Profile, Runtime, SystemClock, WorkerSpawn, WorkspaceScheme, assemble,
};
use ishiki_provider::{HttpConfig, HttpModel, Protocol};

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
    /// Artifacts and assets in object storage (`s3://bucket/prefix`), not the state directory.
    pub objects: Option<String>,
}

/// Runs a chat session until standard input ends.
pub fn run(
    options: &ChatOptions,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Exit {
    match run_inner(options, input, out) {
        Ok(()) => Exit::Ok,
        Err((exit, message)) => {
            let _ = writeln!(err, "ishiki: {message}");
            exit
        }
    }
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

fn model_for(models: &ModelsDoc, main: &str) -> Result<HttpModel, Failure> {
    let invalid = |m: String| (Exit::Invalid, m);
    let decl = models
        .models
        .get(main)
        .ok_or_else(|| invalid(format!("models.yaml has no model `{main}`")))?;
    let provider = decl.provider.as_deref().ok_or_else(|| {
        invalid(format!(
            "models.{main}.provider is required for a live session (openai or anthropic)"
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
    HttpModel::new(config).map_err(|e| invalid(format!("models.{main}: {e}")))
}

fn run_inner(
    options: &ChatOptions,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let invalid = |e: ishiki_core::AssemblyError| (Exit::Invalid, e.to_string());
    let profile = Profile::from_yaml(&read(&options.profile)?).map_err(invalid)?;
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
    let model = model_for(&models, &main)?;
    let assembly = assemble(profile, models, &main).map_err(invalid)?;
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
    let mut builder = Runtime::builder(assembly, &options.state);
    if let Some(location) = &options.objects {
        let objects = ishiki_objects::Objects::open(location)
            .map_err(|e| (Exit::Invalid, format!("--objects: {e}")))?;
        builder = builder
            .artifacts(Arc::new(objects.artifacts()))
            .assets(Arc::new(objects.assets()));
    }
    let mut runtime = builder
        .workspace_root(&workspace)
        .clock(Arc::new(SystemClock))
        .codemode_worker(options.worker.clone())
        .codemode_limits(ishiki_core::Limits {
            timeout: Duration::from_secs(30),
            ..ishiki_core::Limits::default()
        })
        .build()
        .map_err(|e| failed(&e))?;
    let mut line = String::new();
    let mut turn = 0u64;
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
        runtime
            .add_user_message(&id, text, &[])
            .map_err(|e| failed(&e))?;
        tokio.block_on(turn_loop(&mut runtime, &model, options.max_steps, out))?;
    }
}

/// Steps until the model answers without calls (or calls `finish`/`wait`).
async fn turn_loop(
    runtime: &mut Runtime,
    model: &HttpModel,
    max_steps: u32,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let failed = |e: &dyn std::fmt::Display| (Exit::Failed, e.to_string());
    let io = |e: std::io::Error| (Exit::Failed, e.to_string());
    for _ in 0..max_steps {
        let prepared = runtime.prepare().map_err(|e| failed(&e))?;
        let step = prepared.step;
        let response = match model.respond(&prepared.request).await {
            Ok(r) => r,
            Err(reason) => {
                runtime.abandon(prepared);
                writeln!(out, "[step {step}] the model request failed: {reason}").map_err(io)?;
                return Ok(());
            }
        };
        if let Some(text) = response.text.as_deref().filter(|t| !t.trim().is_empty()) {
            writeln!(out, "assistant: {text}").map_err(io)?;
        }
        let calls = runtime.commit(prepared, response).map_err(|e| failed(&e))?;
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
