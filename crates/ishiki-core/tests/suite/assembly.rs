//! Profile and models assembly (requirements §1, PRO-1..PRO-8, SEC-3).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ishiki_core::profile::{MAX_IMAGE_RENDERS_REMOVED, Modality, ModelDecl, ToolCalling};
use ishiki_core::{
    AssemblyError, AssemblyErrorKind, AttachmentConfig, ModelsDoc, Profile, assemble,
};
use proptest::prelude::*;
use serde_json::{Value, json};

use super::with_snapshots;

const MODELS: &str = "\
models:
  main: { input: [text, image], toolCalling: native }
  text-only: { input: [text], toolCalling: text }
  listener: { input: [text, audio] }
  vision-main: { input: [text, image] }
  vision-backup: { input: [text, image, video] }
  image-only: { input: [image] }
groups:
  vision-pool: [vision-main, vision-backup]
  mixed-pool: [vision-main, text-only, image-only]
";

fn models() -> ModelsDoc {
    ModelsDoc::from_yaml(MODELS).expect("the shared models file is valid")
}

fn profile(yaml: &str) -> Profile {
    Profile::from_yaml(yaml).expect("a valid profile")
}

#[test]
fn pro1_every_section_is_optional_with_defaults() {
    let default = Profile::default();
    assert_eq!(profile(""), default);
    assert_eq!(profile("# nothing but a comment\n"), default);
    assert_eq!(profile("{}"), default);
    assert_eq!(
        profile("codemode:\ntoolsearch:\nattachment:\nassets:\n"),
        default
    );
    assert_eq!(Profile::from_value(&json!({})).unwrap(), default);
    assert_eq!(Profile::from_value(&Value::Null).unwrap(), default);
    assert!(!default.codemode.enable);
    assert!(!default.toolsearch.enable);

    let on = profile("codemode: { enable: true }\ntoolsearch: { enable: true }\n");
    assert!(on.codemode.enable && on.toolsearch.enable);
}

#[test]
fn pro2_attachment_defaults_and_keys() {
    let d = Profile::default().attachment;
    assert_eq!(
        d,
        AttachmentConfig {
            image_input: true,
            message_image_input: true,
            vision_model: None,
            recent_image_count: 3,
            image_prune_batch_size: 2,
            max_image_bytes: 5_242_880,
            max_total_image_bytes: 10_485_760,
            max_image_count: 4,
            max_image_dimension: 1568,
            provider_limits: ishiki_core::profile::ImageLimits::default(),
        }
    );

    // The example of seed 004, verbatim (comments included).
    let seed = "\
attachment:
  imageInput: true           # 本 profile 的能力上限开关
  messageImageInput: false    # 平台消息图片是否自动进入主模型上下文
  visionModel: vision-main    # read(...?question=...) 使用的模型或模型组
  recentImageCount: 3        # recent 生命周期的目标保留数，默认 3
  imagePruneBatchSize: 2     # 每次成批移除最旧的已查看图片数，默认 2
  maxImageBytes: 5242880     # 单图上限，默认 5 MiB
  maxTotalImageBytes: 10485760   # 整次请求所有图累计，默认 10 MiB
  maxImageCount: 4           # 单次请求图片张数上限，默认 4
  maxImageDimension: 1568    # 单边像素上限，默认 1568
assets:
  autoDownloadMaxBytes: 20971520 # 入站自动下载上限，默认 20 MiB；0 关闭
  cleanup:
    enabled: true            # 定期清理过期 asset，默认关闭
    retentionDays: 30        # 创建后保留天数，默认 30
    intervalMinutes: 60      # 清理间隔，默认 60
";
    let p = profile(seed);
    assert!(!p.attachment.message_image_input);
    assert_eq!(p.attachment.vision_model.as_deref(), Some("vision-main"));
    assert!(p.assets.cleanup.enabled);

    let custom = profile(
        "attachment: { recentImageCount: 0, imagePruneBatchSize: 5, maxImageBytes: 1, \
         maxTotalImageBytes: 2, maxImageCount: 10, maxImageDimension: 4096, imageInput: false }",
    );
    assert_eq!(custom.attachment.recent_image_count, 0);
    assert_eq!(custom.attachment.image_prune_batch_size, 5);
    assert_eq!(custom.attachment.max_image_bytes, 1);
    assert_eq!(custom.attachment.max_total_image_bytes, 2);
    assert_eq!(custom.attachment.max_image_count, 10);
    assert_eq!(custom.attachment.max_image_dimension, 4096);
    assert!(!custom.attachment.image_input);
}

#[test]
fn pro3_assets_defaults_and_zero_disables_download() {
    let d = Profile::default().assets;
    assert_eq!(d.auto_download_max_bytes, 20_971_520);
    assert!(!d.cleanup.enabled);
    assert_eq!(d.cleanup.retention_days, 30);
    assert_eq!(d.cleanup.interval_minutes, 60);

    let p = profile("assets: { autoDownloadMaxBytes: 0, cleanup: { retentionDays: 7 } }");
    assert_eq!(p.assets.auto_download_max_bytes, 0);
    assert_eq!(p.assets.cleanup.retention_days, 7);
    assert_eq!(p.assets.cleanup.interval_minutes, 60);
}

