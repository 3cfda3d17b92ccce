//! Every scenario in `examples/` runs, exits 0, gives the same bytes twice, matches its reviewed
//! snapshot, and meets the expectations written in its comments (asserted here, not only in
//! snapshots).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{events, root, run};

struct Transcript {
    events: Vec<Value>,
}

impl Transcript {
    fn result(&self, call: &str) -> &Value {
        self.events
            .iter()
            .find(|e| e["event"] == "tool_result" && e["call_id"] == call)
            .unwrap_or_else(|| panic!("no tool_result for {call}"))
    }

    fn text(&self, call: &str) -> &str {
        self.result(call)["text"].as_str().unwrap_or_default()
    }

    fn is_error(&self, call: &str) -> bool {
        self.result(call)["is_error"] == true
    }

    fn continuation(&self, call: &str) -> Option<&str> {
        self.result(call)["continue"]["url"].as_str()
    }

    /// The page body: the text without its Continue line (docs/scenario-format.md).
    fn body(&self, call: &str) -> &str {
        let text = self.text(call);
        if self.continuation(call).is_some() {
            text.rsplit_once('\n').map_or(text, |(body, _)| body)
        } else {
            text
        }
    }

    fn request(&self, step: u64) -> &Value {
        self.events
            .iter()
            .find(|e| e["event"] == "request" && e["step"] == step)
            .unwrap_or_else(|| panic!("no request {step}"))
    }

