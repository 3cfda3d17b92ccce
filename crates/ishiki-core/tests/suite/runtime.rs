//! The step loop through the library API (READ-1..READ-4, TP-1, PRO-8, PRJ-4, PRJ-13, SEC-3,
//! TS-2): requests as `prepare` projects them, reports as `execute` returns them.
//!
//! End-to-end scenarios over the CLI live in `ishiki-cli`'s `examples` suite; these tests look
//! at what those cannot: the exact request a step builds, the tool schemas, what a reopened
//! runtime restores, and the error texts a model reads.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use async_trait::async_trait;
use ishiki_core::{
    Assembly, Budget, CallReport, Durability, ManualClock, ModelResponse, ModelsDoc, Part, Profile,
    Request, Role, Runtime, Tool, ToolCall, ToolContext, ToolDef, ToolDisplay, ToolError,
    WorkerSpawn, assemble,
};
use serde_json::{Value, json};

use super::backends::{Backend, backends};
use super::with_snapshots;

// ---------------------------------------------------------------------------------------------
// Helpers shared with `crash.rs`.

const MODELS: &str = "\
models:
  seeing: { input: [text, image] }
  blind: { input: [text] }
  texter: { input: [text, image], toolCalling: text }
  eye: { input: [text, image] }
";

/// Assembles `profile` (YAML) with the main model `main` from [`MODELS`].
pub(crate) fn assembly(profile: &str, main: &str) -> Assembly {
    let profile = Profile::from_yaml(profile).expect("a valid profile");
    let models = ModelsDoc::from_yaml(MODELS).expect("valid models");
    assemble(profile, models, main).expect("assembles")
}

/// 2026-01-01T00:00:00Z, plus `offset`.
pub(crate) fn clock_at(offset: Duration) -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        UNIX_EPOCH + Duration::from_secs(1_767_225_600) + offset,
    ))
}

/// A runtime on `dir` with a fixed clock, codemode in-process, and `tools` registered.
async fn runtime_with(dir: &Path, assembly: Assembly, tools: Vec<Arc<dyn Tool>>) -> Runtime {
    let mut builder = Runtime::builder(assembly, dir)
        .clock(clock_at(Duration::ZERO))
        .codemode_worker(WorkerSpawn::InProcess)
        .durability(Durability::Normal);
    for tool in tools {
        builder = builder.tool(tool);
    }
    builder.build().await.expect("the runtime builds")
}

async fn runtime(dir: &Path, assembly: Assembly) -> Runtime {
    runtime_with(dir, assembly, vec![Arc::new(Echo::resident())]).await
}

/// [`runtime`] with its history in `backend` (store conformance tests).
async fn runtime_on(backend: &Backend, dir: &Path, assembly: Assembly) -> Runtime {
    Runtime::builder(assembly, dir)
        .clock(clock_at(Duration::ZERO))
        .codemode_worker(WorkerSpawn::InProcess)
        .tool(Arc::new(Echo::resident()))
        .store(backend.open().await)
        .build()
        .await
        .unwrap_or_else(|e| panic!("{backend:?}: the runtime builds: {e}"))
}

/// A valid `width`×`height` 8-bit grayscale PNG that carries `seed` in a `tEXt` chunk (and in
/// its pixels), so different seeds always give different bytes and so different
/// content-addressed artifact URLs. Written by hand (stored deflate blocks) to need no image
/// encoder.
pub(crate) fn png(width: u32, height: u32, seed: u64) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = 0xffff_ffff_u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }
    let mut raw = Vec::new();
    for y in 0..height {
        raw.push(0); // filter: none
        for x in 0..width {
            raw.push((u64::from(x * 7 + y * 13) ^ seed.wrapping_mul(0x9e37_79b9)) as u8);
        }
    }
    let mut zlib = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = raw.chunks(65_535).collect();
    for (k, block) in blocks.iter().enumerate() {
        zlib.push(u8::from(k + 1 == blocks.len()));
        let len = block.len() as u16;
        zlib.extend_from_slice(&len.to_le_bytes());
        zlib.extend_from_slice(&(!len).to_le_bytes());
        zlib.extend_from_slice(block);
    }
    let (mut a, mut b) = (1_u32, 0_u32);
    for &byte in &raw {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    zlib.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 0, 0, 0, 0]); // 8-bit grayscale, no interlace
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"tEXt", format!("seed\0{seed}").as_bytes());
    chunk(&mut out, b"IDAT", &zlib);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// Every embedded image of a request: (attachment message id, url).
pub(crate) fn images(request: &Request) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in &request.messages {
        for p in &m.content {
            if let Part::Image(media) = p {
                out.push((m.id.clone(), media.url.clone()));
            }
        }
    }
    out
}

fn image_urls(request: &Request) -> Vec<String> {
    images(request).into_iter().map(|(_, url)| url).collect()
}