#[test]
fn pro4_models_declare_input_tool_calling_and_groups() {
    let doc = models();
    assert_eq!(
        doc.models["main"].input,
        vec![Modality::Text, Modality::Image]
    );
    assert_eq!(doc.models["main"].tool_calling, ToolCalling::Native);
    assert_eq!(doc.models["text-only"].tool_calling, ToolCalling::Text);
    // toolCalling defaults to native.
    assert_eq!(doc.models["vision-main"].tool_calling, ToolCalling::Native);
    assert_eq!(
        doc.groups["vision-pool"],
        vec!["vision-main".to_owned(), "vision-backup".to_owned()]
    );

    // Keys a later issue uses are accepted now.
    let later = ModelsDoc::from_yaml(
        "models:\n  gpt:\n    input: [text, image, file]\n    provider: openai\n    \
         baseUrl: https://api.example.invalid/v1\n    model: gpt-4.1\n    apiKeyEnv: OPENAI_API_KEY\n",
    )
    .unwrap();
    let gpt = &later.models["gpt"];
    assert_eq!(gpt.provider.as_deref(), Some("openai"));
    assert_eq!(
        gpt.base_url.as_deref(),
        Some("https://api.example.invalid/v1")
    );
    assert_eq!(gpt.model.as_deref(), Some("gpt-4.1"));
    assert_eq!(gpt.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert!(gpt.accepts(Modality::File));

    // The scenario file's shape (docs/scenario-format.md): models embedded as JSON.
    let embedded = ModelsDoc::from_value(&json!({
        "models": {
            "main": { "input": ["text", "image"], "toolCalling": "native" },
            "vision-main": { "input": ["text", "image"] }
        },
        "groups": { "vision-pool": ["vision-main"] }
    }))
    .unwrap();
    assert_eq!(
        embedded.groups["vision-pool"],
        vec!["vision-main".to_owned()]
    );
}

#[test]
fn pro5_vision_model_must_declare_text_and_image() {
    // A model, and a group whose candidates all qualify.
    for (name, candidates) in [
        ("vision-main", vec!["vision-main"]),
        ("vision-pool", vec!["vision-main", "vision-backup"]),
    ] {
        let p = profile(&format!("attachment: {{ visionModel: {name} }}"));
        let assembly = assemble(p, models(), "text-only").unwrap();
        let vision = assembly.vision.unwrap();
        assert_eq!(vision.name, name);
        assert_eq!(vision.candidates, candidates);
    }

    // A model without image, one without text, and a group with any such candidate.
    for name in ["text-only", "image-only", "listener", "mixed-pool"] {
        let p = profile(&format!("attachment: {{ visionModel: {name} }}"));
        let error = assemble(p, models(), "main").unwrap_err();
        assert_eq!(error.code(), "vision_model_unsupported", "{name}: {error}");
        assert_eq!(error.kind(), AssemblyErrorKind::VisionModelUnsupported);
        assert_eq!(error.path(), Some("attachment.visionModel"));
    }

    // Unknown names are assembly errors too.
    let p = profile("attachment: { visionModel: nobody }");
    assert_eq!(
        assemble(p, models(), "main").unwrap_err().code(),
        "unknown_model"
    );
    assert_eq!(
        assemble(Profile::default(), models(), "nobody")
            .unwrap_err()
            .code(),
        "unknown_model"
    );
    assert_eq!(
        ModelsDoc::from_yaml("models:\n  a: { input: [text] }\ngroups:\n  g: [a, b]\n")
            .unwrap_err()
            .code(),
        "unknown_model"
    );
}

#[test]
fn pro5_vision_works_without_image_input() {
    // VIS-3: the side-model is independent of the main model's image input.
    let p = profile("attachment: { imageInput: false, visionModel: vision-pool }");
    let assembly = assemble(p, models(), "main").unwrap();
    assert!(!assembly.image_input);
    assert!(assembly.vision.is_some());
}

#[test]
fn pro6_max_image_renders_fails_with_the_exact_message() {
    let exact = "attachment.maxImageRenders was removed; use image lifetimes (once, recent, retain) and attachment.recentImageCount/imagePruneBatchSize";
    assert_eq!(MAX_IMAGE_RENDERS_REMOVED, exact);

    let cases = [
        "attachment:\n  maxImageRenders: 3\n",
        "attachment:\n  imageInput: true\n  maxImageRenders: 3\n",
        // Before the generic checks: an unknown key elsewhere, a bad value beside it.
        "bogus: 1\nattachment: { maxImageCount: 0, alsoBogus: 2, maxImageRenders: 1 }\n",
        "attachment:\n  maxImageRenders:\n",
    ];
    for yaml in cases {
        let error = Profile::from_yaml(yaml).unwrap_err();
        assert_eq!(error.message(), exact, "{yaml}");
        assert_eq!(error.to_string(), exact);
        assert_eq!(error.code(), "removed_key");
        assert_eq!(error.path(), Some("attachment.maxImageRenders"));
        assert!(error.location().is_some());
    }

    let error =
        Profile::from_value(&json!({ "nope": true, "attachment": { "maxImageRenders": 2 } }))
            .unwrap_err();
    assert_eq!(error.message(), exact);
    assert_eq!(error.code(), "removed_key");
    assert_eq!(error.location(), None);

    // Only under `attachment`.
    let elsewhere = Profile::from_yaml("codemode: { maxImageRenders: 2 }").unwrap_err();
    assert_eq!(elsewhere.code(), "invalid_profile");
}

#[test]
fn pro7_errors_name_the_key_path_line_and_column() {
    let error =
        Profile::from_yaml("codemode:\n  enable: true\nattachment:\n  image_input: false\n")
            .unwrap_err();
    assert_eq!(error.code(), "invalid_profile");
    assert_eq!(error.path(), Some("attachment.image_input"));
    assert_eq!(error.location(), Some((4, 3)));
    assert_eq!(
        error.message(),
        "attachment.image_input: unknown key (did you mean `imageInput`?) (line 4, column 3)"
    );
    assert_eq!(
        error.snippet(),
        Some(
            " --> profile:4:3\n  |\n2 |   enable: true\n3 | attachment:\n4 |   image_input: false\n  |   ^"
        )
    );

    // Values point at the value.
    let error = Profile::from_yaml("assets:\n  cleanup:\n    intervalMinutes: 0\n").unwrap_err();
    assert_eq!(error.path(), Some("assets.cleanup.intervalMinutes"));
    assert_eq!(error.location(), Some((3, 22)));

    // Embedded documents have paths but no locations.
    let error =
        Profile::from_value(&json!({ "attachment": { "maxImageCount": "4" } })).unwrap_err();
    assert_eq!(error.path(), Some("attachment.maxImageCount"));
    assert_eq!(error.location(), None);
    assert_eq!(
        error.message(),
        "attachment.maxImageCount: expected a whole number, found the string \"4\""
    );

    // An empty `mcp` section is the default (issue 9).
    assert_eq!(profile("mcp: {}"), Profile::default());
}

#[test]
fn pro1_mcp_servers_take_defaults() {
    let p = profile(
        "mcp:\n  servers:\n    everything:\n      command: node\n      args: [server.js, stdio]\n    \
         fs:\n      command: npx\n      env: { DEBUG: \"1\" }\n      cwd: /tmp\n      resident: true\n      \
         timeoutMs: 500\n",
    );
    let everything = &p.mcp.servers["everything"];
    assert_eq!(everything.command, "node");
    assert_eq!(everything.args, ["server.js", "stdio"]);
    assert!(everything.env.is_empty() && everything.cwd.is_none() && !everything.resident);
    assert_eq!(everything.timeout_ms, 30_000);
    let fs = &p.mcp.servers["fs"];
    assert_eq!(fs.env.get("DEBUG").map(String::as_str), Some("1"));
    assert_eq!(fs.cwd.as_deref(), Some("/tmp"));
    assert!(fs.resident);
    assert_eq!(fs.timeout_ms, 500);
    // What `Serialize` writes, `from_value` reads back; an empty section is not written.
    let value = serde_json::to_value(&p).unwrap();
    assert_eq!(Profile::from_value(&value).unwrap(), p);
    let default = serde_json::to_value(Profile::default()).unwrap();
    assert!(default.get("mcp").is_none());
}

#[test]
fn pro1_a_remote_mcp_server_is_declared_by_url_with_headers_and_auth() {
    let p = profile(
        "mcp:\n  servers:\n    remote:\n      url: https://example.com/mcp\n      \
         headers: { X-Team: \"${TEAM}\" }\n      auth: { tokenEnv: REMOTE_TOKEN }\n",
    );
    let remote = &p.mcp.servers["remote"];
    assert_eq!(remote.url.as_deref(), Some("https://example.com/mcp"));
    assert!(remote.command.is_empty() && remote.args.is_empty());
    assert_eq!(
        remote.headers.get("X-Team").map(String::as_str),
        Some("${TEAM}")
    );
    assert_eq!(
        remote.auth.as_ref().and_then(|a| a.token_env.as_deref()),
        Some("REMOTE_TOKEN")
    );
    let value = serde_json::to_value(&p).unwrap();
    assert_eq!(Profile::from_value(&value).unwrap(), p);
}

#[test]
fn pro1_a_remote_mcp_server_may_name_the_older_sse_transport() {
    let p = profile(
        "mcp:\n  servers:\n    legacy:\n      url: https://example.com/sse\n      transport: sse\n",
    );
    assert_eq!(p.mcp.servers["legacy"].transport.as_deref(), Some("sse"));
    let value = serde_json::to_value(&p).unwrap();
    assert_eq!(value["mcp"]["servers"]["legacy"]["transport"], "sse");
    assert_eq!(Profile::from_value(&value).unwrap(), p);
    // Left out, it is not written.
    let plain = profile("mcp:\n  servers:\n    remote: { url: https://example.com/mcp }\n");
    let value = serde_json::to_value(&plain).unwrap();
    assert!(value["mcp"]["servers"]["remote"].get("transport").is_none());
}

#[test]
fn pro1_a_remote_mcp_server_may_sign_in_with_oauth_or_client_credentials() {
    let p = profile(
        "mcp:\n  servers:\n    linear:\n      url: https://mcp.example.com/mcp\n      \
         auth:\n        oauth:\n          clientId: ishiki\n          clientSecretEnv: LINEAR_SECRET\n          \
         clientMetadataUrl: https://example.com/client.json\n          scopes: [read, write]\n    \
         bare:\n      url: http://127.0.0.1:8080/mcp\n      auth: { oauth: {} }\n    \
         robot:\n      url: https://r.example.com/mcp\n      \
         auth: { clientCredentials: { clientId: bot, privateKeyEnv: BOT_KEY, algorithm: RS256 } }\n",
    );
    let oauth = p.mcp.servers["linear"]
        .auth
        .as_ref()
        .and_then(|a| a.oauth.clone());
    let oauth = oauth.expect("an oauth declaration");
    assert_eq!(oauth.client_id.as_deref(), Some("ishiki"));
    assert_eq!(oauth.client_secret_env.as_deref(), Some("LINEAR_SECRET"));
    assert_eq!(
        oauth.client_metadata_url.as_deref(),
        Some("https://example.com/client.json")
    );
    assert_eq!(oauth.scopes, ["read", "write"]);
    let bare = p.mcp.servers["bare"].auth.as_ref().unwrap();
    assert_eq!(bare.oauth.as_ref(), Some(&Default::default()));
    assert!(bare.token_env.is_none() && bare.client_credentials.is_none());
    let robot = p.mcp.servers["robot"].auth.as_ref().unwrap();
    let cc = robot
        .client_credentials
        .as_ref()
        .expect("client credentials");
    assert_eq!(cc.client_id, "bot");
    assert_eq!(cc.private_key_env.as_deref(), Some("BOT_KEY"));
    assert_eq!(cc.algorithm.as_deref(), Some("RS256"));
    let value = serde_json::to_value(&p).unwrap();
    assert_eq!(Profile::from_value(&value).unwrap(), p);
}

#[test]
fn pro7_serde_embedding_applies_the_same_checks() {
    #[derive(serde::Deserialize)]
    struct Scenario {
        profile: Profile,
        models: ModelsDoc,
    }
    let ok: Scenario = serde_json::from_value(json!({
        "profile": { "codemode": { "enable": true } },
        "models": { "models": { "main": { "input": ["text"] } } }
    }))
    .unwrap();
    assert!(ok.profile.codemode.enable);
    assert_eq!(ok.models.models.len(), 1);

    let bad = serde_json::from_value::<Scenario>(json!({
        "profile": { "attachment": { "maxImageRenders": 1 } },
        "models": {}
    }));
    let message = bad.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains(MAX_IMAGE_RENDERS_REMOVED), "{message}");
}