    fn parts(&self, step: u64) -> Vec<&Value> {
        self.request(step)["request"]["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|m| m["content"].as_array().into_iter().flatten())
            .collect()
    }

    fn images(&self, step: u64) -> Vec<String> {
        self.parts(step)
            .into_iter()
            .filter(|p| p["type"] == "image")
            .map(|p| p["url"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn texts(&self, step: u64) -> String {
        self.parts(step)
            .into_iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn tools(&self, step: u64) -> Vec<String> {
        self.request(step)["request"]["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    fn attachment(&self, call: &str, k: usize) -> String {
        self.result(call)["attachments"][k]["url"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == kind).collect()
    }
}

/// Long strings are shown as their start plus length and hash, so a snapshot stays readable
/// and still pins every byte.
fn condense(v: &Value) -> Value {
    match v {
        Value::String(s) if s.chars().count() > 600 => {
            let head: String = s.chars().take(240).collect();
            let hash = Sha256::digest(s.as_bytes());
            let hex: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
            Value::String(format!(
                "{head}…[{} chars, sha256 {hex}]",
                s.chars().count()
            ))
        }
        Value::Array(items) => Value::Array(items.iter().map(condense).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), condense(v))).collect())
        }
        other => other.clone(),
    }
}

fn check(name: &str) -> Transcript {
    let file: PathBuf = root().join("examples").join(format!("{name}.yaml"));
    let first = run(&file, &["--no-data"]);
    assert_eq!(first.code, 0, "{name} exits 0: {}", first.stderr);
    let second = run(&file, &["--no-data"]);
    assert_eq!(
        first.stdout, second.stdout,
        "{name}: two runs give the same bytes"
    );
    let events = events(&first.stdout);
    assert_eq!(
        events.last().map(|e| e["event"].clone()),
        Some(Value::from("end"))
    );
    // OUT-4: every tool result fits 2000 lines and 30,000 UTF-16 units, Continue line included.
    for e in events.iter().filter(|e| e["event"] == "tool_result") {
        let text = e["text"].as_str().unwrap_or_default();
        assert!(
            text.encode_utf16().count() <= 30_000,
            "{name}: {} over budget",
            e["call_id"]
        );
        assert!(
            text.lines().count() <= 2000,
            "{name}: {} over the line budget",
            e["call_id"]
        );
        if let Some(url) = e["continue"]["url"].as_str() {
            let last = text.rsplit('\n').next().unwrap_or_default();
            assert!(
                last.starts_with("[Continue") && last.contains(url),
                "{name}: Continue line"
            );
        }
    }
    let condensed: String = events
        .iter()
        .map(|e| serde_json::to_string_pretty(&condense(e)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    insta::assert_snapshot!(name, condensed);
    Transcript { events }
}

#[test]
fn todo_journey() {
    let t = check("todo-journey");
    assert!(t.text("c1").contains("write_file"), "c1 finds write_file");
    assert!(
        !t.tools(1).contains(&"write_file".to_owned()),
        "TS-2: absent from request 1"
    );
    assert!(
        t.tools(2).contains(&"write_file".to_owned()),
        "TS-2: present from request 2"
    );
    let delta = t
        .parts(2)
        .into_iter()
        .find(|p| p["type"] == "catalog_delta")
        .cloned();
    let delta = delta.expect("a catalog_delta in request 2");
    assert_eq!(delta["added"][0]["name"], "write_file");
    assert!(
        delta["added"][0]["signature"].as_str().is_some_and(
            |s| s.starts_with("interface Tools {") && s.contains("  write_file(input: {")
        )
    );
    let c2: String = t.text("c2").split_whitespace().collect();
    assert!(
        c2.contains("\"count\":2") && !c2.contains("metAna"),
        "CM-1: only the count and URL"
    );
    assert_eq!(
        t.body("c3").trim_end(),
        "TODO: buy milk\nTODO: call the bank"
    );
}

#[test]
fn recent_pruning() {
    let t = check("recent-pruning");
    let u: BTreeMap<&str, String> = ["s1", "s2", "s3", "s4", "s5"]
        .into_iter()
        .map(|k| (k, t.attachment(k, 0)))
        .collect();
    // PRJ-5: the 4th active image prunes nothing; the 5th removes the 2 oldest viewed.
    assert_eq!(
        t.images(5),
        vec![
            u["s1"].clone(),
            u["s2"].clone(),
            u["s3"].clone(),
            u["s4"].clone()
        ]
    );
    assert_eq!(
        t.images(6),
        vec![u["s3"].clone(), u["s4"].clone(), u["s5"].clone()]
    );
}

#[test]
fn continue_paging() {
    let t = check("continue-paging");
    assert!(
        t.continuation("r1")
            .is_some_and(|u| u.starts_with("artifact://")),
        "OUT-5"
    );
    assert!(
        t.continuation("r2")
            .is_none_or(|u| u.starts_with("artifact://")),
        "OUT-5"
    );
    for k in ["w1", "w2"] {
        assert!(
            t.continuation(k)
                .is_some_and(|u| u.starts_with("workspace:///home/workspace/long.log")),
            "OUT-6"
        );
    }
    assert!(
        t.continuation("w3").is_none(),
        "OUT-7: no anchor at the end"
    );
    let want: String = (1..=4500).map(|n| format!("entry {n}: ok\n")).collect();
    assert_eq!(
        format!("{}{}{}", t.body("w1"), t.body("w2"), t.body("w3")),
        want,
        "OUT-7"
    );
}

#[test]
fn paging_views() {
    let t = check("paging-views");
    for k in ["l1", "l2"] {
        let url = t.continuation(k).expect("a continuation");
        assert!(
            url.starts_with("local:///docs/manual.txt?")
                && url.contains("lines=10-2500")
                && url.contains("view=numbered"),
            "OUT-7 keeps the range: {url}"
        );
    }
    assert!(t.continuation("l3").is_none());
    let want: String = (10..=2500)
        .map(|n| format!("{n:>6}\tline {n} of the manual\n"))
        .collect();
    assert_eq!(
        format!("{}{}{}", t.body("l1"), t.body("l2"), t.body("l3")),
        want,
        "RES-3 + OUT-7"
    );
    assert!(
        t.continuation("n1")
            .is_some_and(|u| u.starts_with("artifact://read/")),
        "OUT-5"
    );
    assert!(
        t.text("n2").starts_with("read 1 line"),
        "OUT-5/OUT-8: later pages come from the snapshot"
    );
    assert!(
        t.text("n3").starts_with("read 2 line 1\n"),
        "RES-8: the live URL reads anew"
    );
    assert!(
        t.continuation("t1")
            .is_some_and(|u| u.starts_with("artifact://large_text/")),
        "OUT-5 for any tool"
    );
    assert!(t.is_error("e1") && t.is_error("e2"));
}

#[test]
fn text_protocol() {
    let t = check("text-protocol");
    assert_eq!(
        t.text("s1-call1"),
        "hello from the workspace\n",
        "TP-1 JSON form"
    );
    assert_eq!(t.text("s1-call2"), "42", "TP-1 XML form");
    assert_eq!(
        t.text("s2-call1"),
        "as a string",
        "TP-1 arguments as a JSON string"
    );
    assert!(
        t.is_error("s2-call2") && t.text("s2-call2").contains("malformed"),
        "TP-1 malformed"
    );
}

#[test]
fn vision_question() {
    let t = check("vision-question");
    for step in 1..=5 {
        assert!(
            t.images(step).is_empty(),
            "VIS-1/PRJ-12: no image enters the main context"
        );
    }
    assert!(t.texts(1).contains("not provided"), "PRJ-12");
    assert!(
        !t.texts(2).contains("visual content not provided"),
        "PRJ-9: stated once"
    );
    assert_eq!(t.text("v1"), "The sign says OPEN.", "VIS-1");
    assert!(
        !t.is_error("v2") && t.text("v2").contains("image input is off"),
        "READ-4"
    );
    assert!(
        t.is_error("v3") && t.text("v3").contains("empty"),
        "VIS-2 empty question"
    );
    assert!(
        t.is_error("v4") && t.text("v4").contains("upstream timeout"),
        "VIS-2 failure"
    );
}

#[test]
fn send_image() {
    let t = check("send-image");
    let shot = t.attachment("c1", 0);
    let chart = t.attachment("c1", 1);
    assert!(
        shot.starts_with("artifact://codemode/") && chart.starts_with("artifact://codemode/"),
        "CM-7"
    );
    let sent = t.of_kind("sent");
    assert_eq!(sent[0]["call_id"], "c2");
    let first = sent[0]["messages"][0].as_str().unwrap_or_default();
    assert!(first.contains(&shot) && first.contains(&chart), "SEND-1");
    assert_eq!(
        sent[0]["dropped"].as_array().map(Vec::len),
        Some(3),
        "SEND-2"
    );
    assert_eq!(
        sent[1]["call_id"], "c3",
        "CM-4: send_message from a program"
    );
    assert!(t.is_error("c4"), "CM-4: finish is direct-only");
}

#[test]
fn inbound_images() {
    let t = check("inbound-images");
    let m1: Vec<String> = t.of_kind("inbound")[0]["images"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|a| a["url"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(t.images(1), m1[..2].to_vec(), "PRJ-8 maxImageCount");
    assert_eq!(
        t.images(2),
        m1[..2].to_vec(),
        "PRJ-4 a failed step consumes nothing"
    );
    assert_eq!(
        t.images(3),
        m1[2..].to_vec(),
        "PRJ-8 waits in arrival order"
    );
    let reasons = t.texts(4);
    assert!(
        reasons.contains("maxImageBytes")
            && reasons.contains("broken")
            && reasons.contains("not downloaded"),
        "PRJ-9, RES-9: {reasons}"
    );
    assert!(t.images(4).is_empty(), "nothing of m2 is embedded");
    assert!(!t.texts(5).contains("maxImageBytes"), "PRJ-9: stated once");
    let m3 = t.of_kind("inbound")[2]["images"][0]["url"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    for step in 5..=9 {
        assert!(!t.images(step).contains(&m3), "PRJ-11: withdrawn");
    }
    assert!(
        t.images(7).is_empty(),
        "SEC-4: nothing reappears after a restart"
    );
    assert!(
        t.is_error("r1") && t.text("r1").contains("no asset"),
        "RES-9 cleanup"
    );
}

#[test]
fn provider_image_limits() {
    let t = check("provider-image-limits");
    let urls = |k: usize| -> Vec<String> {
        t.of_kind("inbound")[k]["images"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| a["url"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let (m1, m2) = (urls(0), urls(1));
    assert_eq!(t.images(1), m1[1..].to_vec(), "only the small photo");
    assert!(
        t.texts(1).contains(&format!(
            "[attachment: {}] image not provided: its 8200x8 pixels are over the anthropic limit of 8000 px per side",
            m1[0]
        )),
        "the provider's dimension limit: {}",
        t.texts(1)
    );
    assert!(
        !t.texts(2)
            .contains(&format!("[attachment: {}] image not provided", m1[0])),
        "a terminal reason is stated once"
    );
    assert_eq!(t.images(3), m2, "the refused request carried m2's photo");
    assert_eq!(t.of_kind("model_failed")[0]["step"], 3);
    assert!(t.images(4).is_empty(), "the next request leaves it out");
    assert!(
        t.texts(4).contains(&format!(
            "[attachment: {}] not provided: the provider refused the request that carried it (messages.4.content.1.image.source.base64: image exceeds 5 MB maximum",
            m2[0]
        )),
        "the provider's reason: {}",
        t.texts(4)
    );
    assert!(
        !t.texts(5)
            .contains(&format!("[attachment: {}] not provided", m2[0])),
        "stated once"
    );
}

#[test]
fn read_lifetimes() {
    let t = check("read-lifetimes");
    let page = t.attachment("p1", 0);
    let shot = t.attachment("p3", 0);
    assert_eq!(t.images(2), vec![page.clone()]);
    assert_eq!(
        t.images(3),
        vec![page.clone()],
        "PRJ-4: the aborted step consumed nothing"
    );
    assert_eq!(t.images(4), vec![page.clone(), shot.clone()], "READ-2");
    assert_eq!(t.images(5), vec![page.clone()], "PRJ-4 once, PRJ-6 retain");
    assert_eq!(
        t.images(7),
        vec![page, shot],
        "READ-3: read again, a new attachment"
    );
}

#[test]
fn codemode_limits() {
    let t = check("codemode-limits");
    assert!(t.is_error("k1") && t.is_error("k2"), "SEC-1");
    assert!(
        t.text("k3").starts_with("{\"ok\":true}")
            && t.text("k3").contains("hello from the program"),
        "CM-9"
    );
    assert_eq!(
        t.text("k4"),
        "undefined",
        "CM-1: nothing survives between programs"
    );
    assert_eq!(t.text("k5"), "5001", "CM-3: intermediate data is not cut");
    assert!(t.is_error("k6"), "CM-9: eval refused");
    assert!(
        t.is_error("k7") && t.text("k7").contains("lines"),
        "CM-2: input validated"
    );
}

#[test]
fn tool_discovery() {
    let t = check("tool-discovery");
    assert!(t.is_error("c1"), "TS-1: not loaded yet");
    assert!(t.text("c2").contains("calendar_create_event"), "TS-6");
    assert!(!t.tools(2).contains(&"calendar_create_event".to_owned()));
    assert!(
        t.tools(3).contains(&"calendar_create_event".to_owned()),
        "TS-2"
    );
    assert!(!t.is_error("c3"));
    assert!(t.text("c4").contains("weather_forecast"), "select:NAME");
    assert!(
        !t.is_error("c5") && t.text("c5").contains("Lisbon"),
        "TS-5: callable from a program"
    );
    // TS-3: the tool list is append-only.
    let before = t.tools(3);
    assert_eq!(t.tools(5)[..before.len()], before[..]);
}

#[test]
fn state_survives_across_runs() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = root().join("examples/read-lifetimes.yaml");
    let state = dir.path().to_string_lossy().into_owned();
    let first = run(&file, &["--no-data", "--state", &state]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let second = run(&file, &["--no-data", "--state", &state]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let ev = events(&second.stdout);
    let messages = ev[0]["request"]["messages"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert!(
        messages > 0,
        "the second run continues the stored conversation"
    );
}

#[test]
fn long_session() {
    let t = check("long-session");
    let requests = t.of_kind("request");
    let with = |key: &str| -> Vec<&Value> {
        requests
            .iter()
            .copied()
            .filter(|r| !r["context"][key].is_null())
            .collect()
    };
    // Folding: the oldest results, one batch per fold, k1 and c1 first.
    let folds = with("folded");
    assert!(folds.len() >= 2, "the session folds more than once");
    let first = folds[0];
    let folded: Vec<&str> = first["context"]["folded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(&folded[..2], ["k1", "c1"]);
    let context = &first["context"];
    assert!(
        context["estimated_before"].as_u64() > Some(20_000),
        "past foldAt × window"
    );
    assert!(
        context["estimated_before"].as_u64().unwrap()
            - context["estimated_after"].as_u64().unwrap()
            >= 6_000,
        "a fold frees at least foldAtLeast"
    );
    // A folded result is re-read through its stub's URL: the same text, byte for byte.
    assert_eq!(t.text("r1"), t.text("c1"));
    // k1's retained screenshot leaves the request with its folded source.
    let step = first["step"].as_u64().unwrap();
    assert_eq!(t.images(step - 1).len(), 1, "shown while k1 is in context");
    assert!(t.images(step).is_empty(), "gone with k1's fold");
    // A stub never changes once made (the prefix before the next fold stays the same).
    let stub_of = |r: &Value| -> Option<String> {
        r["request"]["messages"]
            .as_array()?
            .iter()
            .flat_map(|m| m["content"].as_array().into_iter().flatten())
            .find_map(|p| {
                (p["type"] == "tool_result" && p["call_id"] == "c1")
                    .then(|| p["text"].as_str().unwrap_or_default().to_owned())
            })
    };
    let stubs: Vec<String> = requests
        .iter()
        .filter(|r| r["step"].as_u64() >= Some(step))
        .filter_map(|r| stub_of(r))
        .collect();
    assert!(
        stubs.len() > 2
            && stubs
                .iter()
                .all(|s| *s == stubs[0] && s.starts_with("[folded"))
    );
    // Compaction: the scripted summary replaces the oldest turns.
    let compactions = with("compacted");
    assert_eq!(compactions.len(), 1);
    let c = compactions[0];
    assert_eq!(c["context"]["compacted"]["summarized"], true);
    let summary = c["request"]["messages"][0]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        summary.contains("Summary of those messages") && summary.contains("artifact://compacted/")
    );
    // Every request stays within the window's input (40,000 less the 4,000 of output).
    for r in requests.iter().filter(|r| !r["context"].is_null()) {
        assert!(r["context"]["estimated_after"].as_u64() < Some(36_000));
    }
}

#[test]
fn shared_checker_passes() {
    // The contract's own checker, run against this binary when the shared tools are present.
    let checker = root().join("../shared/tools/check_scenarios.py");
    if !checker.exists() {
        return;
    }
    let output = std::process::Command::new("python3")
        .arg(&checker)
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_ishiki"))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("3 passed, 0 failed"), "{stdout}");
    // The context engine's example meets the same contract (its `context` field is optional).
    let output = std::process::Command::new("python3")
        .arg(&checker)
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_ishiki"))
        .arg(root().join("examples/long-session.yaml"))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("PASS long-session"), "{stdout}");
}

#[test]
fn mcp_everything() {
    // The server is installed by `cargo xtask tools` (part of `cargo xtask ci`).
    let entry =
        root().join(".tools/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "run `cargo xtask tools` first: {} is missing",
        entry.display()
    );
    let t = check("mcp-everything");
    assert!(
        t.text("c1").contains("everything_get-tiny-image"),
        "TS-5: MCP tools join the pool"
    );
    let png = t.attachment("c2", 0);
    assert!(
        png.starts_with("artifact://everything_get-tiny-image/") && png.ends_with(".png"),
        "{png}"
    );
    assert_eq!(t.result("c2")["attachments"][0]["lifetime"], "once");
    assert_eq!(
        t.images(3),
        vec![png.clone()],
        "the direct call's image is embedded once"
    );
    assert_eq!(
        t.result("c3")["attachments"][0]["lifetime"],
        "recent",
        "CM-6 on an MCP block"
    );
    assert_eq!(t.images(4), vec![t.attachment("c3", 0)]);
    assert!(
        t.is_error("c5") && t.text("c5").contains("resourceId"),
        "isError stays readable"
    );
}