/// All text of a request's messages, one part per line.
fn texts(request: &Request) -> String {
    let mut out = String::new();
    for m in &request.messages {
        for p in &m.content {
            match p {
                Part::Text { text } | Part::ToolResult { text, .. } => {
                    out.push_str(text);
                    out.push('\n');
                }
                _ => {}
            }
        }
    }
    out
}

fn tool_names(request: &Request) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

fn call(id: &str, name: &str, input: Value) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        input,
    }
}

fn calls(calls: Vec<ToolCall>) -> ModelResponse {
    ModelResponse::from_calls(calls)
}

fn say(text: &str) -> ModelResponse {
    ModelResponse::from_text(text)
}

/// One whole step: the request it sent and the reports of its calls.
async fn step(rt: &mut Runtime, response: ModelResponse) -> (Request, Vec<CallReport>) {
    let prepared = rt.prepare().await.expect("prepare");
    let request = prepared.request.clone();
    rt.commit(prepared, response).await.expect("commit");
    let reports = rt.execute().await.expect("execute");
    (request, reports)
}

fn report<'a>(reports: &'a [CallReport], id: &str) -> &'a CallReport {
    reports
        .iter()
        .find(|r| r.call_id == id)
        .unwrap_or_else(|| panic!("no report for {id}: {reports:#?}"))
}

/// `echo`: returns its input. Input `{ n: integer, word?: string, list?: [{ k: integer }] }`.
#[derive(Debug)]
struct Echo {
    name: &'static str,
    resident: bool,
}

impl Echo {
    fn resident() -> Self {
        Self {
            name: "echo",
            resident: true,
        }
    }
}

#[async_trait]
impl Tool for Echo {
    fn definition(&self) -> ToolDef {
        ToolDef {
            resident: self.resident,
            ..ToolDef::new(
                self.name,
                "Echo the input back, for weather forecasts and tests.",
                json!({
                    "type": "object",
                    "properties": {
                        "n": { "type": "integer" },
                        "word": { "type": "string" },
                        "list": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": { "k": { "type": "integer" } },
                                "required": ["k"]
                            }
                        }
                    },
                    "required": ["n"],
                    "additionalProperties": false
                }),
            )
        }
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        Ok(input)
    }
}

fn lifetime_offered(request: &Request) -> bool {
    let read = request
        .tools
        .iter()
        .find(|t| t.name == "read")
        .expect("read is resident");
    read.input_schema["properties"].get("lifetime").is_some()
}

const TEXT_LINES: usize = 20;

fn write_fixtures(rt: &Runtime) {
    let text: String = (1..=TEXT_LINES).map(|k| format!("line {k}\n")).collect();
    rt.workspace()
        .write("/home/workspace/notes.txt", text.as_bytes())
        .expect("write notes");
    rt.workspace()
        .write("/home/workspace/a.png", &png(6, 4, 1))
        .expect("write a.png");
    rt.workspace()
        .write("/home/workspace/b.png", &png(5, 5, 2))
        .expect("write b.png");
}

const A_PNG: &str = "workspace:///home/workspace/a.png";
const B_PNG: &str = "workspace:///home/workspace/b.png";
const NOTES: &str = "workspace:///home/workspace/notes.txt";

// ---------------------------------------------------------------------------------------------
// READ

/// CM-9, issue 24: console output was dropped when a program failed, although it is what
/// tells the model how far the program got.
#[tokio::test]
async fn cm9_a_failed_program_keeps_its_console_output() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = Runtime::builder(assembly("codemode: { enable: true }", "seeing"), dir.path())
        .clock(clock_at(Duration::ZERO))
        .codemode_worker(WorkerSpawn::InProcess)
        .build()
        .await
        .unwrap();
    let program = "console.log('fetched 3 pages');\nconsole.log('parsing page 2');\nthrow new Error('page 2 is not JSON');";
    let (_, reports) = step(
        &mut rt,
        calls(vec![call("p1", "codemode", json!({ "code": program }))]),
    )
    .await;
    let failed = report(&reports, "p1");
    assert!(failed.is_error, "{}", failed.text);
    assert_eq!(
        failed.text,
        "uncaught Error: page 2 is not JSON (line 3, col 7)\n[console]\nfetched 3 pages\nparsing page 2"
    );
}

