//! TS-4: TypeScript declarations of realistic tool schemas, as insta snapshots (the text a
//! model reads when it writes a codemode program).

use insta::assert_snapshot;
use ishiki_toolsearch::{ToolDef, signature, signatures};
use serde_json::{Value, json};

fn def(name: &str, description: &str, input: Value) -> ToolDef {
    ToolDef::new(name, description, input)
}

fn with_output(mut def: ToolDef, output: Value) -> ToolDef {
    def.output_schema = Some(output);
    def
}

#[test]
fn ts4_filesystem_write_file() {
    let d = def(
        "write_file",
        "Write a file into the workspace.",
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "Absolute path" },
                "content": { "type": "string" }
            },
            "required": ["path", "content"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_filesystem_edit_file_array_of_objects() {
    let d = def(
        "edit_file",
        "Make line-based edits to a text file. Each edit replaces exact line sequences with new content.\nReturns a git-style diff showing the changes made.",
        json!({
            "type": "object",
            "properties": {
                "path": { "type": "string" },
                "edits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "oldText": { "type": "string", "description": "Text to search for - must match exactly" },
                            "newText": { "type": "string", "description": "Text to replace with" }
                        },
                        "required": ["oldText", "newText"],
                        "additionalProperties": false
                    }
                },
                "dryRun": { "type": "boolean", "default": false, "description": "Preview changes using git-style diff format" }
            },
            "required": ["path", "edits"],
            "additionalProperties": false,
            "$schema": "http://json-schema.org/draft-07/schema#"
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_git_log_bounds_and_formats() {
    let d = def(
        "git_log",
        "Shows the commit history.",
        json!({
            "type": "object",
            "properties": {
                "repo_path": { "type": "string" },
                "max_count": { "type": "integer", "minimum": 1, "maximum": 1000, "default": 10 },
                "since": { "type": "string", "format": "date-time", "description": "Only commits after this time" },
                "paths": { "type": "array", "items": { "type": "string" }, "minItems": 1 }
            },
            "required": ["repo_path"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_github_mcp_draft07_with_output() {
    let d = with_output(
        ToolDef {
            origin: Some("mcp:github".to_owned()),
            ..def(
                "create_pull_request",
                "Create a new pull request in a GitHub repository",
                json!({
                    "$schema": "http://json-schema.org/draft-07/schema#",
                    "type": "object",
                    "properties": {
                        "owner": { "type": "string", "description": "Repository owner (username or organization)" },
                        "repo": { "type": "string", "description": "Repository name" },
                        "title": { "type": "string", "description": "Pull request title" },
                        "head": { "type": "string", "description": "The name of the branch where your changes are implemented" },
                        "base": { "type": "string", "description": "The name of the branch you want the changes pulled into" },
                        "body": { "type": "string" },
                        "draft": { "type": "boolean" },
                        "maintainer_can_modify": { "type": "boolean" }
                    },
                    "required": ["owner", "repo", "title", "head", "base"],
                    "additionalProperties": false
                }),
            )
        },
        json!({
            "type": "object",
            "properties": {
                "number": { "type": "integer" },
                "html_url": { "type": "string", "format": "uri" },
                "state": { "enum": ["open", "closed"] }
            },
            "required": ["number", "html_url", "state"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_http_request_enums_records_and_unions() {
    let d = def(
        "http_request",
        "Send an HTTP request and return the status, headers and body.",
        json!({
            "type": "object",
            "properties": {
                "method": { "type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] },
                "url": { "type": "string", "format": "uri" },
                "headers": { "type": "object", "additionalProperties": { "type": "string" } },
                "body": {
                    "description": "A text body, or a JSON value sent as application/json",
                    "oneOf": [{ "type": "string" }, { "type": "object" }, { "type": "array" }]
                },
                "timeout_ms": { "type": ["integer", "null"], "description": "No timeout when null" }
            },
            "required": ["method", "url"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_web_search_structured_output() {
    let d = with_output(
        def(
            "web_search",
            "Search the web and return the top results.",
            json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string" },
                    "count": { "type": "integer", "maximum": 20 },
                    "freshness": { "type": "string", "enum": ["day", "week", "month", "year"] }
                },
                "required": ["query"]
            }),
        ),
        json!({
            "type": "object",
            "properties": {
                "results": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "title": { "type": "string" },
                            "url": { "type": "string" },
                            "snippet": { "type": "string", "description": "Text around the match" }
                        },
                        "required": ["title", "url"]
                    }
                },
                "total": { "type": "integer" }
            },
            "required": ["results"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_calendar_nested_objects_unions_and_enums() {
    let d = def(
        "calendar_create_event",
        "Create an event in the user's calendar.",
        json!({
            "type": "object",
            "properties": {
                "title": { "type": "string" },
                "start": {
                    "description": "All-day events take a date, others a date-time",
                    "oneOf": [
                        { "type": "object", "properties": { "date": { "type": "string", "format": "date" } }, "required": ["date"] },
                        {
                            "type": "object",
                            "properties": {
                                "dateTime": { "type": "string", "format": "date-time" },
                                "timeZone": { "type": "string", "description": "IANA name, e.g. Europe/Paris" }
                            },
                            "required": ["dateTime"]
                        }
                    ]
                },
                "attendees": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "email": { "type": "string", "format": "email" },
                            "optional": { "type": "boolean" },
                            "response": { "enum": ["needsAction", "accepted", "declined", "tentative"] }
                        },
                        "required": ["email"]
                    }
                },
                "reminders": {
                    "type": "object",
                    "properties": {
                        "useDefault": { "type": "boolean" },
                        "overrides": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "method": { "enum": ["email", "popup"] },
                                    "minutes": { "type": "integer", "minimum": 0 }
                                },
                                "required": ["method", "minutes"]
                            },
                            "maxItems": 5
                        }
                    }
                },
                "visibility": { "type": "string", "enum": ["default", "public", "private", "confidential"], "default": "default" }
            },
            "required": ["title", "start"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_pydantic_defs_refs_and_nullable_any_of() {
    let d = def(
        "book_meeting_room",
        "Book a meeting room.",
        json!({
            "$defs": {
                "Attendee": {
                    "description": "Someone invited to the meeting.",
                    "properties": {
                        "name": { "title": "Name", "type": "string" },
                        "email": { "title": "Email", "type": "string" }
                    },
                    "required": ["name", "email"],
                    "title": "Attendee",
                    "type": "object"
                },
                "Room": { "enum": ["small", "large", "boardroom"], "title": "Room", "type": "string" }
            },
            "properties": {
                "room": { "$ref": "#/$defs/Room" },
                "organizer": { "allOf": [{ "$ref": "#/$defs/Attendee" }], "description": "Who books the room" },
                "attendees": { "items": { "$ref": "#/$defs/Attendee" }, "title": "Attendees", "type": "array" },
                "note": { "anyOf": [{ "type": "string" }, { "type": "null" }], "default": null, "title": "Note" }
            },
            "required": ["room", "organizer"],
            "title": "BookMeetingRoomInput",
            "type": "object"
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_draft07_definitions_recursive_tree() {
    let d = def(
        "directory_tree",
        "Get a recursive tree view of files and directories.",
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "path": { "type": "string" },
                "seed": { "$ref": "#/definitions/Node" }
            },
            "required": ["path"],
            "definitions": {
                "Node": {
                    "type": "object",
                    "description": "A file or a directory with its children.",
                    "properties": {
                        "name": { "type": "string" },
                        "type": { "enum": ["file", "directory"] },
                        "children": { "type": "array", "items": { "$ref": "#/definitions/Node" } }
                    },
                    "required": ["name", "type"]
                }
            }
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_openapi_nullable_and_type_arrays() {
    let d = def(
        "update_contact",
        "Update a CRM contact; null clears a field.",
        json!({
            "type": "object",
            "properties": {
                "id": { "type": "string" },
                "phone": { "type": "string", "nullable": true },
                "company": { "type": ["string", "null"] },
                "score": { "type": ["number", "string"], "description": "A number, or a label like \"hot\"" },
                "tags": { "type": ["array", "null"], "items": { "type": "string" } }
            },
            "required": ["id"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_discriminated_union_with_consts() {
    let d = def(
        "send_notification",
        "Notify someone on a channel of their choice.",
        json!({
            "type": "object",
            "properties": {
                "channel": {
                    "oneOf": [
                        {
                            "type": "object",
                            "properties": { "kind": { "const": "email" }, "address": { "type": "string", "format": "email" } },
                            "required": ["kind", "address"]
                        },
                        {
                            "type": "object",
                            "properties": { "kind": { "const": "sms" }, "phone": { "type": "string", "pattern": "^\\+[1-9]\\d{1,14}$" } },
                            "required": ["kind", "phone"]
                        },
                        {
                            "type": "object",
                            "properties": { "kind": { "const": "push" }, "deviceIds": { "type": "array", "items": { "type": "string" } } },
                            "required": ["kind", "deviceIds"]
                        }
                    ]
                },
                "message": { "type": "string", "maxLength": 500 },
                "priority": { "enum": [1, 2, 3], "description": "1 is urgent" }
            },
            "required": ["channel", "message"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_tuples_pattern_properties_and_all_of() {
    let d = def(
        "plot_points",
        "Draw points on a chart.",
        json!({
            "type": "object",
            "properties": {
                "points": { "type": "array", "items": { "type": "array", "prefixItems": [{ "type": "number" }, { "type": "number" }] } },
                "legacyRange": { "type": "array", "items": [{ "type": "integer" }, { "type": "integer" }] },
                "styles": { "type": "object", "patternProperties": { "^series-": { "type": "string" } }, "additionalProperties": false },
                "axis": {
                    "allOf": [
                        { "type": "object", "properties": { "label": { "type": "string" } } },
                        { "type": "object", "properties": { "log": { "type": "boolean" } }, "required": ["log"] }
                    ]
                }
            },
            "required": ["points"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_names_that_are_not_identifiers() {
    let d = def(
        "github.create-issue",
        "Create an issue.",
        json!({
            "type": "object",
            "properties": {
                "content-type": { "type": "string" },
                "x.y": { "type": "number" },
                "valid_name": { "type": "boolean" }
            },
            "required": ["content-type"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_long_descriptions_and_comment_escapes() {
    let d = def(
        "run_query",
        "Run a read-only SQL query.\n\nRules:\n- only SELECT statements; comments like /* this */ are stripped\n- at most 1000 rows are returned",
        json!({
            "type": "object",
            "properties": {
                "sql": { "type": "string", "description": "The statement.\nUse $1, $2 for parameters. Never close a comment with */ inside." },
                "params": { "type": "array", "items": {} , "deprecated": true }
            },
            "required": ["sql"]
        }),
    );
    assert_snapshot!(signature(&d));
}

#[test]
fn ts4_tools_without_parameters() {
    let none = def(
        "list_calendars",
        "List all calendars.",
        json!({ "type": "object", "properties": {} }),
    );
    let open = def("ping", "", json!({ "type": "object" }));
    let anything = def("log_event", "Log any JSON value.", json!({}));
    assert_snapshot!(signatures([&none, &open, &anything]));
}

#[test]
fn ts4_shared_definitions_are_declared_once_and_clashes_renamed() {
    let attendee = json!({ "type": "object", "properties": { "email": { "type": "string" } }, "required": ["email"] });
    let other_attendee = json!({ "type": "object", "properties": { "id": { "type": "integer" } }, "required": ["id"] });
    let schema = |a: &Value| {
        json!({
            "type": "object",
            "properties": { "who": { "$ref": "#/$defs/Attendee" } },
            "required": ["who"],
            "$defs": { "Attendee": a }
        })
    };
    let a = def("invite", "Invite someone.", schema(&attendee));
    let b = def("uninvite", "Uninvite someone.", schema(&attendee));
    let c = def(
        "legacy_invite",
        "Invite by numeric id.",
        schema(&other_attendee),
    );
    assert_snapshot!(signatures([&a, &b, &c]));
}

/// A schema of `levels` levels whose every level refers four times to the next through local
/// pointers that are inlined (not `$defs` entries): a few hundred bytes that expand as 4ⁿ.
fn fan_out_schema(levels: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for level in 0..levels {
        let next = format!("#/$defs/L{}/properties/x", level + 1);
        let branch = json!({ "$ref": next, "description": format!("branch of level {level}") });
        defs.insert(
            format!("L{level}"),
            json!({ "properties": { "x": { "type": "object", "properties": {
                "a": branch, "b": branch, "c": branch, "d": branch
            } } } }),
        );
    }
    defs.insert(
        format!("L{levels}"),
        json!({ "properties": { "x": { "type": "string" } } }),
    );
    json!({
        "type": "object",
        "properties": { "root": { "$ref": "#/$defs/L0/properties/x" } },
        "$defs": defs
    })
}

#[test]
fn ts4_a_schema_whose_local_refs_fan_out_gets_a_short_fallback_signature() {
    // 12 levels: 4^12 ≈ 17 million inlined objects if nothing bounds the expansion.
    let schema = fan_out_schema(12);
    assert!(
        schema.to_string().len() < 8192,
        "the schema itself is a few KB"
    );
    let d = def("fan_out", "Accept a deeply shared structure.", schema);
    let started = std::time::Instant::now();
    let text = signature(&d);
    assert!(text.len() < 1024, "{} bytes", text.len());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "bounded work: {:?}",
        started.elapsed()
    );
    assert_snapshot!(text);
    // The tools around it keep their signatures, and it adds no declarations.
    let small = def(
        "ping",
        "Answer pong.",
        json!({ "type": "object", "properties": {} }),
    );
    let members = |t: &str| {
        t.trim_start_matches("interface Tools {\n")
            .trim_end_matches('}')
            .to_owned()
    };
    let small_member = members(&signature(&small));
    assert_eq!(
        signatures([&small, &d, &small]),
        format!(
            "interface Tools {{\n{small_member}{}{small_member}}}",
            members(&text)
        )
    );
}

#[test]
fn ts4_every_catalog_tool_keeps_its_full_signature() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mcp-catalog");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("the catalog directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut largest = 0;
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        for tool in ishiki_toolsearch::eval::parse_catalog(&text).expect("a catalog") {
            let printed = signature(&tool);
            assert!(
                !printed.contains("Its types are not shown"),
                "{} falls back",
                tool.name
            );
            largest = largest.max(printed.len());
        }
    }
    assert!(
        largest > 0 && largest < 32 * 1024,
        "largest {largest} bytes"
    );
}
