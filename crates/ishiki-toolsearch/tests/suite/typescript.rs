//! The declarations a model reads are valid TypeScript (TS-4): `tsc --noEmit --strict`, the
//! compiler `cargo xtask tools` pins into the workspace's `.tools/` (or `ISHIKI_TSC`),
//! compiles every catalog of the MCP corpus as the codemode tool shows it, each tool alone as a
//! catalog delta shows it, and the hostile names and schemas below, with a program calling
//! every tool. Without the compiler this test fails, on purpose: CI runs `cargo xtask tools`
//! first, so a missing compiler is a broken setup, not a skip.

use std::path::{Path, PathBuf};
use std::process::Command;

use ishiki_toolsearch::{TOOLS_CONST, ToolDef, signature, signatures};
use serde_json::json;

fn tsc() -> PathBuf {
    std::env::var_os("ISHIKI_TSC").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../.tools/node_modules/typescript/bin/tsc")
        },
        PathBuf::from,
    )
}

/// Compiles `files` (name, text) as modules, each on its own, under `--strict`; `Err` holds
/// the compiler's complaints.
fn compile(files: &[(String, String)]) -> Result<(), String> {
    let compiler = tsc();
    assert!(
        compiler.is_file(),
        "no TypeScript compiler at {}: run `cargo xtask tools` (or set ISHIKI_TSC)",
        compiler.display()
    );
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut names = Vec::new();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("writable");
        names.push(name.clone());
    }
    let config = json!({
        "compilerOptions": {
            "strict": true,
            "noEmit": true,
            "target": "es2022",
            "lib": ["es2022"],
            "types": [],
            // Every file is a module of its own, as every block the model reads stands alone.
            "moduleDetection": "force",
        },
        "files": names,
    });
    std::fs::write(dir.path().join("tsconfig.json"), config.to_string()).expect("writable");
    let output = Command::new(&compiler)
        .arg("-p")
        .arg(dir.path())
        .output()
        .expect("tsc runs");
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// The callee of `name` in a program, as the codemode description tells the model to call it.
fn call(name: &str) -> String {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if plain {
        format!("tools.{name}")
    } else {
        format!("tools[{}]", serde_json::to_string(name).expect("a string"))
    }
}

/// What the codemode tool shows for `tools`, then a program that calls each of them.
fn codemode_file(tools: &[ToolDef]) -> String {
    let mut text = format!("{TOOLS_CONST}\n\n{}\n\n", signatures(tools));
    text.push_str("export async function program(): Promise<void> {\n");
    for tool in tools {
        text.push_str(&format!(
            "  await {}(undefined as never);\n",
            call(&tool.name)
        ));
    }
    text.push_str("}\n");
    text
}

fn catalogs() -> Vec<(String, Vec<ToolDef>)> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<PathBuf> = std::fs::read_dir(data.join("mcp-catalog"))
        .expect("the catalog directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.push(data.join("mcp-server-git.json"));
    files.push(data.join("tools.json"));
    files.sort();
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).expect("readable");
            let tools = ishiki_toolsearch::eval::parse_catalog(&text).expect("a catalog");
            let stem = file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (stem, tools)
        })
        .collect()
}

/// Names and `$defs` keys that are no identifiers, reserved words, or the names of the types the
/// output itself uses, and a schema that falls back.
fn hostile() -> Vec<ToolDef> {
    let defs = json!({
        "Tools": { "type": "string" },
        "class": { "type": "number" },
        "Promise": { "type": "object", "properties": { "then": { "type": "string" } } },
        "Record": { "type": "boolean" },
        "default": { "enum": ["a", "b\"c", 1, null] },
        "a/b": { "type": "array", "items": { "$ref": "#/$defs/class" } },
        "self": { "type": "object", "properties": { "next": { "$ref": "#/$defs/self" } } },
    });
    let schema = json!({
        "type": "object",
        "properties": {
            "t": { "$ref": "#/$defs/Tools" },
            "c": { "$ref": "#/$defs/class" },
            "p": { "$ref": "#/$defs/Promise" },
            "r": { "$ref": "#/$defs/Record" },
            "d": { "$ref": "#/$defs/default" },
            "ab": { "$ref": "#/$defs/a~1b" },
            "s": { "$ref": "#/$defs/self" },
            "constructor": { "type": "string" },
            "weird key\"*/": { "type": "string", "description": "ends */ early" },
        },
        "required": ["t"],
        "$defs": defs,
    });
    let mut fan_out = json!({ "type": "object", "properties": { "x": { "$ref": "#/$defs/d0" } } });
    let mut levels = serde_json::Map::new();
    for i in 0..12 {
        let next = format!("#/$defs/d{}", i + 1);
        levels.insert(
            format!("d{i}"),
            json!({ "type": "object", "properties": {
                "a": { "$ref": next }, "b": { "$ref": next }, "c": { "$ref": next }, "d": { "$ref": next }
            } }),
        );
    }
    levels.insert("d12".to_owned(), json!({ "type": "string" }));
    fan_out["$defs"] = serde_json::Value::Object(levels);
    let output = json!({ "$ref": "#/$defs/Tools", "$defs": { "Tools": { "type": "string" } } });
    vec![
        ToolDef::new("github.create-issue", "A dotted name.", schema.clone()),
        ToolDef::new("delete", "A reserved word.", schema.clone()),
        ToolDef::new(
            "constructor",
            "An Object member.",
            json!({ "type": "object" }),
        ),
        ToolDef::new("名前", "Not ASCII.", json!({})),
        ToolDef::new(
            "quote\"name",
            "A quote in the name. */ closes nothing",
            schema,
        )
        .with_output_schema(output),
        ToolDef::new("fan_out", "Falls back.", fan_out),
    ]
}

#[test]
fn ts4_every_declaration_a_model_reads_compiles_under_strict_typescript() {
    let mut files = Vec::new();
    let mut all = Vec::new();
    for (stem, tools) in catalogs() {
        files.push((format!("{stem}.ts"), codemode_file(&tools)));
        all.extend(tools);
    }
    // Each tool alone, as a catalog delta (or a search result) shows it.
    for (i, tool) in all.iter().chain(hostile().iter()).enumerate() {
        files.push((format!("tool{i}.ts"), signature(tool)));
    }
    files.push(("hostile.ts".to_owned(), codemode_file(&hostile())));
    // The whole corpus in one block: declarations shared across servers are declared once.
    files.push(("all.ts".to_owned(), codemode_file(&all)));
    assert!(all.len() > 300, "{} tools", all.len());
    if let Err(complaints) = compile(&files) {
        panic!("tsc refused the declarations:\n{complaints}");
    }
}

#[test]
fn ts4_the_compiler_check_can_fail() {
    // The form the declarations had before (a call expression, not a declaration) is refused,
    // so the test above proves something.
    let old = "/** Write. */\ntools.write_file(input: { path: string }): Promise<unknown>;";
    let err = compile(&[("old.ts".to_owned(), old.to_owned())]).expect_err("refused");
    assert!(err.contains("old.ts"), "{err}");
}