#[tokio::test]
async fn read1_program_gets_the_raw_result_and_a_direct_call_gets_pages_and_attachments() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = Runtime::builder(assembly("codemode: { enable: true }", "seeing"), dir.path())
        .clock(clock_at(Duration::ZERO))
        .codemode_worker(WorkerSpawn::InProcess)
        .budget(Budget {
            max_lines: 6,
            max_units: 10_000,
        })
        .build()
        .await
        .unwrap();
    write_fixtures(&rt);

    // Raw exit (RES-7): the whole text and the file node with base64 data; no attachment.
    let program = format!(
        "const t = await tools.read({{ url: {NOTES:?} }});\n\
         const f = await tools.read({{ url: {A_PNG:?} }});\n\
         return {{ t: t.type, lines: t.text.split('\\n').length - 1, hasSource: t.source !== undefined,\n\
                  f: f.type, mediaType: f.mediaType, dataChars: f.data.length }};"
    );
    let (_, reports) = step(
        &mut rt,
        calls(vec![call("p1", "codemode", json!({ "code": program }))]),
    )
    .await;
    let raw = report(&reports, "p1");
    assert!(!raw.is_error, "{}", raw.text);
    let value: Value = serde_json::from_str(&raw.text).expect("the program's value as JSON");
    assert_eq!(
        value,
        json!({
            "t": "text", "lines": TEXT_LINES, "hasSource": true,
            "f": "file", "mediaType": "image/png",
            "dataChars": png(6, 4, 1).len().div_ceil(3) * 4
        })
    );
    assert!(
        raw.attachments.is_empty(),
        "CM-6: media inside a program is not shown"
    );

    // Model exit: a page of the text with a continuation, and the image as marker + attachment.
    let (_, reports) = step(
        &mut rt,
        calls(vec![
            call("d1", "read", json!({ "url": NOTES })),
            call("d2", "read", json!({ "url": A_PNG })),
        ]),
    )
    .await;
    let page = report(&reports, "d1");
    assert!(!page.is_error);
    assert!(page.text.starts_with("line 1\nline 2\n"), "{}", page.text);
    assert!(page.text.lines().count() <= 6, "{}", page.text);
    assert!(page.text.contains("[Continue: read"), "{}", page.text);
    let next = page.continuation.clone().expect("more pages");
    assert!(
        next.starts_with(NOTES),
        "OUT-6: continues from the file: {next}"
    );
    assert!(page.attachments.is_empty());

    let image = report(&reports, "d2");
    assert!(!image.is_error);
    assert_eq!(image.attachments.len(), 1);
    let att = &image.attachments[0];
    assert!(att.url.starts_with("artifact://read/"), "{}", att.url);
    assert_eq!(
        (att.media_type.as_str(), att.lifetime.as_str()),
        ("image/png", "once")
    );
    assert_eq!(
        image.text,
        format!(
            "[attachment: {}; image/png; {} bytes; 6x4]",
            att.url, att.bytes
        )
    );
    // The next request carries the bytes right after the result.
    let request = rt.prepare().await.unwrap().request;
    assert_eq!(image_urls(&request), vec![att.url.clone()]);
}

/// `shout`: serves the model and programs differently, through the public trait alone: a
/// direct call shows the word upper-cased (`to_model_output`), a program calls its
/// program-side view (`program_view`) and gets the raw result.
#[derive(Debug)]
struct Shout {
    for_program: bool,
}

#[async_trait]
impl Tool for Shout {
    fn definition(&self) -> ToolDef {
        let mut def = ToolDef::new(
            "shout",
            "Say a word loudly.",
            json!({
                "type": "object",
                "properties": { "word": { "type": "string" } },
                "required": ["word"],
                "additionalProperties": false
            }),
        );
        if self.for_program {
            def.output_schema = Some(json!({
                "type": "object",
                "properties": { "said": { "type": "string" } },
                "required": ["said"]
            }));
        }
        def
    }

    async fn execute(&self, input: Value, context: &ToolContext) -> Result<Value, ToolError> {
        Ok(json!({
            "said": input["word"],
            "fromProgram": context.from_program,
            "programView": self.for_program
        }))
    }

    fn program_view(&self) -> Option<Arc<dyn Tool>> {
        (!self.for_program).then(|| Arc::new(Shout { for_program: true }) as Arc<dyn Tool>)
    }

    fn to_model_output(&self, raw: &Value) -> ToolDisplay {
        let word = raw["said"].as_str().unwrap_or_default().to_uppercase();
        ToolDisplay::text(format!("{word}!"))
    }
}

#[tokio::test]
async fn any_tool_can_serve_direct_calls_and_programs_differently_as_read_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime_with(
        dir.path(),
        assembly("codemode: { enable: true }", "seeing"),
        vec![Arc::new(Shout { for_program: false })],
    )
    .await;
    let program = "return await tools.shout({ word: 'hi' });";
    let (_, reports) = step(
        &mut rt,
        calls(vec![
            call("d1", "shout", json!({ "word": "hi" })),
            call("p1", "codemode", json!({ "code": program })),
        ]),
    )
    .await;
    let direct = report(&reports, "d1");
    assert!(!direct.is_error, "{}", direct.text);
    assert_eq!(direct.text, "HI!");
    let raw = report(&reports, "p1");
    assert!(!raw.is_error, "{}", raw.text);
    let value: Value = serde_json::from_str(&raw.text).expect("the program's value as JSON");
    assert_eq!(
        value,
        json!({ "said": "hi", "fromProgram": true, "programView": true })
    );
}

