//! Tools added and removed after start (TS-5: an MCP server's list changes): guarded against
//! replacing built-ins and invalid schemas; with toolsearch a new deferred tool waits in the
//! pool and a removed one leaves it without any announcement.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ishiki_core::{
    Durability, ModelsDoc, Profile, Runtime, Tool, ToolContext, ToolDef, ToolError, WorkerSpawn,
    assemble,
};
use serde_json::{Value, json};

use super::runtime::clock_at;

#[derive(Debug)]
struct Named {
    def: ToolDef,
}

impl Named {
    fn deferred(name: &str, description: &str) -> Arc<dyn Tool> {
        Arc::new(Named {
            def: ToolDef::new(name, description, json!({ "type": "object" })),
        })
    }
}

#[async_trait]
impl Tool for Named {
    fn definition(&self) -> ToolDef {
        self.def.clone()
    }

    async fn execute(&self, input: Value, _context: &ToolContext) -> Result<Value, ToolError> {
        Ok(input)
    }
}

async fn runtime(dir: &std::path::Path, profile: &str) -> Runtime {
    let profile = Profile::from_yaml(profile).expect("a valid profile");
    let models = ModelsDoc::from_yaml("models:\n  main: { input: [text] }\n").expect("models");
    let assembly = assemble(profile, models, "main").expect("assembles");
    Runtime::builder(assembly, dir)
        .clock(clock_at(Duration::ZERO))
        .codemode_worker(WorkerSpawn::InProcess)
        .durability(Durability::Normal)
        .build()
        .await
        .expect("the runtime builds")
}

#[tokio::test]
async fn ts5_built_in_tools_and_invalid_schemas_cannot_be_added_or_removed() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut rt = runtime(dir.path(), "").await;
    let read = rt
        .add_tool(Named::deferred("read", "not the real read"))
        .expect_err("read is built in");
    assert_eq!(
        read.message(),
        "the tool `read` is built in and cannot be replaced"
    );
    let broken = Arc::new(Named {
        def: ToolDef::new("broken", "bad schema", json!({ "type": 12 })),
    });
    let error = rt.add_tool(broken).expect_err("an invalid schema");
    assert!(
        error
            .message()
            .starts_with("tool `broken` has an invalid input schema"),
        "{error}"
    );
    assert!(!rt.remove_tool("read"), "built-ins stay");
    assert!(!rt.remove_tool("nothing"), "nothing to remove");
}

/// Whether a tool is built in is known from where the runtime made it, not from the `origin`
/// label of its definition (issue 28, point 3): a plug-in tool that labels itself `builtin`
/// can still be replaced and removed, and the codemode tool cannot.
#[tokio::test]
async fn a_tool_that_labels_itself_builtin_is_still_a_registered_one() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut rt = runtime(dir.path(), "codemode: { enable: true }\n").await;
    let labelled = |description: &str| -> Arc<dyn Tool> {
        Arc::new(Named {
            def: ToolDef::new("lookup", description, json!({ "type": "object" }))
                .with_origin("builtin"),
        })
    };
    rt.add_tool(labelled("first")).expect("added");
    rt.add_tool(labelled("second"))
        .expect("a registered tool is replaced, whatever its label says");
    assert!(rt.remove_tool("lookup"), "and removed");
    let codemode = rt
        .add_tool(Named::deferred("codemode", "not the real one"))
        .expect_err("codemode is built in");
    assert_eq!(
        codemode.message(),
        "the tool `codemode` is built in and cannot be replaced"
    );
    assert!(!rt.remove_tool("codemode"));
}

/// A definition the catalog would refuse (an empty name, a space in the name, a schema that
/// is not an object) never reaches the catalog or a delta: refused at build and after start.
#[tokio::test]
async fn tools_the_catalog_would_refuse_are_refused_at_build_and_after_start() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut rt = runtime(dir.path(), "").await;
    let bad = [
        (
            ToolDef::new("", "no name", json!({ "type": "object" })),
            "tool name is empty",
        ),
        (
            ToolDef::new("has space", "a space", json!({ "type": "object" })),
            "tool name \"has space\" contains whitespace or control characters",
        ),
        (
            ToolDef::new("number", "schema 42", json!(42)),
            "input_schema",
        ),
    ];
    for (def, says) in bad {
        let name = def.name.clone();
        let error = rt
            .add_tool(Arc::new(Named { def: def.clone() }))
            .expect_err("refused after start");
        assert!(
            error.message().starts_with("a tool cannot be added: ")
                && error.message().contains(says),
            "{error}"
        );
        assert!(!rt.remove_tool(&name), "`{name}` never joined");

        let other = tempfile::tempdir().expect("a temp dir");
        let models = ModelsDoc::from_yaml("models:\n  main: { input: [text] }\n").expect("models");
        let assembly = assemble(Profile::default(), models, "main").expect("assembles");
        let built = Runtime::builder(assembly, other.path())
            .codemode_worker(WorkerSpawn::InProcess)
            .tool(Arc::new(Named { def }))
            .build()
            .await
            .expect_err("refused at build");
        assert!(built.message().contains(says), "{built}");
    }
}

#[tokio::test]
async fn ts5_with_toolsearch_a_new_tool_waits_in_the_pool_and_a_removed_one_leaves_it_silently() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut rt = runtime(dir.path(), "toolsearch: { enable: true }\n").await;
    let first = rt.prepare().await.expect("prepare");
    let tools_before: Vec<String> = first.request.tools.iter().map(|t| t.name.clone()).collect();
    rt.abandon(first);

    rt.add_tool(Named::deferred("weather_lookup", "Look up the weather"))
        .expect("added");
    let next = rt.prepare().await.expect("prepare");
    let tools: Vec<String> = next.request.tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(tools, tools_before, "a deferred tool waits in the pool");
    assert_eq!(next.request.messages.len(), 0, "nothing announced");
    rt.abandon(next);

    assert!(rt.remove_tool("weather_lookup"));
    let after = rt.prepare().await.expect("prepare");
    assert_eq!(
        after.request.messages.len(),
        0,
        "a pooled tool leaves silently"
    );
    let tools: Vec<String> = after.request.tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(tools, tools_before);
}
