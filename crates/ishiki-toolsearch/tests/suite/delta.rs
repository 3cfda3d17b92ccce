//! TS-3/TS-4: what a step announces about tools that joined, and what a search returns — the
//! texts and shapes a model reads, as snapshots.

use insta::{assert_json_snapshot, assert_snapshot};
use ishiki_toolsearch::{Catalog, DeltaForm, ToolDef, ToolIndex, delta_text};
use serde_json::json;

fn journey_delta() -> Vec<ToolDef> {
    let mut catalog = Catalog::with_toolsearch();
    catalog.add(ToolDef {
        resident: true,
        ..ToolDef::new("search", "Find tools by what they do.", json!({}))
    });
    catalog.add(ToolDef::new(
        "write_file",
        "Write a file into the workspace. Overwrites an existing file.",
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "Absolute path under /home/workspace" },
                "content": { "type": "string" }
            },
            "required": ["path", "content"]
        }),
    ));
    catalog.add(ToolDef {
        output_schema: Some(json!({ "type": "object", "properties": { "text": { "type": "string" } }, "required": ["text"] })),
        origin: Some("mcp:vision".to_owned()),
        ..ToolDef::new(
            "ocr",
            "Recognize the text in an image.",
            json!({
                "type": "object",
                "properties": { "data": { "type": "string", "contentEncoding": "base64", "description": "The image bytes" } },
                "required": ["data"]
            }),
        )
    });
    catalog.begin_step();
    catalog.search("select:write_file,ocr", 5);
    catalog.begin_step().delta
}

#[test]
fn ts4_delta_text_with_signatures() {
    assert_snapshot!(delta_text(&journey_delta(), DeltaForm::Signatures));
}

#[test]
fn ts3_delta_text_without_signatures() {
    assert_snapshot!(delta_text(&journey_delta(), DeltaForm::Described));
}

#[test]
fn ts3_no_delta_no_text() {
    assert_eq!(delta_text(&[], DeltaForm::Signatures), "");
}

#[test]
fn ts1_search_hits_name_and_short_description() {
    let tools = super::retrieval::tools();
    let index = ToolIndex::build(&tools);
    assert_json_snapshot!(index.search("send a message to the team channel", 5), {
        "[].score" => insta::rounded_redaction(3),
    });
}
