//! The hostile corpus (SEC-1): programs that try to hang, crash, exhaust or escape the
//! sandbox. Shared by the test suite (error texts, host survival) and the bench (how long each
//! takes to end).

/// `(name, program)` pairs; every program must end with an error (or a harmless value) within
/// the limits, and leave the host able to run the next program.
pub(crate) fn corpus() -> Vec<(&'static str, String)> {
    let fixed: [(&'static str, &'static str); 36] = [
        ("loop_before_await", "while (true) {}"),
        ("loop_after_await", "await tools.echo({}); while (true) {}"),
        (
            "loop_in_sort_callback",
            "[3, 1, 2].sort(() => { for (;;) {} })",
        ),
        (
            "loop_in_map_callback_after_await",
            "await null; [1, 2].map(() => { while (1) {} })",
        ),
        (
            "nested_call_loops",
            "function inner() { let s = 0; for (let i = 0; i < 1e5; i++) s += i; return s }\nfor (;;) inner()",
        ),
        (
            "catching_the_limit",
            "try { for (;;) {} } catch (e) { return 'caught' } finally { return 'finally' }",
        ),
        (
            "recursion",
            "function f(n) { return f(n + 1) + 1 }\nreturn f(0)",
        ),
        (
            "recursion_after_await",
            "await null; const f = (n) => f(n + 1); f(0)",
        ),
        (
            "recursion_through_native_callbacks",
            "function f() { return [0].map(f) }\nf()",
        ),
        ("repeat_bomb", "return 'x'.repeat(2 ** 28).length"),
        ("doubling_string", "let s = 'x'; for (;;) s += s"),
        (
            "array_growth",
            "const a = []; for (let i = 0; ; i++) a.push(i)",
        ),
        (
            "buffer_growth",
            "const a = []; for (;;) a.push(new Float64Array(1 << 20))",
        ),
        (
            "array_buffer_bomb",
            "return new ArrayBuffer(2 ** 31).byteLength",
        ),
        ("huge_return", "return 'x'.repeat(10 * 1024 * 1024)"),
        (
            "deep_object_return",
            "let o = {}; for (let i = 0; i < 10000; i++) o = { o }; return o",
        ),
        (
            "deep_object_tool_input",
            "let o = []; for (let i = 0; i < 10000; i++) o = [o]; await tools.echo({ o })",
        ),
        ("cyclic_return", "const o = {}; o.self = o; return o"),
        ("throw_string", "throw 'plain string'"),
        ("throw_object", "throw { code: 42 }"),
        ("throw_null", "throw null"),
        (
            "throw_after_await",
            "await tools.echo({}); throw new RangeError('late')",
        ),
        (
            "tamper_tools",
            "tools.echo = () => 1; Object.defineProperty(globalThis, 'tools', { value: null }); return typeof tools",
        ),
        (
            "tamper_object_prototype",
            "Object.defineProperty(Object.prototype, 'then', { get() { throw new Error('then trap') } });\nreturn { a: 1 }",
        ),
        (
            "tamper_json",
            "JSON.stringify = () => { throw new Error('no') }; JSON.parse = null;\nconst r = await tools.echo({ a: 1 }); return { ok: r.a }",
        ),
        (
            "tamper_promise",
            "Promise.prototype.then = function () { for (;;) {} };\nconst r = await tools.echo({ a: 1 }); return r",
        ),
        ("calls_without_await", "for (;;) tools.echo({ spam: true })"),
        (
            "calls_without_await_caught",
            "for (;;) { try { tools.echo({ spam: true }) } catch (e) {} }",
        ),
        ("eval", "return eval('1 + 1')"),
        ("function_constructor", "return new Function('return 1')()"),
        (
            "async_function_constructor",
            "const AsyncFunction = (async () => {}).constructor;\nreturn await new AsyncFunction('return 1')()",
        ),
        ("dynamic_import", "return await import('/etc/passwd')"),
        ("never_settles", "await new Promise(() => {})"),
        (
            "proxy_trap_loop",
            "const p = new Proxy({}, { get() { for (;;) {} } });\nreturn p.x",
        ),
        (
            "getter_loop_in_return",
            "return { get x() { for (;;) {} } }",
        ),
        (
            "console_flood",
            "for (let i = 0; i < 100000; i++) console.log('spam ' + i);\nreturn 'flooded'",
        ),
    ];
    let mut all: Vec<(&'static str, String)> = fixed
        .into_iter()
        .map(|(name, code)| (name, code.to_owned()))
        .collect();
    all.push((
        "deep_bracket_nesting",
        format!("return {}1{}", "(".repeat(5000), ")".repeat(5000)),
    ));
    all.push((
        "deep_unary_nesting",
        format!("return {}1", "!".repeat(300_000)),
    ));
    all
}
