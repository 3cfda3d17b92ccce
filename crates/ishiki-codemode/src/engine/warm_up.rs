//! The warm-up run: a throwaway program on a throwaway engine, so a fresh worker's first
//! real program does not pay for faulting in code pages and growing allocator arenas.

use super::{Engine, Link, Reply};
use crate::config::EngineConfig;

/// A program touching the paths most programs take: tool call, promises, strings, arrays,
/// JSON, exceptions, console.
pub(super) const WARM_UP: &str = r#"
pub(super) const r = await tools.t({ a: [1, "x", true, null], b: { c: 1.5 } });
pub(super) const lines = String(r.text).split("\n").filter((l) => l.startsWith("a")).map((l) => l.trim());
let n = 0;
for (const l of lines) { n += l.length; }
pub(super) const o = { n, s: lines.join(","), j: JSON.parse(JSON.stringify({ k: [1, 2] })), i: r.text.indexOf("b") };
try { throw new Error("x"); } catch (e) { o.e = e.message; }
console.log("warm", o);
return o;
"#;

/// Answers the warm-up program's tool call at once.
pub(super) struct WarmUpLink(u64);

impl Link for WarmUpLink {
    fn console(&mut self, _line: &str) -> bool {
        true
    }

    fn call(&mut self, id: u64, _tool: &str, _input_json: &str) -> bool {
        self.0 = id;
        true
    }

    fn reply(&mut self) -> Option<Reply> {
        Some(Reply {
            id: self.0,
            result: Ok(serde_json::json!({ "text": "a1\nb2\na3" })),
        })
    }
}

/// Runs a throwaway program on a throwaway engine, so the first real program does not pay
/// for a fresh process: code pages faulted in, allocator arenas grown. Worth about half of a
/// small program's latency in a new worker.
pub(crate) fn warm_up(config: &EngineConfig) {
    if let Ok(mut engine) = Engine::new(config) {
        let _ = engine.run(WARM_UP, &["t".to_owned()], Box::new(WarmUpLink(0)));
    }
}
