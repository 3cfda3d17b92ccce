//! The pool and the catalog's step boundaries: TS-1, TS-2, TS-3, TS-5, and persistence.

use ishiki_toolsearch::{Catalog, CatalogState, StepCatalog, ToolDef};
use serde_json::json;

fn tool(name: &str, description: &str) -> ToolDef {
    ToolDef::new(
        name,
        description,
        json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    )
}

fn resident(name: &str, description: &str) -> ToolDef {
    ToolDef {
        resident: true,
        ..tool(name, description)
    }
}

fn names(tools: &[ToolDef]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

/// The catalog of the todo-journey scenario: built-in residents and a deferred `write_file`.
fn journey() -> Catalog {
    let mut catalog = Catalog::with_toolsearch();
    for name in [
        "read",
        "search",
        "codemode",
        "send_message",
        "finish",
        "wait",
    ] {
        catalog.add(resident(name, &format!("the built-in {name} tool")));
    }
    catalog.add(tool("write_file", "Write a file into the workspace."));
    catalog.add(tool("echo", "Return the value it is given."));
    catalog
}

#[test]
fn ts1_deferred_tools_wait_in_the_pool() {
    let mut catalog = journey();
    let step = catalog.begin_step();
    assert_eq!(
        names(&step.tools),
        [
            "read",
            "search",
            "codemode",
            "send_message",
            "finish",
            "wait"
        ]
    );
    assert!(step.delta.is_empty());
    assert!(!catalog.is_available("write_file"));
    // The definition is known, only not offered.
    assert_eq!(catalog.get("write_file").unwrap().name, "write_file");
}

#[test]
fn ts1_resident_tools_are_not_search_results() {
    let mut catalog = journey();
    catalog.begin_step();
    let hits = catalog.search("read", 5);
    assert!(hits.iter().all(|h| h.name != "read"), "{hits:?}");
}

#[test]
fn ts2_todo_journey_write_file_joins_from_request_two() {
    let mut catalog = journey();
    // Request 1: its response calls search({ query: "write_file" }).
    let request1 = catalog.begin_step();
    assert!(!names(&request1.tools).contains(&"write_file"));
    let hits = catalog.search("write_file", 5);
    assert_eq!(hits[0].name, "write_file");
    assert_eq!(hits[0].description, "Write a file into the workspace.");
    // Still request 1: the hit is not callable in the step that found it.
    assert!(!catalog.is_available("write_file"));
    assert!(!catalog.available().iter().any(|t| t.name == "write_file"));
    // Request 2 carries it, announced as the delta.
    let request2 = catalog.begin_step();
    assert_eq!(request2.tools.last().unwrap().name, "write_file");
    assert_eq!(names(&request2.delta), ["write_file"]);
    // Request 3 still has it, with nothing new to announce.
    let request3 = catalog.begin_step();
    assert_eq!(request3.tools, request2.tools);
    assert!(request3.delta.is_empty());
}

#[test]
fn ts2_searching_again_announces_nothing_new() {
    let mut catalog = journey();
    catalog.begin_step();
    catalog.search("select:write_file", 5);
    catalog.search("select:write_file", 5);
    let step = catalog.begin_step();
    assert_eq!(names(&step.delta), ["write_file"]);
    // Found again later: returned (the model may re-read it) but not added twice.
    let hits = catalog.search("write_file", 5);
    assert_eq!(hits[0].name, "write_file");
    let step = catalog.begin_step();
    assert!(step.delta.is_empty());
    assert_eq!(
        step.tools.iter().filter(|t| t.name == "write_file").count(),
        1
    );
}

#[test]
fn ts2_a_search_before_the_first_step_joins_at_the_first_step() {
    let mut catalog = journey();
    catalog.search("select:echo", 5);
    let step = catalog.begin_step();
    assert_eq!(step.step, 1);
    assert_eq!(names(&step.tools).last(), Some(&"echo"));
    assert_eq!(names(&step.delta), ["echo"]);
}

#[test]
fn ts3_the_list_is_append_only_in_discovery_order() {
    let mut catalog = Catalog::with_toolsearch();
    catalog.add(resident("search", "Find tools"));
    for name in ["alpha", "beta", "gamma", "delta"] {
        catalog.add(tool(name, &format!("the {name} tool")));
    }
    let mut previous: Vec<ToolDef> = catalog.begin_step().tools;
    // Discover in an order unlike the add order, some in one step.
    for query in ["select:gamma", "select:delta,alpha", "select:beta"] {
        catalog.search(query, 5);
        let step = catalog.begin_step();
        assert_eq!(
            step.tools[..previous.len()],
            previous[..],
            "a prefix changed"
        );
        assert_eq!(step.tools[previous.len()..], step.delta[..]);
        previous = step.tools;
    }
    assert_eq!(
        names(&previous),
        ["search", "gamma", "delta", "alpha", "beta"]
    );
    let available: Vec<&str> = catalog
        .available()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(available, names(&previous));
}

#[test]
fn ts5_tools_added_later_enter_pool_or_join_next_step() {
    let mut catalog = journey();
    catalog.begin_step();
    // An MCP server connects in the middle of the conversation.
    catalog.add(ToolDef {
        origin: Some("mcp:everything".to_owned()),
        ..tool(
            "printEnv",
            "Prints all environment variables, helpful for debugging MCP server configuration",
        )
    });
    catalog.add(resident("send_sms", "Send a text message"));
    assert!(
        !catalog.is_available("send_sms"),
        "a resident added mid-step waits for the next"
    );
    let step = catalog.begin_step();
    assert_eq!(names(&step.delta), ["send_sms"]);
    assert_eq!(names(&step.tools).last(), Some(&"send_sms"));
    // The deferred one is in the pool and found by what it does.
    let hits = catalog.search("show environment variables", 5);
    assert_eq!(hits[0].name, "printEnv");
    let step = catalog.begin_step();
    assert_eq!(names(&step.delta), ["printEnv"]);
}

#[test]
fn ts1_without_toolsearch_every_tool_is_available() {
    let mut catalog = Catalog::without_toolsearch();
    catalog.add(tool("write_file", "Write a file"));
    catalog.add(resident("read", "Read a URL"));
    let step = catalog.begin_step();
    assert_eq!(names(&step.tools), ["write_file", "read"]);
    assert!(step.delta.is_empty());
    // Search still finds, but changes nothing.
    assert_eq!(catalog.search("save a file", 5)[0].name, "write_file");
    assert!(catalog.begin_step().delta.is_empty());
}

fn replay(catalog: &mut Catalog, state: &CatalogState) -> StepCatalog {
    catalog.restore(state);
    catalog.begin_step()
}

#[test]
fn ts3_restore_rebuilds_the_same_list_without_a_delta() {
    let mut catalog = journey();
    catalog.begin_step();
    catalog.search("select:echo", 5);
    let before = catalog.begin_step();
    catalog.search("select:write_file", 5); // found, not joined yet
    let state = catalog.state();
    assert_eq!(state.step, 2);
    assert_eq!(state.pending, ["write_file"]);
    let json = serde_json::to_string(&state).unwrap();

    // A restart: the same tools are added again, then the state restored.
    let mut restarted = journey();
    let state: CatalogState = serde_json::from_str(&json).unwrap();
    restarted.restore(&state);
    let available: Vec<ToolDef> = restarted.available().into_iter().cloned().collect();
    assert_eq!(available, before.tools);
    let step = restarted.begin_step();
    assert_eq!(step.step, 3);
    assert_eq!(step.tools[..before.tools.len()], before.tools[..]);
    assert_eq!(
        names(&step.delta),
        ["write_file"],
        "the pending discovery survives"
    );
}

#[test]
fn ts3_restore_appends_tools_that_arrive_late() {
    let mut catalog = journey();
    catalog.add(tool("mcp_tool", "from a server"));
    catalog.begin_step();
    catalog.search("select:mcp_tool", 5);
    catalog.search("select:echo", 5);
    catalog.begin_step();
    let state = catalog.state();

    // After the restart the MCP server is not connected yet, and a resident is new.
    let mut restarted = journey();
    restarted.add(resident("new_builtin", "added in this version"));
    let step = replay(&mut restarted, &state);
    assert!(!names(&step.tools).contains(&"mcp_tool"));
    assert_eq!(names(&step.delta), ["new_builtin"]);
    assert_eq!(
        restarted.state().pending,
        ["mcp_tool"],
        "kept for a later save"
    );
    // The server connects: the tool joins at the end, never in the middle.
    restarted.add(tool("mcp_tool", "from a server"));
    let step = restarted.begin_step();
    assert_eq!(names(&step.delta), ["mcp_tool"]);
    assert_eq!(names(&step.tools).last(), Some(&"mcp_tool"));
}

#[test]
fn ts3_an_empty_state_is_a_fresh_conversation() {
    let mut catalog = journey();
    let step = replay(&mut catalog, &CatalogState::default());
    assert_eq!(step.step, 1);
    assert_eq!(step.tools.len(), 6);
    assert!(step.delta.is_empty());
}

#[test]
fn try_add_refuses_definitions_validate_rejects_and_they_never_reach_a_delta() {
    let mut catalog = Catalog::with_toolsearch();
    for bad in [
        ToolDef::new("", "no name", json!({})),
        ToolDef::new("has space", "a space", json!({})),
        ToolDef::new("numbers", "schema is a number", json!(42)),
    ] {
        let name = bad.name.clone();
        let err = catalog.try_add(bad).expect_err(&name);
        assert_eq!(
            err.kind(),
            ishiki_toolsearch::ToolsearchErrorKind::InvalidDefinition
        );
    }
    catalog
        .try_add(tool("write_file", "Write a file into the workspace."))
        .expect("a valid definition");
    catalog.begin_step();
    assert_eq!(catalog.search("space number name file", 5).len(), 1);
    let step = catalog.begin_step();
    assert_eq!(names(&step.delta), ["write_file"]);
}

#[test]
fn peek_finds_without_changing_the_catalog() {
    let mut catalog = journey();
    catalog.begin_step();
    let hits = catalog.peek("save a file", 5);
    assert_eq!(hits[0].name, "write_file");
    assert!(catalog.begin_step().delta.is_empty(), "nothing joined");
    // The same query through `search` does change it.
    assert_eq!(catalog.search("save a file", 5), hits);
    assert_eq!(names(&catalog.begin_step().delta), ["write_file"]);
}

#[test]
fn weak_hits_stay_in_the_pool_under_a_relative_score_floor() {
    let build = |floor: f64| {
        let mut catalog = Catalog::with_toolsearch();
        catalog.set_min_relative_score(floor);
        catalog.add(tool(
            "write_file",
            "Write text content to a file on disk; creates the file.",
        ));
        catalog.add(tool(
            "http_get",
            "Fetch a url; the response body as a file.",
        ));
        catalog.add(tool("send_email", "Send an email message."));
        catalog
    };
    let everything = build(0.0).search("write text to a file", 5);
    assert_eq!(everything.len(), 2, "{everything:?}");
    assert!(
        everything[1].score < everything[0].score * 0.5,
        "{everything:?}"
    );
    let mut strict = build(0.5);
    let hits = strict.search("write text to a file", 5);
    assert_eq!(names_of(&hits), ["write_file"]);
    assert_eq!(names(&strict.begin_step().delta), ["write_file"]);
    // An explicit selection has score 0 everywhere and is never cut.
    assert_eq!(strict.search("select:http_get,send_email", 5).len(), 2);
}

fn names_of(hits: &[ishiki_toolsearch::Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.name.as_str()).collect()
}

#[test]
fn tool_def_builder_and_named_catalog_constructors() {
    let def = ToolDef::new("get", "Fetch a url", json!({"type": "object"}))
        .with_origin("mcp:web")
        .with_output_schema(json!({"type": "string"}))
        .with_resident(true);
    assert_eq!(def.origin.as_deref(), Some("mcp:web"));
    assert_eq!(def.output_schema, Some(json!({"type": "string"})));
    assert!(def.resident);
    assert!(Catalog::with_toolsearch().is_enabled());
    let mut plain = Catalog::without_toolsearch();
    assert!(!plain.is_enabled());
    plain.add(def.with_resident(false));
    assert_eq!(
        names(&plain.begin_step().tools),
        ["get"],
        "no pool: offered at once"
    );
}