#[tokio::test]
async fn read2_lifetime_is_offered_only_with_effective_image_input() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("", "seeing", true),
        ("", "blind", false),
        ("attachment: { imageInput: false }", "seeing", false),
    ];
    for (k, (profile, main, offered)) in cases.into_iter().enumerate() {
        for codemode in [false, true] {
            let profile = format!("codemode: {{ enable: {codemode} }}\n{profile}");
            let mut rt = runtime(
                &dir.path().join(format!("{k}-{codemode}")),
                assembly(&profile, main),
            )
            .await;
            let request = rt.prepare().await.unwrap().request;
            assert_eq!(
                lifetime_offered(&request),
                offered,
                "{profile} with {main}: lifetime offered"
            );
            if codemode {
                // Codemode's `read` never takes it (READ-2): its signature has only `url`.
                let description = &request
                    .tools
                    .iter()
                    .find(|t| t.name == "codemode")
                    .unwrap()
                    .description;
                let read_line = description
                    .lines()
                    .find(|l| l.contains("read("))
                    .unwrap_or_else(|| panic!("no read signature in {description}"));
                assert!(!read_line.contains("lifetime"), "{read_line}");
            }
        }
    }
}

#[tokio::test]
async fn read2_lifetime_is_honoured_and_refused_where_not_offered() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime(&dir.path().join("on"), assembly("", "seeing")).await;
    write_fixtures(&rt);
    let (_, reports) = step(
        &mut rt,
        calls(vec![call(
            "r1",
            "read",
            json!({ "url": A_PNG, "lifetime": "retain" }),
        )]),
    )
    .await;
    let att = &report(&reports, "r1").attachments[0];
    assert_eq!(att.lifetime, ishiki_core::Lifetime::Retain);
    // Retained: embedded in the next two requests, not just one.
    let (first, _) = step(&mut rt, say("I see it.")).await;
    let (second, _) = step(&mut rt, say("Still there.")).await;
    assert_eq!(image_urls(&first), vec![att.url.clone()]);
    assert_eq!(image_urls(&second), vec![att.url.clone()]);

    let mut rt = runtime(&dir.path().join("off"), assembly("", "blind")).await;
    write_fixtures(&rt);
    let (_, reports) = step(
        &mut rt,
        calls(vec![call(
            "r1",
            "read",
            json!({ "url": A_PNG, "lifetime": "retain" }),
        )]),
    )
    .await;
    let r = report(&reports, "r1");
    assert!(r.is_error && r.text.contains("lifetime"), "{}", r.text);
}

#[tokio::test]
async fn read3_reading_an_image_again_makes_a_new_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime(dir.path(), assembly("", "seeing")).await;
    write_fixtures(&rt);
    // Twice in one response: two records, both delivered by the next request.
    let (_, reports) = step(
        &mut rt,
        calls(vec![
            call("r1", "read", json!({ "url": A_PNG })),
            call("r2", "read", json!({ "url": A_PNG })),
        ]),
    )
    .await;
    let url = report(&reports, "r1").attachments[0].url.clone();
    assert_eq!(report(&reports, "r2").attachments[0].url, url);
    let (request, _) = step(&mut rt, say("Two looks.")).await;
    assert_eq!(
        images(&request),
        vec![
            ("att-call-r1".to_owned(), url.clone()),
            ("att-call-r2".to_owned(), url.clone())
        ]
    );
    // Both were `once`: gone from the next request.
    let (request, _) = step(
        &mut rt,
        calls(vec![call("r3", "read", json!({ "url": A_PNG }))]),
    )
    .await;
    assert!(images(&request).is_empty());
    // Read again after delivery: a new record, shown again.
    let request = rt.prepare().await.unwrap().request;
    assert_eq!(images(&request), vec![("att-call-r3".to_owned(), url)]);
}

#[tokio::test]
async fn read4_with_image_input_off_a_read_describes_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let mut out = String::new();
    for (name, profile, main) in [
        ("blind model", "", "blind"),
        (
            "imageInput false, vision model set",
            "attachment: { imageInput: false, visionModel: eye }",
            "seeing",
        ),
    ] {
        let mut rt = runtime(&dir.path().join(name), assembly(profile, main)).await;
        write_fixtures(&rt);
        let (_, reports) = step(
            &mut rt,
            calls(vec![call("r1", "read", json!({ "url": B_PNG }))]),
        )
        .await;
        let r = report(&reports, "r1");
        assert!(!r.is_error && r.attachments.is_empty(), "{r:#?}");
        let request = rt.prepare().await.unwrap().request;
        assert!(images(&request).is_empty());
        writeln!(out, "## {name}\n{}\n", r.text).unwrap();
    }
    with_snapshots(|| insta::assert_snapshot!("runtime_read4_descriptions", out));
}