#[test]
fn pro8_effective_image_input_needs_profile_and_model() {
    for (image_input, main, expected) in [
        (true, "main", true),
        (false, "main", false),
        (true, "text-only", false),
        (false, "text-only", false),
    ] {
        let p = profile(&format!("attachment: {{ imageInput: {image_input} }}"));
        let assembly = assemble(p, models(), main).unwrap();
        assert_eq!(assembly.image_input, expected, "{image_input} {main}");
        assert_eq!(assembly.main_model, main);
    }
    let listener = assemble(Profile::default(), models(), "listener").unwrap();
    assert!(listener.audio_input);
    assert!(!listener.image_input);
    assert_eq!(listener.main.input, vec![Modality::Text, Modality::Audio]);
}

#[test]
fn pro5_assemble_checks_models_built_in_code() {
    let mut doc = ModelsDoc::default();
    doc.models
        .insert("main".into(), ModelDecl::new([Modality::Text]));
    doc.groups.insert("pool".into(), vec!["ghost".into()]);
    let error = assemble(Profile::default(), doc, "main").unwrap_err();
    assert_eq!(error.code(), "unknown_model");
    assert_eq!(error.path(), Some("groups.pool[0]"));
}

enum Input {
    ProfileYaml(&'static str),
    ProfileJson(Value),
    ModelsYaml(&'static str),
    ModelsJson(Value),
    Assemble {
        profile: &'static str,
        models: &'static str,
        main: &'static str,
    },
    AssembleDoc {
        models: ModelsDoc,
        main: &'static str,
    },
}

fn run(input: &Input) -> Result<(), AssemblyError> {
    match input {
        Input::ProfileYaml(text) => Profile::from_yaml(text).map(drop),
        Input::ProfileJson(value) => Profile::from_value(value).map(drop),
        Input::ModelsYaml(text) => ModelsDoc::from_yaml(text).map(drop),
        Input::ModelsJson(value) => ModelsDoc::from_value(value).map(drop),
        Input::Assemble {
            profile,
            models,
            main,
        } => assemble(
            Profile::from_yaml(profile)?,
            ModelsDoc::from_yaml(models)?,
            main,
        )
        .map(drop),
        Input::AssembleDoc { models, main } => {
            assemble(Profile::default(), models.clone(), main).map(drop)
        }
    }
}

fn describe(input: &Input) -> String {
    match input {
        Input::ProfileYaml(text) => format!("profile yaml:\n{}", indent(text)),
        Input::ProfileJson(value) => format!("profile json: {value}"),
        Input::ModelsYaml(text) => format!("models yaml:\n{}", indent(text)),
        Input::ModelsJson(value) => format!("models json: {value}"),
        Input::Assemble {
            profile,
            models,
            main,
        } => format!(
            "assemble main={main}\nprofile yaml:\n{}\nmodels yaml:\n{}",
            indent(profile),
            indent(models)
        ),
        Input::AssembleDoc { models, main } => format!(
            "assemble main={main}, models built in code: {}",
            serde_json::to_string(models).unwrap_or_default()
        ),
    }
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn pro7_every_assembly_error_message() {
    let two_models = "models:\n  main: { input: [text] }\n  eye: { input: [text, image] }\n  ear: { input: [text, audio] }\ngroups:\n  pool: [eye, ear]\n";
    let mut hand_built = ModelsDoc::default();
    hand_built
        .models
        .insert("main".into(), ModelDecl::new([Modality::Text]));
    hand_built.groups.insert("main".into(), vec!["main".into()]);

    let cases: Vec<(&str, Input)> = vec![
        (
            "pro6 removed key",
            Input::ProfileYaml("attachment:\n  imageInput: true\n  maxImageRenders: 3\n"),
        ),
        (
            "pro6 removed key wins over unknown keys",
            Input::ProfileYaml("bogus: 1\nattachment: { maxImageRenders: 3 }\n"),
        ),
        (
            "pro6 removed key in json",
            Input::ProfileJson(json!({ "attachment": { "maxImageRenders": 3 } })),
        ),
        (
            "unknown root key with suggestion",
            Input::ProfileYaml("codmode: { enable: true }\n"),
        ),
        ("unknown root key", Input::ProfileYaml("logging: verbose\n")),
        (
            "ts7 semantic key misspelt",
            Input::ProfileYaml("toolsearch:\n  enable: true\n  semantic: { modle: .tools/m }\n"),
        ),
        (
            "ts7 semantic without a model",
            Input::ProfileYaml("toolsearch:\n  enable: true\n  semantic: {}\n"),
        ),
        (
            "ts7 semantic model that is not a string",
            Input::ProfileYaml("toolsearch: { enable: true, semantic: { model: 3 } }\n"),
        ),
        (
            "ts7 semantic model that is empty",
            Input::ProfileYaml("toolsearch: { enable: true, semantic: { model: \"\" } }\n"),
        ),
        (
            "ts7 semantic without toolsearch",
            Input::ProfileYaml("toolsearch:\n  semantic: { model: .tools/m }\n"),
        ),
        (
            "mcp servers as a list",
            Input::ProfileYaml("mcp:\n  servers: []\n"),
        ),
        (
            "mcp server without command",
            Input::ProfileYaml("mcp:\n  servers:\n    everything: { args: [stdio] }\n"),
        ),
        (
            "mcp server name with a dot",
            Input::ProfileYaml("mcp:\n  servers:\n    my.server: { command: node }\n"),
        ),
        (
            "mcp args that are not strings",
            Input::ProfileYaml("mcp:\n  servers:\n    fs: { command: npx, args: [-y, 1] }\n"),
        ),
        (
            "mcp env value that is not a string",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs:\n      command: npx\n      env: { DEBUG: true }\n",
            ),
        ),
        (
            "mcp timeout of zero",
            Input::ProfileYaml("mcp:\n  servers:\n    fs: { command: npx, timeoutMs: 0 }\n"),
        ),
        (
            "mcp server with both command and url",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { command: npx, url: \"http://localhost/mcp\" }\n",
            ),
        ),
        (
            "mcp url that is not http",
            Input::ProfileYaml("mcp:\n  servers:\n    fs: { url: \"ftp://host/mcp\" }\n"),
        ),
        (
            "mcp transport unknown",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { url: \"https://h/sse\", transport: websocket }\n",
            ),
        ),
        (
            "mcp transport on a command server",
            Input::ProfileYaml("mcp:\n  servers:\n    fs: { command: npx, transport: sse }\n"),
        ),
        (
            "mcp headers on a command server",
            Input::ProfileYaml("mcp:\n  servers:\n    fs: { command: npx, headers: { A: b } }\n"),
        ),
        (
            "mcp auth without a way to authenticate",
            Input::ProfileYaml("mcp:\n  servers:\n    fs: { url: \"https://h/mcp\", auth: {} }\n"),
        ),
        (
            "mcp auth with two ways to authenticate",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { url: \"https://h/mcp\", auth: { tokenEnv: T, oauth: {} } }\n",
            ),
        ),
        (
            "mcp oauth client metadata that is not https",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { url: \"https://h/mcp\", auth: { oauth: { clientMetadataUrl: \"http://h/c.json\" } } }\n",
            ),
        ),
        (
            "mcp protocol revision unknown",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { command: npx, protocol: \"2024-11-05\" }\n",
            ),
        ),
        (
            "mcp oauth client metadata at a site root",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { url: \"https://h/mcp\", auth: { oauth: { clientMetadataUrl: \"https://h\" } } }\n",
            ),
        ),
        (
            "mcp oauth client secret without its client id",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { url: \"https://h/mcp\", auth: { oauth: { clientSecretEnv: S } } }\n",
            ),
        ),
        (
            "mcp oauth over http past localhost",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { url: \"http://mcp.example.com/mcp\", auth: { oauth: {} } }\n",
            ),
        ),
        (
            "mcp oauth over http to a host behind a localhost user name",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { url: \"http://127.0.0.1:1@evil.example/mcp\", auth: { oauth: {} } }\n",
            ),
        ),
        (
            "mcp client credentials with an algorithm for a secret",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { url: \"https://h/mcp\", auth: { clientCredentials: { clientId: c, clientSecretEnv: S, algorithm: ES256 } } }\n",
            ),
        ),
        (
            "mcp client credentials without a secret or key",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { url: \"https://h/mcp\", auth: { clientCredentials: { clientId: c } } }\n",
            ),
        ),
        (
            "mcp client credentials with an unknown algorithm",
            Input::ProfileYaml(
                "mcp:\n  servers:\n    fs: { url: \"https://h/mcp\", auth: { clientCredentials: { clientId: c, privateKeyEnv: K, algorithm: HS256 } } }\n",
            ),
        ),
        (
            "mcp unknown server key with suggestion",
            Input::ProfileYaml("mcp:\n  servers:\n    fs: { command: npx, timeout: 5 }\n"),
        ),
        (
            "unknown attachment key with suggestion",
            Input::ProfileYaml("attachment:\n  image_input: false\n"),
        ),
        (
            "unknown codemode key",
            Input::ProfileYaml("codemode:\n  enable: true\n  timeout: 5\n"),
        ),
        (
            "unknown cleanup key with suggestion",
            Input::ProfileYaml("assets:\n  cleanup:\n    enable: true\n"),
        ),
        (
            "bool of wrong type",
            Input::ProfileYaml("toolsearch: { enable: yes please }\n"),
        ),
        (
            "integer of wrong type",
            Input::ProfileYaml("attachment:\n  maxImageBytes: 5MB\n"),
        ),
        (
            "fraction",
            Input::ProfileYaml("attachment:\n  maxImageCount: 2.5\n"),
        ),
        (
            "zero batch size",
            Input::ProfileYaml("attachment:\n  imagePruneBatchSize: 0\n"),
        ),
        (
            "zero image count",
            Input::ProfileYaml("attachment:\n  maxImageCount: 0\n"),
        ),
        (
            "zero image bytes",
            Input::ProfileYaml("attachment:\n  maxImageBytes: 0\n"),
        ),
        (
            "zero total bytes",
            Input::ProfileYaml("attachment:\n  maxTotalImageBytes: 0\n"),
        ),
        (
            "zero dimension",
            Input::ProfileYaml("attachment:\n  maxImageDimension: 0\n"),
        ),
        (
            "negative download limit",
            Input::ProfileYaml("assets:\n  autoDownloadMaxBytes: -1\n"),
        ),
        (
            "dimension too large",
            Input::ProfileYaml("attachment:\n  maxImageDimension: 99999999999\n"),
        ),
        (
            "zero retention",
            Input::ProfileYaml("assets:\n  cleanup:\n    retentionDays: 0\n"),
        ),
        (
            "zero interval (json)",
            Input::ProfileJson(json!({ "assets": { "cleanup": { "intervalMinutes": 0 } } })),
        ),
        (
            "empty vision model",
            Input::ProfileYaml("attachment: { visionModel: '' }\n"),
        ),
        (
            "vision model of wrong type",
            Input::ProfileYaml("attachment: { visionModel: [a, b] }\n"),
        ),
        (
            "section not a mapping",
            Input::ProfileYaml("attachment: true\n"),
        ),
        (
            "profile not a mapping",
            Input::ProfileYaml("- codemode\n- toolsearch\n"),
        ),
        (
            "profile json not an object",
            Input::ProfileJson(json!(["codemode"])),
        ),
        (
            "string where json wants a number",
            Input::ProfileJson(json!({ "attachment": { "maxImageCount": "4" } })),
        ),
        ("yaml syntax", Input::ProfileYaml("attachment: [1, 2\n")),
        (
            "yaml duplicate key",
            Input::ProfileYaml("codemode: {}\ncodemode: {}\n"),
        ),
        (
            "yaml bad indentation",
            Input::ProfileYaml("attachment:\n  imageInput: true\n maxImageCount: 2\n"),
        ),
        (
            "yaml two documents",
            Input::ProfileYaml("codemode: {}\n---\ntoolsearch: {}\n"),
        ),
        (
            "model without input",
            Input::ModelsYaml("models:\n  main: { toolCalling: native }\n"),
        ),
        (
            "model declared empty",
            Input::ModelsYaml("models:\n  main:\n"),
        ),
        (
            "unknown modality",
            Input::ModelsYaml("models:\n  main: { input: [text, smell] }\n"),
        ),
        (
            "modality of wrong type",
            Input::ModelsYaml("models:\n  main: { input: [text, 3] }\n"),
        ),
        (
            "empty input",
            Input::ModelsYaml("models:\n  main: { input: [] }\n"),
        ),
        (
            "input not a list",
            Input::ModelsJson(json!({ "models": { "main": { "input": "text" } } })),
        ),
        (
            "bad tool calling",
            Input::ModelsYaml("models:\n  main: { input: [text], toolCalling: json }\n"),
        ),
        (
            "unknown model key with suggestion",
            Input::ModelsYaml("models:\n  main: { input: [text], tool_calling: text }\n"),
        ),
        (
            "unknown model key",
            Input::ModelsYaml("models:\n  main: { input: [text], pricing: 3 }\n"),
        ),
        (
            "unknown thinking mode",
            Input::ModelsYaml("models:\n  main: { input: [text], thinking: maybe }\n"),
        ),
        (
            "thinking budget without its tokens",
            Input::ModelsYaml("models:\n  main: { input: [text], thinking: budget }\n"),
        ),
        (
            "thinking budget below the minimum",
            Input::ModelsYaml("models:\n  main: { input: [text], thinkingBudget: 100 }\n"),
        ),
        (
            "output limit not below the window",
            Input::ModelsYaml(
                "models:\n  main: { input: [text], maxOutputTokens: 9000, contextWindow: 8000 }\n",
            ),
        ),
        (
            "model name needing quotes",
            Input::ModelsYaml("models:\n  gpt-4.1: { input: [txt] }\n"),
        ),
        (
            "blank model name",
            Input::ModelsJson(json!({ "models": { " ": { "input": ["text"] } } })),
        ),
        (
            "models not a mapping",
            Input::ModelsYaml("models: [main, eye]\n"),
        ),
        (
            "unknown models root key",
            Input::ModelsYaml("model:\n  main: { input: [text] }\n"),
        ),
        (
            "group member unknown",
            Input::ModelsYaml("models:\n  a: { input: [text] }\ngroups:\n  pool: [a, b]\n"),
        ),
        (
            "group member is a group",
            Input::ModelsYaml(
                "models:\n  a: { input: [text] }\ngroups:\n  inner: [a]\n  outer: [inner]\n",
            ),
        ),
        (
            "group named like a model",
            Input::ModelsYaml("models:\n  a: { input: [text] }\ngroups:\n  a: [a]\n"),
        ),
        (
            "empty group",
            Input::ModelsYaml("models:\n  a: { input: [text] }\ngroups:\n  pool: []\n"),
        ),
        (
            "group not a list",
            Input::ModelsYaml("models:\n  a: { input: [text] }\ngroups:\n  pool: a\n"),
        ),
        (
            "group member not a name",
            Input::ModelsYaml("models:\n  a: { input: [text] }\ngroups:\n  pool: [{ a: 1 }]\n"),
        ),
        (
            "unknown main model",
            Input::Assemble {
                profile: "",
                models: two_models,
                main: "mian",
            },
        ),
        (
            "main model is a group",
            Input::Assemble {
                profile: "",
                models: two_models,
                main: "pool",
            },
        ),
        (
            "main model with no models at all",
            Input::Assemble {
                profile: "",
                models: "",
                main: "main",
            },
        ),
        (
            "unknown vision model",
            Input::Assemble {
                profile: "attachment: { visionModel: eyes }",
                models: two_models,
                main: "main",
            },
        ),
        (
            "vision model without image",
            Input::Assemble {
                profile: "attachment: { visionModel: main }",
                models: two_models,
                main: "main",
            },
        ),
        (
            "vision group with an unsupported candidate",
            Input::Assemble {
                profile: "attachment: { visionModel: pool }",
                models: two_models,
                main: "main",
            },
        ),
        (
            "vision model without text",
            Input::Assemble {
                profile: "attachment: { visionModel: painter }",
                models: "models:\n  main: { input: [text] }\n  painter: { input: [image] }\n",
                main: "main",
            },
        ),
        (
            "group named like a model, built in code",
            Input::AssembleDoc {
                models: hand_built,
                main: "main",
            },
        ),
    ];

    let mut out = String::new();
    let mut codes = BTreeMap::new();
    for (name, input) in &cases {
        let error = match run(input) {
            Ok(()) => panic!("case `{name}` assembled without error"),
            Err(error) => error,
        };
        *codes.entry(error.code()).or_insert(0) += 1;
        let _ = writeln!(out, "## {name}\n{}", describe(input));
        let _ = writeln!(out, "code: {}", error.code());
        let _ = writeln!(out, "path: {}", error.path().unwrap_or("-"));
        let location = error
            .location()
            .map_or("-".to_owned(), |(l, c)| format!("{l}:{c}"));
        let _ = writeln!(out, "location: {location}");
        let _ = writeln!(out, "message: {}", error.message());
        if let Some(snippet) = error.snippet() {
            let _ = writeln!(out, "snippet:\n{snippet}");
        }
        out.push('\n');
        // Messages are lower-case and end without a period (STYLE.md).
        assert!(!error.message().ends_with('.'), "{name}");
        assert_eq!(error.to_string(), error.message());
    }
    // Every code appears at least once.
    for code in [
        "invalid_profile",
        "invalid_models",
        "removed_key",
        "unknown_model",
        "vision_model_unsupported",
    ] {
        assert!(codes.contains_key(code), "no case for {code}");
    }
    with_snapshots(|| insta::assert_snapshot!("assembly_errors", out));
}

#[test]
fn pro7_defaults_round_trip_through_json() {
    // What `Serialize` writes, `from_value` reads back unchanged.
    let p = profile(
        "codemode: { enable: true }\nattachment: { visionModel: eye, maxImageCount: 9 }\n\
         assets: { cleanup: { enabled: true } }\n",
    );
    let value = serde_json::to_value(&p).unwrap();
    assert_eq!(Profile::from_value(&value).unwrap(), p);

    let doc = models();
    let value = serde_json::to_value(&doc).unwrap();
    assert_eq!(ModelsDoc::from_value(&value).unwrap(), doc);
}

fn yamlish() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "codemode",
        "toolsearch",
        "attachment",
        "assets",
        "cleanup",
        "enable",
        "enabled",
        "imageInput",
        "maxImageRenders",
        "maxImageCount",
        "visionModel",
        "models",
        "groups",
        "input",
        "toolCalling",
        "text",
        "image",
        "native",
        ":",
        ": ",
        "\n",
        "  ",
        "- ",
        "[",
        "]",
        "{",
        "}",
        ",",
        "0",
        "-1",
        "1e99",
        "99999999999999999999",
        "true",
        "~",
        "null",
        "&a ",
        "*a",
        "<<: ",
        "!!binary ",
        "!tag ",
        "\"",
        "'",
        "#",
        "---\n",
        "...\n",
        "? ",
        "|\n",
        ">\n",
        "\t",
        "\u{0}",
        "\u{feff}",
        "é",
    ]);
    prop::collection::vec(atoms, 0..60).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sec3_profile_yaml_never_panics(text in any::<String>()) {
        let _ = Profile::from_yaml(&text);
        let _ = ModelsDoc::from_yaml(&text);
    }

    #[test]
    fn sec3_yamlish_input_never_panics(text in yamlish()) {
        if let Ok(p) = Profile::from_yaml(&text) {
            let _ = assemble(p, models(), "main");
        }
        if let Ok(m) = ModelsDoc::from_yaml(&text) {
            let _ = assemble(Profile::default(), m, "main");
        }
    }

    #[test]
    fn pro7_valid_profiles_round_trip(
        enable in any::<bool>(),
        image_input in any::<bool>(),
        recent in 0usize..100,
        batch in 1usize..100,
        bytes in 1u64..u64::MAX,
        count in 1usize..50,
        dimension in 1u32..u32::MAX,
        download in any::<u64>(),
        days in 1u32..1000,
    ) {
        let yaml = format!(
            "codemode: {{ enable: {enable} }}\nattachment:\n  imageInput: {image_input}\n  \
             recentImageCount: {recent}\n  imagePruneBatchSize: {batch}\n  maxImageBytes: {bytes}\n  \
             maxImageCount: {count}\n  maxImageDimension: {dimension}\nassets:\n  \
             autoDownloadMaxBytes: {download}\n  cleanup: {{ retentionDays: {days} }}\n"
        );
        let p = Profile::from_yaml(&yaml).unwrap();
        prop_assert_eq!(p.codemode.enable, enable);
        prop_assert_eq!(p.attachment.recent_image_count, recent);
        prop_assert_eq!(p.attachment.max_image_bytes, bytes);
        prop_assert_eq!(p.attachment.max_image_dimension, dimension);
        prop_assert_eq!(p.assets.auto_download_max_bytes, download);
        let value = serde_json::to_value(&p).unwrap();
        prop_assert_eq!(Profile::from_value(&value).unwrap(), p);
    }
}
