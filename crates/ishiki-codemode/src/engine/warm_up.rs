//! The warm-up run: a throwaway program on a throwaway engine, so a fresh worker's first
//! real program does not pay for faulting in code pages and growing allocator arenas.

use super::{Engine, Link, Reply};
use crate::config::EngineConfig;

/// A program touching the paths most programs take: tool call, promises, strings, arrays,
/// JSON, exceptions, console.
pub(super) const WARM_UP: &str = r#"
const r = await tools.t({ a: [1, "x", true, null], b: { c: 1.5 } });
const lines = String(r.text).split("\n").filter((l) => l.startsWith("a")).map((l) => l.trim());
let n = 0;
for (const l of lines) { n += l.length; }
const o = { n, s: lines.join(","), j: JSON.parse(JSON.stringify({ k: [1, 2] })), i: r.text.indexOf("b") };
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
    let _ = run(config);
}

/// Builds and drops a throwaway engine: in a worker forked from a warm server, this makes
/// private the allocator and stack pages a program writes, which would otherwise be copied on
/// write one fault at a time while the program runs (codemode bench: a warm forked worker's
/// program 1.2 ms without it). Running the warm-up program in the forked worker as well made
/// its program about 15% faster still but its start 1.5 ms dearer, and the scale bench 20%
/// slower (984 against 1,224 steps/s at 64 tasks): a start is CPU every program pays, so the
/// cheaper one is chosen.
pub(crate) fn touch_engine_pages(config: &EngineConfig) {
    drop(Engine::new(config));
}

fn run(config: &EngineConfig) -> Result<serde_json::Value, String> {
    let mut engine = Engine::new(config).map_err(|e| e.message().to_owned())?;
    engine
        .run(WARM_UP, &["t".to_owned()], Box::new(WarmUpLink(0)))
        .map(|finished| serde_json::from_str(&finished.json).unwrap_or_default())
        .map_err(|e| e.message().to_owned())
}

#[cfg(test)]
mod tests {
    /// The warm-up must run to its end to warm anything: a syntax error (which it once was,
    /// after a refactoring edited the JavaScript text) only builds an engine.
    #[test]
    fn the_warm_up_program_runs_to_its_return() {
        let config = crate::config::EngineConfig::from_config(&crate::SandboxConfig::default());
        let value = super::run(&config).expect("the warm-up runs");
        assert_eq!(value["s"], "a1,a3");
        assert_eq!(value["e"], "x");
        assert_eq!(value["j"], serde_json::json!({ "k": [1, 2] }));
    }
}