// ---------------------------------------------------------------------------------------------
// PRO-8

#[tokio::test]
async fn pro8_effective_image_input_needs_profile_and_model() {
    let dir = tempfile::tempdir().unwrap();
    for (k, (profile, main, effective)) in [
        ("", "seeing", true),
        ("attachment: { imageInput: true }", "blind", false),
        ("attachment: { imageInput: false }", "seeing", false),
        ("attachment: { imageInput: false }", "blind", false),
    ]
    .into_iter()
    .enumerate()
    {
        let assembled = assembly(profile, main);
        assert_eq!(assembled.image_input, effective, "{profile} + {main}");
        let mut rt = runtime(&dir.path().join(k.to_string()), assembled).await;
        write_fixtures(&rt);
        rt.add_user_message("m1", "look", &[png(3, 3, 9)])
            .await
            .unwrap();
        let (first, reports) = step(
            &mut rt,
            calls(vec![call("r1", "read", json!({ "url": A_PNG }))]),
        )
        .await;
        let read = report(&reports, "r1");
        let (second, _) = step(&mut rt, say("ok")).await;
        if effective {
            assert_eq!(images(&first).len(), 1, "the platform image");
            assert_eq!(read.attachments.len(), 1);
            assert_eq!(image_urls(&second), vec![read.attachments[0].url.clone()]);
        } else {
            assert!(images(&first).is_empty() && images(&second).is_empty());
            assert!(read.attachments.is_empty());
            assert!(read.text.contains("image input is off"), "{}", read.text);
            // PRJ-12: the platform image's attachment message says it was not provided.
            assert!(texts(&first).contains("not provided"), "{}", texts(&first));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// TP-1

#[tokio::test]
async fn tp1_text_calls_run_through_the_same_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime(dir.path(), assembly("", "texter")).await;
    write_fixtures(&rt);
    let text = format!(
        "Reading first.\n\
         <tool_call>{{\"name\": \"read\", \"arguments\": {{\"url\": \"{NOTES}?lines=2-3\"}}}}</tool_call>\n\
         Then typed values from the XML form:\n\
         <tool_call><function=echo><parameter=n>42</parameter><parameter=word>\n007\n</parameter></function></tool_call>\n\
         <tool_call>{{\"name\": \"echo\", \"arguments\": {{\"n\": </tool_call>\n\
         <tool_call>{{\"name\": \"echo\", \"arguments\": {{\"n\": \"7\"}}}}</tool_call>\n\
         Done."
    );
    let prepared = rt.prepare().await.unwrap();
    let calls = rt
        .commit(prepared, ModelResponse::from_text(text.clone()))
        .await
        .unwrap();
    let names: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("s1-call1", "read"),
            ("s1-call2", "echo"),
            ("s1-call3", "(malformed)"),
            ("s1-call4", "echo")
        ]
    );
    let reports = rt.execute().await.unwrap();
    assert_eq!(report(&reports, "s1-call1").text, "line 2\nline 3\n");
    let echo = report(&reports, "s1-call2");
    assert!(!echo.is_error);
    // The schema types the XML values: `n` an integer, `word` a string kept verbatim.
    assert_eq!(
        serde_json::from_str::<Value>(&echo.text).unwrap(),
        json!({ "n": 42, "word": "007" })
    );
    let malformed = report(&reports, "s1-call3");
    assert!(malformed.is_error && malformed.text.starts_with("malformed tool call"));
    let invalid = report(&reports, "s1-call4");
    assert!(
        invalid.is_error && invalid.text.contains("at /n"),
        "{}",
        invalid.text
    );

    // The next request keeps the model's whole text and answers every call in order.
    let request = rt.prepare().await.unwrap().request;
    let assistant = request
        .messages
        .iter()
        .find(|m| m.role == Role::Assistant)
        .unwrap();
    assert_eq!(assistant.content, vec![Part::Text { text }]);
    let results: Vec<&str> = request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        vec!["s1-call1", "s1-call2", "s1-call3", "s1-call4"]
    );

    // Call ids stay unique in later steps.
    let prepared = rt.prepare().await.unwrap();
    let calls = rt
        .commit(
            prepared,
            say("<tool_call>{\"name\": \"echo\", \"arguments\": {\"n\": 1}}</tool_call>"),
        )
        .await
        .unwrap();
    assert_eq!(calls[0].id, "s2-call1");
}

// ---------------------------------------------------------------------------------------------
// PRJ-4, PRJ-13

#[tokio::test]
async fn prj4_an_abandoned_step_consumes_nothing() {
    for backend in backends() {
        an_abandoned_step_consumes_nothing(&backend).await;
    }
}

