//! Test data: the projected requests of the example scenarios.
//!
//! `tests/data/<scenario>.json` holds every request of one run of `examples/<scenario>.yaml`
//! (made by `ishiki scenario run`), packed: unique tools and messages once, each request as
//! indexes into them. Texts over 3000 characters were shortened to keep the files small.

use std::path::{Path, PathBuf};

use ishiki_core::{Message, Request, ToolSpec};
use serde::Deserialize;

#[derive(Deserialize)]
struct Packed {
    scenario: String,
    tools: Vec<ToolSpec>,
    messages: Vec<Message>,
    requests: Vec<PackedRequest>,
}

#[derive(Deserialize)]
struct PackedRequest {
    step: u64,
    tools: Vec<usize>,
    messages: Vec<usize>,
}

/// One projected request of an example scenario.
pub(crate) struct Case {
    pub(crate) scenario: String,
    pub(crate) step: u64,
    pub(crate) request: Request,
}

pub(crate) fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// Every request of every packed scenario, in scenario and step order.
pub(crate) fn cases() -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let packed: Packed = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        for r in &packed.requests {
            out.push(Case {
                scenario: packed.scenario.clone(),
                step: r.step,
                request: Request {
                    tools: r.tools.iter().map(|&i| packed.tools[i].clone()).collect(),
                    messages: r
                        .messages
                        .iter()
                        .map(|&i| std::sync::Arc::new(packed.messages[i].clone()))
                        .collect(),
                },
            });
        }
    }
    out
}

/// The requests of one scenario.
pub(crate) fn scenario(name: &str) -> Vec<Request> {
    cases()
        .into_iter()
        .filter(|c| c.scenario == name)
        .map(|c| c.request)
        .collect()
}

/// A small PNG that differs by `seed` (its width and colours).
pub(crate) fn png(seed: u32) -> Vec<u8> {
    let image = image::RgbImage::from_fn(8 + seed % 16, 8, |x, y| {
        image::Rgb([(x * 7 + seed) as u8, (y * 13) as u8, seed as u8])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    image.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}
