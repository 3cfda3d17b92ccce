//! CM-1..CM-9: what a program can do, and what it gets back.

use super::support::{FnTool, Stuck, echo, in_process, limits, outcome, sandbox};
use base64::Engine as _;
use ishiki_codemode::{CallableTool, CodemodeErrorKind, Limits, ToolFailure};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

fn read_text(text: &'static str) -> Arc<dyn CallableTool> {
    Arc::new(
        FnTool::new("read", move |_| Ok(json!({ "type": "text", "text": text }))).input(json!({
            "type": "object",
            "properties": { "url": { "type": "string" } },
            "required": ["url"],
        })),
    )
}

#[tokio::test]
async fn cm1_program_is_the_body_of_an_async_function() {
    let sandbox = sandbox(limits());
    let result = outcome(
        &sandbox,
        "const v = await tools.echo({ n: 41 });\nreturn v.n + 1;",
        vec![echo()],
    )
    .await;
    assert_eq!(result, "ok 42");
    assert_eq!(outcome(&sandbox, "const x = 1;", vec![]).await, "ok null");
}

#[tokio::test]
async fn cm1_each_program_starts_fresh() {
    let sandbox = sandbox(limits());
    let first = outcome(
        &sandbox,
        "globalThis.leak = 1; var declared = 2; String.prototype.shout = () => 'x'; return 1",
        vec![],
    )
    .await;
    assert_eq!(first, "ok 1");
    let second = outcome(
        &sandbox,
        "return [typeof leak, typeof declared, typeof ''.shout]",
        vec![],
    )
    .await;
    assert_eq!(second, r#"ok ["undefined","undefined","undefined"]"#);
}

#[tokio::test]
async fn cm1_syntax_errors_name_the_program_line() {
    let sandbox = sandbox(limits());
    let result = outcome(&sandbox, "const a = 1;\nlet b = ;\nreturn a", vec![]).await;
    insta::assert_snapshot!(result);
    let unclosed = outcome(&sandbox, "if (true) {\n  return 1;\n", vec![]).await;
    insta::assert_snapshot!(unclosed);
    let thrown = outcome(&sandbox, "\n\nnull.x", vec![]).await;
    insta::assert_snapshot!(thrown);
}

#[tokio::test]
async fn cm2_tools_by_name_and_by_bracket_return_the_raw_result() {
    let raw = json!({
        "type": "text",
        "text": "héllo 😀\nline",
        "nested": { "list": [1, 2.5, -3, true, null], "empty": {} },
    });
    let returned = raw.clone();
    let server = Arc::new(FnTool::new("mcp-server_lookup", move |_| {
        Ok(returned.clone())
    }));
    let sandbox = sandbox(limits());
    let result = sandbox
        .run(
            r#"
            const a = await tools["mcp-server_lookup"]({ q: "x" });
            const b = await tools.echo({ same: a });
            return b.same;
            "#,
            vec![server, echo()],
        )
        .await
        .expect("runs");
    assert_eq!(result.value, raw);
}

#[tokio::test]
async fn cm2_input_is_validated_before_execute() {
    let write = Arc::new(
        FnTool::new("write_file", |_| Ok(json!({ "ok": true }))).input(json!({
            "type": "object",
            "properties": { "path": { "type": "string" }, "content": { "type": "string" } },
            "required": ["path", "content"],
        })),
    );
    let sandbox = sandbox(limits());
    let tools: Vec<Arc<dyn CallableTool>> = vec![write.clone()];
    let caught = outcome(
        &sandbox,
        r#"
        try { await tools.write_file({ path: 3, content: "x" }); }
        catch (e) { return [e instanceof Error, e.message]; }
        "#,
        tools.clone(),
    )
    .await;
    insta::assert_snapshot!(caught);
    let missing = outcome(&sandbox, "await tools.write_file({ path: 'a' })", tools).await;
    insta::assert_snapshot!(missing);
    assert_eq!(write.calls(), 0, "execute must not run on invalid input");
}

#[tokio::test]
async fn cm2_output_is_checked_against_the_output_schema() {
    let tool = Arc::new(
        FnTool::new("count", |_| Ok(json!({ "count": "seven" }))).output(json!({
            "type": "object",
            "properties": { "count": { "type": "integer" } },
        })),
    );
    let sandbox = sandbox(limits());
    let result = outcome(
        &sandbox,
        "try { await tools.count(); } catch (e) { return e.message; }",
        vec![tool],
    )
    .await;
    insta::assert_snapshot!(result);
}

#[tokio::test]
async fn cm2_tool_failures_are_catchable_errors() {
    let fail = Arc::new(FnTool::new("fail", |_| Err(ToolFailure::new("disk full"))));
    let sandbox = sandbox(limits());
    let tools: Vec<Arc<dyn CallableTool>> = vec![fail];
    let caught = outcome(
        &sandbox,
        "try { await tools.fail({}); } catch (e) { return [e instanceof Error, e.name, e.message]; }",
        tools.clone(),
    )
    .await;
    assert_eq!(caught, r#"ok [true,"Error","disk full"]"#);
    let uncaught = outcome(&sandbox, "await tools.fail({});\nreturn 1", tools).await;
    assert_eq!(uncaught, "thrown: uncaught Error: disk full");
}

#[tokio::test]
async fn cm2_only_given_tools_exist() {
    let sandbox = sandbox(limits());
    let result = outcome(
        &sandbox,
        "let missing; try { tools.nope; } catch (e) { missing = e.message; }\nreturn ['nope' in tools, Object.keys(tools), typeof tools.toString, 'hasOwnProperty' in tools, missing]",
        vec![echo(), read_text("x")],
    )
    .await;
    assert_eq!(
        result,
        r#"ok [false,["echo","read"],"undefined",false,"tools.nope is not a tool; the tools are echo, read"]"#
    );
}

#[tokio::test]
async fn cm2_calls_run_concurrently_and_arguments_default_to_an_empty_object() {
    let sandbox = sandbox(limits());
    let result = outcome(
        &sandbox,
        r#"
        const all = await Promise.all([1, 2, 3].map((n) => tools.echo({ n })));
        const none = await tools.echo();
        return [all.map((r) => r.n), none];
        "#,
        vec![echo()],
    )
    .await;
    assert_eq!(result, "ok [[1,2,3],{}]");
}

#[tokio::test]
async fn cm3_intermediate_results_are_not_truncated() {
    let big = Arc::new(FnTool::new("big", |_| {
        Ok(json!({ "text": "0123456789".repeat(200_000) }))
    }));
    let sandbox = sandbox(limits());
    let result = outcome(
        &sandbox,
        "const r = await tools.big(); return [r.text.length, r.text.slice(-3)]",
        vec![big],
    )
    .await;
    assert_eq!(result, r#"ok [2000000,"789"]"#);
}

#[tokio::test]
async fn cm3_transfer_and_result_limits_fail_clearly() {
    let small = Limits {
        max_transfer_bytes: 64 << 10,
        max_result_bytes: 32 << 10,
        ..limits()
    };
    let big = Arc::new(FnTool::new("big", |_| Ok(json!("x".repeat(100_000)))));
    let sandbox = sandbox(small);
    let output = outcome(
        &sandbox,
        "try { await tools.big(); } catch (e) { return 'caught'; }",
        vec![big, echo()],
    )
    .await;
    let input = outcome(
        &sandbox,
        "try { await tools.echo({ s: 'y'.repeat(100000) }); } catch (e) { return 'caught'; }",
        vec![echo()],
    )
    .await;
    let result = outcome(&sandbox, "return 'z'.repeat(40000)", vec![]).await;
    insta::assert_snapshot!(format!("{output}\n{input}\n{result}"));
}

#[tokio::test]
async fn cm3_wall_clock_timeout_includes_tool_time() {
    let sandbox = sandbox(Limits {
        timeout: Duration::from_millis(500),
        ..limits()
    });
    let error = sandbox
        .run(
            "console.log('before'); await tools.stuck({}); return 1",
            vec![Arc::new(Stuck::new())],
        )
        .await
        .expect_err("times out");
    assert_eq!(error.kind(), CodemodeErrorKind::Timeout);
    insta::assert_snapshot!(error.message());
    assert_eq!(error.console(), ["before"]);
}

#[tokio::test]
async fn cm4_finish_and_wait_are_never_callable() {
    let sandbox = sandbox(limits());
    let tools: Vec<Arc<dyn CallableTool>> = vec![
        Arc::new(FnTool::new("finish", Ok)),
        Arc::new(FnTool::new("wait", Ok)),
        Arc::new(FnTool::new("send_message", |_| Ok(json!({ "sent": true })))),
    ];
    let result = outcome(
        &sandbox,
        "let refused = '';\ntry { await tools.finish({}); } catch (e) { refused = e.message; }\nreturn [Object.keys(tools), refused, (await tools.send_message({ text: 'hi' })).sent]",
        tools,
    )
    .await;
    // The given finish/wait never run; the names answer with why (direct calls only).
    assert_eq!(
        result,
        r#"ok [["send_message"],"tools.finish cannot be called from a program: finish is a direct call only; return what the next step needs and call finish directly",true]"#
    );
}

#[tokio::test]
async fn cm6_media_inside_the_sandbox_creates_no_attachment() {
    let shot = Arc::new(FnTool::new("screenshot", |_| {
        Ok(
            json!([{ "type": "text", "text": "desk" }, { "type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo=" }]),
        )
    }));
    let sandbox = sandbox(limits());
    let result = sandbox
        .run(
            "const s = await tools.screenshot({}); return { text: s[0].text, image: s[1] }",
            vec![shot],
        )
        .await
        .expect("runs");
    assert!(result.attachments.is_empty());
    assert_eq!(result.value["image"]["type"], "image");
}

#[tokio::test]
async fn cm8_binary_data_passes_as_base64_from_read_to_another_tool() {
    let bytes: Vec<u8> = (0..=255).collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    let read = Arc::new(FnTool::new("read", move |input| {
        Ok(json!({
            "type": "file",
            "url": input["url"],
            "mediaType": "application/octet-stream",
            "data": encoded,
        }))
    }));
    let ocr = Arc::new(FnTool::new("ocr", |input| {
        let data = input["image"].as_str().unwrap_or_default();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| ToolFailure::new(e.to_string()))?;
        let sum: u64 = decoded.iter().map(|&b| u64::from(b)).sum();
        Ok(json!({ "len": decoded.len(), "sum": sum }))
    }));
    let sandbox = sandbox(limits());
    let result = outcome(
        &sandbox,
        r#"
        const page = await tools.read({ url: "artifact://codemode/page.bin" });
        return await tools.ocr({ image: page.data });
        "#,
        vec![read, ocr],
    )
    .await;
    assert_eq!(result, r#"ok {"len":256,"sum":32640}"#);
}

#[tokio::test]
async fn cm9_console_is_captured_and_bounded() {
    let sandbox = sandbox(Limits {
        max_console_bytes: 120,
        ..limits()
    });
    let result = sandbox
        .run(
            r#"
            console.log("text", 1, true, null, undefined, { a: [1, "b"] }, [1, 2]);
            console.warn("careful");
            console.error(new TypeError("bad"));
            for (let i = 0; i < 1000; i++) console.info("line " + i);
            return "done";
            "#,
            vec![],
        )
        .await
        .expect("runs");
    assert_eq!(result.value, json!("done"));
    insta::assert_snapshot!(result.console.join("\n"));
}

#[tokio::test]
async fn cm9_console_survives_a_failure() {
    let sandbox = sandbox(limits());
    let error = sandbox
        .run(
            "console.log('step 1'); throw new Error('step 2 failed')",
            vec![],
        )
        .await
        .expect_err("throws");
    assert_eq!(error.console(), ["step 1"]);
}

#[tokio::test]
async fn cm9_no_ambient_capabilities() {
    let sandbox = sandbox(limits());
    let result = outcome(
        &sandbox,
        r#"return ["require", "process", "fetch", "setTimeout", "setInterval", "XMLHttpRequest",
            "Deno", "Bun", "WeakRef", "FinalizationRegistry", "print", "load"]
            .filter((name) => typeof globalThis[name] !== "undefined")"#,
        vec![],
    )
    .await;
    assert_eq!(result, "ok []");
    let refused = [
        outcome(&sandbox, "return eval('1 + 1')", vec![]).await,
        outcome(&sandbox, "return new Function('return 1')()", vec![]).await,
        outcome(&sandbox, "return await import('/etc/passwd')", vec![]).await,
    ];
    insta::assert_snapshot!(refused.join("\n"));
}

#[tokio::test]
async fn cm9_clock_and_randomness_are_deterministic() {
    let sandbox = sandbox(limits());
    let code = r#"
        const t0 = Date.now();
        let spin = 0; for (let i = 0; i < 10000; i++) spin += i;
        return [t0, Date.now() - t0, new Date().toISOString(), new Date(2020, 0, 1).getTimezoneOffset(),
                Math.random(), Math.random()];
    "#;
    let first = outcome(&sandbox, code, vec![]).await;
    let second = outcome(&sandbox, code, vec![]).await;
    assert_eq!(first, second);
    let value: Value = serde_json::from_str(first.trim_start_matches("ok ")).expect("json");
    assert_eq!(value[0], json!(1_700_000_000_000u64));
    assert_eq!(value[1], json!(0));
    assert_eq!(value[2], json!("2023-11-14T22:13:20.000Z"));
    assert_eq!(value[3], json!(0));
    let r = value[4].as_f64().expect("number");
    assert!((0.0..1.0).contains(&r));
    assert_ne!(value[4], value[5]);
    let later = sandbox
        .run_at("return new Date().toISOString()", vec![], 1_735_689_600_000)
        .await
        .expect("runs");
    assert_eq!(later.value, json!("2025-01-01T00:00:00.000Z"));
}

#[tokio::test]
async fn cm1_in_process_mode_runs_the_same_programs() {
    let sandbox = in_process(limits());
    let result = outcome(
        &sandbox,
        "const r = await tools.echo({ lines: 'a\\nTODO: b'.split('\\n') }); console.log('x'); return r.lines.filter((l) => l.startsWith('TODO'))",
        vec![echo()],
    )
    .await;
    assert_eq!(result, r#"ok ["TODO: b"]"#);
    let thrown = outcome(&sandbox, "await null; throw new Error('late')", vec![]).await;
    assert_eq!(thrown, "thrown: uncaught Error: late (line 1, col 19)");
    let spin = outcome(&sandbox, "for (;;) {}", vec![]).await;
    assert_eq!(
        spin,
        "limit: the program used its whole budget of 30000000 instructions; it probably loops forever"
    );
}

#[tokio::test]
async fn sec1_a_binary_that_is_not_a_worker_is_reported() {
    let sandbox = ishiki_codemode::Sandbox::new(ishiki_codemode::SandboxConfig {
        worker: ishiki_codemode::WorkerSpawn::Program("/bin/true".into()),
        limits: limits(),
        ..Default::default()
    });
    let error = sandbox
        .run("return 1", vec![])
        .await
        .expect_err("not a worker");
    assert_eq!(error.kind(), CodemodeErrorKind::Worker);
    insta::assert_snapshot!(error.message());
}

#[test]
fn sandbox_and_its_runs_can_move_between_threads() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    fn assert_send<T: Send>(_: &T) {}
    let sandbox = in_process(limits());
    assert_send_sync(&sandbox);
    let run = sandbox.run("return 1", vec![echo()]);
    assert_send(&run);
}