async fn an_abandoned_step_consumes_nothing(backend: &Backend) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut rt = runtime_on(backend, dir.path(), assembly("", "seeing")).await;
    write_fixtures(&rt);
    rt.add_user_message("m1", "look", &[png(4, 4, 3)])
        .await
        .expect("the message is added");
    let (_, reports) = step(
        &mut rt,
        calls(vec![call("r1", "read", json!({ "url": A_PNG }))]),
    )
    .await;
    let read_url = report(&reports, "r1").attachments[0].url.clone();

    let attempt = rt.prepare().await.expect("the request is prepared");
    assert_eq!(attempt.step, 2, "{backend:?}");
    let carried = images(&attempt.request);
    assert_eq!(
        carried,
        vec![("att-call-r1".to_owned(), read_url.clone())],
        "{backend:?}"
    );
    rt.abandon(attempt);
    // A later attempt gets the next step number and carries the same image again.
    let retry = rt.prepare().await.expect("the request is prepared");
    assert_eq!(retry.step, 3, "{backend:?}");
    assert_eq!(images(&retry.request), carried, "{backend:?}");
    rt.abandon(retry);

    // An abandoned step leaves nothing in the store either.
    drop(rt);
    let mut rt = runtime_on(backend, dir.path(), assembly("", "seeing")).await;
    let (request, _) = step(&mut rt, say("I see it.")).await;
    assert_eq!(images(&request), carried, "{backend:?}");
    assert!(
        images(&rt.prepare().await.expect("the request is prepared").request).is_empty(),
        "{backend:?}"
    );
}

#[tokio::test]
async fn prj13_delivery_state_survives_reopening() {
    for backend in backends() {
        delivery_state_survives_reopening(&backend).await;
    }
}

async fn delivery_state_survives_reopening(backend: &Backend) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let tools = || -> Vec<Arc<dyn Tool>> { vec![Arc::new(Echo::resident())] };
    let open = async || {
        // The default (Full) durability, as an embedder gets it.
        let mut b = Runtime::builder(
            assembly("toolsearch: { enable: true }", "seeing"),
            dir.path(),
        )
        .clock(clock_at(Duration::ZERO))
        .store(backend.open().await);
        for t in tools() {
            b = b.tool(t);
        }
        b.build().await.expect("the runtime builds")
    };
    let mut rt = open().await;
    write_fixtures(&rt);
    rt.add_user_message("m1", "two pictures", &[png(4, 4, 5)])
        .await
        .expect("the message is added");
    let (first, reports) = step(
        &mut rt,
        calls(vec![call("r1", "read", json!({ "url": A_PNG }))]),
    )
    .await;
    let asset = images(&first);
    assert_eq!(asset.len(), 1, "{backend:?}: the platform image");
    let a_url = report(&reports, "r1").attachments[0].url.clone();
    // Step 2 delivers a.png (committed), and reads b.png, not yet delivered.
    let (second, reports) = step(
        &mut rt,
        calls(vec![call("r2", "read", json!({ "url": B_PNG }))]),
    )
    .await;
    assert_eq!(image_urls(&second), vec![a_url.clone()], "{backend:?}");
    let b_url = report(&reports, "r2").attachments[0].url.clone();
    let before = rt.prepare().await.expect("the request is prepared").request;
    drop(rt);

    let mut rt = open().await;
    let after = rt.prepare().await.expect("the request is prepared").request;
    // Exactly the same request: history, attachment messages, ids, timestamps, tool list.
    assert_eq!(after, before, "{backend:?}");
    assert_eq!(image_urls(&after), vec![b_url.clone()], "{backend:?}");
    assert_eq!(rt.step(), 2, "{backend:?}");
    let prepared = rt.prepare().await.expect("the request is prepared");
    rt.commit(prepared, say("Seen."))
        .await
        .expect("the commit succeeds");
    drop(rt);

    // Delivered before the second drop: nothing is embedded again.
    let mut rt = open().await;
    let request = rt.prepare().await.expect("the request is prepared").request;
    assert!(
        images(&request).is_empty(),
        "{backend:?}: {:?}",
        images(&request)
    );
    assert_eq!(rt.step(), 3, "{backend:?}");
}

