//! Invariants under random input: the catalog's step rules (TS-2, TS-3) over random sequences
//! of adds, removals, searches, steps and restarts; signatures and search over arbitrary input.

use std::collections::HashSet;
use std::sync::LazyLock;

use ishiki_toolsearch::{Catalog, ToolDef, ToolIndex, signature};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Modest case counts (CI has two cores); no regression files, which proptest cannot place
/// next to an integration-test module.
fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::with_cases(cases)
    }
}

const NAMES: [&str; 8] = [
    "alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta",
];

#[derive(Debug, Clone)]
enum Op {
    Add { tool: usize, resident: bool },
    Select(Vec<usize>),
    Query(String),
    Step,
    Restart,
    Remove(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..NAMES.len(), prop::bool::weighted(0.3))
            .prop_map(|(tool, resident)| Op::Add { tool, resident }),
        prop::collection::vec(0..NAMES.len(), 1..3).prop_map(Op::Select),
        "[a-z ]{0,12}".prop_map(Op::Query),
        Just(Op::Step),
        Just(Op::Step),
        Just(Op::Restart),
        (0..NAMES.len()).prop_map(Op::Remove),
    ]
}

fn def(tool: usize, resident: bool) -> ToolDef {
    ToolDef {
        resident,
        ..ToolDef::new(
            NAMES[tool],
            format!("the {} tool for item {tool}", NAMES[tool]),
            json!({"type": "object"}),
        )
    }
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn ts2_ts3_step_rules_hold_for_any_sequence(
        toolsearch in any::<bool>(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let mut catalog = if toolsearch { Catalog::with_toolsearch() } else { Catalog::without_toolsearch() };
        // What was added, in order, so a restart can add it again.
        let mut added: Vec<ToolDef> = Vec::new();
        let mut previous: Option<Vec<String>> = None;
        // Listed tools removed since the last step, which that step must announce.
        let mut unannounced: Vec<String> = Vec::new();
        for op in ops {
            match op {
                Op::Add { tool, resident } => {
                    let d = def(tool, resident);
                    added.retain(|a| a.name != d.name);
                    added.push(d.clone());
                    catalog.add(d);
                }
                Op::Select(tools) => {
                    let names: Vec<&str> = tools.iter().map(|&t| NAMES[t]).collect();
                    let before: Vec<String> = catalog.available().iter().map(|t| t.name.clone()).collect();
                    catalog.search(&format!("select:{}", names.join(",")), 5);
                    let after: Vec<String> = catalog.available().iter().map(|t| t.name.clone()).collect();
                    // TS-2: a search never changes the current step's list.
                    prop_assert_eq!(before, after);
                }
                Op::Query(q) => {
                    let hits = catalog.search(&q, 3);
                    prop_assert!(hits.len() <= 3);
                    for hit in &hits {
                        prop_assert!(!catalog.is_removed(&hit.name), "removed {} found", hit.name);
                    }
                }
                Op::Remove(tool) => {
                    let name = NAMES[tool];
                    let before: Vec<String> = catalog.available().iter().map(|t| t.name.clone()).collect();
                    let was_callable = catalog.is_available(name);
                    let removed = catalog.remove(name);
                    prop_assert_eq!(removed, added.iter().any(|a| a.name == name));
                    added.retain(|a| a.name != name);
                    let after: Vec<String> = catalog.available().iter().map(|t| t.name.clone()).collect();
                    // The list is untouched; the tool is no longer callable nor searchable.
                    prop_assert_eq!(before, after);
                    prop_assert!(!catalog.is_available(name));
                    let found = catalog.search(&format!("select:{name}"), 5);
                    prop_assert!(found.is_empty(), "removed {} found", name);
                    // Removing a tool that is already gone changes nothing: a removal not yet
                    // announced stays pending.
                    if was_callable {
                        unannounced.retain(|n| n != name);
                        unannounced.push(name.to_owned());
                    }
                }
                Op::Step => {
                    let step = catalog.begin_step();
                    let tools: Vec<String> = step.tools.iter().map(|t| t.name.clone()).collect();
                    let delta: Vec<String> = step.delta.iter().map(|t| t.name.clone()).collect();
                    let unique: HashSet<&String> = tools.iter().collect();
                    prop_assert_eq!(unique.len(), tools.len(), "a tool is listed twice");
                    if let Some(previous) = &previous {
                        // TS-3: append-only, and the delta is exactly what was appended.
                        prop_assert_eq!(&tools[..previous.len()], &previous[..]);
                        prop_assert_eq!(&tools[previous.len()..], &delta[..]);
                    }
                    let available: Vec<String> = catalog.available().iter().map(|t| t.name.clone()).collect();
                    prop_assert_eq!(&available, &tools);
                    // Every listed tool removed since the last step is announced, once.
                    let removed: Vec<String> = step.removed.clone();
                    unannounced.retain(|n| catalog.is_removed(n));
                    prop_assert_eq!(&removed, &unannounced);
                    unannounced.clear();
                    for name in &removed {
                        prop_assert!(tools.contains(name), "{} announced but not listed", name);
                    }
                    previous = Some(tools);
                }
                Op::Restart => {
                    let state = catalog.state();
                    let mut restarted = if toolsearch { Catalog::with_toolsearch() } else { Catalog::without_toolsearch() };
                    for d in &added {
                        restarted.add(d.clone());
                    }
                    restarted.restore(&state);
                    // Removed tools the caller no longer adds leave the list; nothing else moves.
                    let before: Vec<String> = catalog
                        .available()
                        .iter()
                        .map(|t| t.name.clone())
                        .filter(|n| !catalog.is_removed(n))
                        .collect();
                    let after: Vec<String> = restarted.available().iter().map(|t| t.name.clone()).collect();
                    prop_assert_eq!(&before, &after, "a restart changed the list");
                    if let Some(previous) = &mut previous {
                        previous.retain(|n| after.contains(n));
                    }
                    unannounced.clear();
                    prop_assert_eq!(restarted.state().step, state.step);
                    catalog = restarted;
                }
            }
        }
    }
}

/// Schema-shaped JSON: the keywords the signature generator reads, nested, with junk mixed in.
fn schema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": ["integer", "null"]})),
        Just(json!({"$ref": "#/$defs/A"})),
        Just(json!({"$ref": "#"})),
        Just(json!({"$ref": "#/properties/x"})),
        Just(json!({"$ref": "http://elsewhere/x.json"})),
        Just(json!({"enum": ["a", 1, null, {"k": [true]}]})),
        Just(json!({"const": "*/"})),
        Just(json!({})),
        Just(json!(true)),
        Just(json!(false)),
        Just(json!(42)),
        "[ -~]{0,8}".prop_map(|d| json!({"type": "boolean", "description": d})),
    ];
    leaf.prop_recursive(5, 48, 4, |inner| {
        prop_oneof![
            prop::collection::btree_map("[a-c$-]{1,3}", inner.clone(), 0..4).prop_map(|props| {
                let required: Vec<Value> = props.keys().take(1).map(|k| json!(k)).collect();
                json!({"type": "object", "properties": props, "required": required})
            }),
            inner
                .clone()
                .prop_map(|i| json!({"type": "array", "items": i})),
            prop::collection::vec(inner.clone(), 0..3).prop_map(|v| json!({"anyOf": v})),
            prop::collection::vec(inner.clone(), 0..3)
                .prop_map(|v| json!({"allOf": v, "nullable": true})),
            prop::collection::vec(inner.clone(), 0..3)
                .prop_map(|v| json!({"type": "array", "prefixItems": v})),
            inner
                .clone()
                .prop_map(|i| json!({"type": "object", "additionalProperties": i})),
            (inner.clone(), inner).prop_map(|(a, b)| {
                let mut m = Map::new();
                m.insert("properties".to_owned(), json!({"x": a}));
                m.insert("$defs".to_owned(), json!({"A": b}));
                Value::Object(m)
            }),
        ]
    })
}

static INDEX: LazyLock<ToolIndex> = LazyLock::new(|| ToolIndex::build(&super::retrieval::tools()));

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn ts4_signatures_are_total_and_deterministic(input in schema(), output in proptest::option::of(schema())) {
        let d = ToolDef { output_schema: output, ..ToolDef::new("t", "closes early */", input) };
        let first = signature(&d);
        prop_assert_eq!(&first, &signature(&d));
        prop_assert!(first.contains("\n  t(input:"));
        // A description can never close its comment early.
        prop_assert!(!first.contains("early */"));
    }

    #[test]
    fn ts6_search_is_total_and_deterministic(query in "\\PC{0,40}", k in 0usize..8) {
        let hits = INDEX.search(&query, k);
        prop_assert!(hits.len() <= k || query.trim_start().to_lowercase().starts_with("select:"));
        prop_assert_eq!(hits, INDEX.search(&query, k));
    }
}