#[tokio::test]
async fn sec4_no_request_is_prepared_while_committed_calls_wait() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime(dir.path(), assembly("", "seeing")).await;
    let prepared = rt.prepare().await.unwrap();
    rt.commit(prepared, calls(vec![call("e1", "echo", json!({ "n": 1 }))]))
        .await
        .unwrap();
    // Its request would carry a call without a result, and its commit would drop `e1`.
    let error = rt.prepare().await.unwrap_err();
    assert_eq!(
        error.message(),
        "the calls of step 1 have not run yet: call execute before preparing the next request"
    );
    assert_eq!(
        report(&rt.execute().await.unwrap(), "e1").text,
        r#"{"n":1}"#
    );
    let request = rt.prepare().await.unwrap().request;
    assert!(texts(&request).contains(r#"{"n":1}"#));
}

// ---------------------------------------------------------------------------------------------
// TS-2

#[tokio::test]
async fn ts2_a_hit_becomes_callable_from_the_next_step() {
    let dir = tempfile::tempdir().unwrap();
    let forecast: Arc<dyn Tool> = Arc::new(Echo {
        name: "weather_forecast",
        resident: false,
    });
    let mut rt = runtime_with(
        dir.path(),
        assembly("toolsearch: { enable: true }", "seeing"),
        vec![forecast],
    )
    .await;
    let (first, reports) = step(
        &mut rt,
        calls(vec![
            call("c1", "search", json!({ "query": "weather forecast" })),
            call("c2", "weather_forecast", json!({ "n": 1 })),
        ]),
    )
    .await;
    assert!(!tool_names(&first).contains(&"weather_forecast".to_owned()));
    assert!(report(&reports, "c1").text.contains("weather_forecast"));
    let early = report(&reports, "c2");
    assert!(
        early.is_error && early.text.contains("not loaded yet"),
        "{}",
        early.text
    );

    let (second, reports) = step(
        &mut rt,
        calls(vec![call("c3", "weather_forecast", json!({ "n": 2 }))]),
    )
    .await;
    assert_eq!(
        tool_names(&second).last().map(String::as_str),
        Some("weather_forecast")
    );
    let delta = second.messages.last().unwrap();
    assert_eq!(delta.id, "s2-catalog");
    assert!(
        matches!(&delta.content[1], Part::CatalogDelta { added } if added[0].name == "weather_forecast")
    );
    assert!(!report(&reports, "c3").is_error);
    // Announced once: the delta stays where it was, no new one follows.
    let third = rt.prepare().await.unwrap().request;
    assert_eq!(
        third
            .messages
            .iter()
            .filter(|m| m.id.ends_with("-catalog"))
            .count(),
        1
    );
}

#[tokio::test]
async fn retrieval_telemetry_names_the_searches_that_missed_a_called_tool() {
    let dir = tempfile::tempdir().unwrap();
    let forecast: Arc<dyn Tool> = Arc::new(Echo {
        name: "weather_forecast",
        resident: false,
    });
    let mut rt = runtime_with(
        dir.path(),
        assembly("toolsearch: { enable: true }", "seeing"),
        vec![forecast],
    )
    .await;
    let (_, reports) = step(
        &mut rt,
        calls(vec![
            call("c1", "search", json!({ "query": "zebra crossing" })),
            call("c2", "search", json!({ "query": "weather forecast" })),
        ]),
    )
    .await;
    assert!(report(&reports, "c1").missed_by_search.is_empty());
    let (_, reports) = step(
        &mut rt,
        calls(vec![call("c3", "weather_forecast", json!({ "n": 1 }))]),
    )
    .await;
    let called = report(&reports, "c3");
    assert!(!called.is_error, "{}", called.text);
    // The first search did not return the tool the model went on to call; the second did.
    assert_eq!(called.missed_by_search, ["zebra crossing"]);
}

// ---------------------------------------------------------------------------------------------
// SEC-3

#[tokio::test]
async fn sec3_bad_calls_get_error_results_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime_with(
        dir.path(),
        assembly("toolsearch: { enable: true }", "seeing"),
        vec![
            Arc::new(Echo::resident()),
            Arc::new(Echo {
                name: "weather_forecast",
                resident: false,
            }),
        ],
    )
    .await;
    write_fixtures(&rt);
    rt.add_user_message("m1", "kept", &[]).await.unwrap();
    let bad = vec![
        call("e1", "echo", json!({ "n": "seven" })),
        call(
            "e2",
            "echo",
            json!({ "n": 1, "list": [{ "k": 1 }, { "k": "x" }] }),
        ),
        call("e3", "echo", json!({ "n": 1, "extra": true })),
        call("e4", "echo", json!({})),
        call("e5", "read", json!({ "url": 5 })),
        call("e6", "nope", json!({})),
        call("e7", "weather_forecast", json!({ "n": 1 })),
        call(
            "e8",
            "read",
            json!({ "url": "workspace:///home/workspace/missing.txt" }),
        ),
        call("e9", "read", json!({ "url": "nope://x" })),
    ];
    let inputs: Vec<(String, String, Value)> = bad
        .iter()
        .map(|c| (c.id.clone(), c.name.clone(), c.input.clone()))
        .collect();
    let (_, reports) = step(&mut rt, calls(bad)).await;
    let mut out = String::new();
    for (id, name, input) in inputs {
        let r = report(&reports, &id);
        assert!(r.is_error, "{id}: {}", r.text);
        writeln!(out, "{name} {input}\n  -> {}", r.text).unwrap();
    }
    assert!(report(&reports, "e2").text.contains("at /list/1/k"));
    // Nothing already persisted is lost; the errors are in history for the model.
    let request = rt.prepare().await.unwrap().request;
    assert_eq!(request.messages[0].id, "m1");
    assert!(texts(&request).contains("there is no tool named `nope`"));
    drop(rt);
    let mut rt = runtime(
        dir.path(),
        assembly("toolsearch: { enable: true }", "seeing"),
    )
    .await;
    assert_eq!(
        rt.prepare().await.unwrap().request.messages.len(),
        request.messages.len()
    );

    // A text-protocol model's broken calls, for the same snapshot.
    let mut rt = runtime(&dir.path().join("tp"), assembly("", "texter")).await;
    let prepared = rt.prepare().await.unwrap();
    rt.commit(
        prepared,
        say("a <tool_call><function=echo><parameter=n>1</function></tool_call> b <tool_call>{\"name\": \"echo\""),
    )
    .await.unwrap();
    for r in rt.execute().await.unwrap() {
        assert!(r.is_error);
        writeln!(out, "text protocol {}\n  -> {}", r.call_id, r.text).unwrap();
    }
    with_snapshots(|| insta::assert_snapshot!("runtime_error_results", out));
}

/// The stored JSON of the (first) assistant message in the state directory `dir`'s history.
async fn stored_assistant_record(dir: &std::path::Path) -> Value {
    let store = ishiki_core::SqliteStore::open(&dir.join("history.sqlite"), Durability::Normal)
        .expect("the history opens");
    let state = ishiki_core::HistoryStore::load(&store)
        .await
        .expect("the history loads");
    let (record, _) = state
        .messages
        .into_iter()
        .find(|(m, _)| m.id.ends_with("-assistant"))
        .expect("the assistant record");
    record.json
}

/// Reasoning parts are committed verbatim ahead of the text, survive reopening, and the
/// provider's usage is stored in the assistant message's record (issue 15).
#[tokio::test]
async fn reasoning_and_usage_are_committed_with_the_response() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime(dir.path(), assembly("", "seeing")).await;
    rt.add_user_message("m1", "think", &[]).await.unwrap();
    let thinking = json!({ "type": "thinking", "thinking": "hmm", "signature": "c2ln+/==" });
    let usage = ishiki_core::Usage {
        input_tokens: 120,
        output_tokens: 9,
        cache_read_tokens: 100,
        cache_write_tokens: 20,
    };
    let response = ModelResponse {
        parts: vec![
            ishiki_core::Part::Reasoning(ishiki_core::Reasoning {
                provider: "anthropic".into(),
                model: "m".into(),
                data: thinking.clone(),
                prefix: Some("p".into()),
            }),
            ishiki_core::Part::Text {
                text: "Done.".into(),
            },
        ],
        usage: Some(usage),
        ..ModelResponse::default()
    };
    step(&mut rt, response).await;
    drop(rt);
    let record = stored_assistant_record(dir.path()).await;
    assert_eq!(record["usage"], serde_json::to_value(usage).unwrap());
    assert_eq!(record["content"][0]["data"], thinking);
    let mut rt = runtime(dir.path(), assembly("", "seeing")).await;
    let request = rt.prepare().await.unwrap().request;
    let assistant = request
        .messages
        .iter()
        .find(|m| m.role == Role::Assistant)
        .unwrap();
    assert!(matches!(&assistant.content[0], Part::Reasoning(r) if r.data == thinking));
    assert_eq!(
        assistant.content[1],
        Part::Text {
            text: "Done.".into()
        }
    );
}

/// What the provider changed in the request (thinking it dropped) is kept beside the assistant
/// message with its usage, and a runtime reopened on that history loads it: both are fields of
/// the stored record, not keys the message decoder must skip.
#[tokio::test]
async fn a_response_with_input_transformations_reopens_and_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut rt = runtime(dir.path(), assembly("", "seeing")).await;
    rt.add_user_message("m1", "think", &[]).await.unwrap();
    let dropped = json!({ "type": "dropped_thinking", "blocks": 1 });
    let response = ModelResponse {
        parts: vec![ishiki_core::Part::Text {
            text: "Done.".into(),
        }],
        usage: Some(ishiki_core::Usage {
            input_tokens: 12,
            ..ishiki_core::Usage::default()
        }),
        input_transformations: vec![dropped.clone()],
    };
    step(&mut rt, response).await;
    drop(rt);
    let record = stored_assistant_record(dir.path()).await;
    assert_eq!(record["input_transformations"], json!([dropped]));
    assert_eq!(record["usage"]["input_tokens"], 12);

    let mut rt = runtime(dir.path(), assembly("", "seeing")).await;
    let request = rt.prepare().await.expect("the history reopens").request;
    let assistant = request
        .messages
        .iter()
        .find(|m| m.role == Role::Assistant)
        .unwrap();
    assert_eq!(
        assistant.content,
        [Part::Text {
            text: "Done.".into()
        }]
    );
}
