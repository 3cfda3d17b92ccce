//! What crosses the worker boundary and when: flow control under many concurrent calls, lone
//! surrogates, calls a program did not await, names that are no tool, numbers past 2^53, and
//! runaway async recursion. Every test runs in worker processes, bounded by the program's own
//! time limit (a deadlock fails as a timeout instead of hanging).

use super::support::{FnTool, echo, limits, outcome, sandbox};
use ishiki_codemode::CallableTool;
use serde_json::json;
use std::sync::{Arc, Mutex};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_calls_with_64_kib_replies_all_complete() {
    // CM-3: 1 000 × 64 KiB = 62.5 MiB of replies, far past what pipes and the reply backlog
    // hold at once; without flow control the worker and the host each wait for the other.
    let sandbox = sandbox(limits());
    let blob = "x".repeat(64 << 10);
    let tool: Arc<dyn CallableTool> = Arc::new(FnTool::new("blob", move |input| {
        Ok(json!({ "i": input["i"], "data": blob }))
    }));
    let code = r#"
        const replies = await Promise.all(Array.from({ length: 1000 }, (_, i) => tools.blob({ i })));
        return {
            n: replies.length,
            ordered: replies.every((r, i) => r.i === i),
            bytes: replies.reduce((sum, r) => sum + r.data.length, 0),
        };
    "#;
    let result = outcome(&sandbox, code, vec![tool]).await;
    assert_eq!(
        result,
        format!(
            r#"ok {{"bytes":{},"n":1000,"ordered":true}}"#,
            1000 * (64 << 10)
        )
    );
}

#[tokio::test]
async fn lone_surrogates_reach_tools_and_results_as_replacement_characters() {
    // One half of 😀 in a return value, a tool input and an object key: each arrives as
    // U+FFFD, the program goes on, and a tool's answer comes back as it was sent.
    let sandbox = sandbox(limits());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let tool: Arc<dyn CallableTool> = Arc::new(FnTool::new("keep", move |input| {
        record.lock().expect("lock").push(input.clone());
        Ok(input)
    }));
    let result = sandbox
        .run(
            r#"
            const half = 'ab😀cd'.slice(0, 3);
            const back = await tools.keep({ s: half, [half]: 1, pair: '😀' });
            console.log(half);
            return { half, back, low: '😀'.slice(1), length: half.length };
            "#,
            vec![tool],
        )
        .await
        .expect("the program returns");
    let input = seen.lock().expect("lock").clone();
    assert_eq!(
        input,
        vec![json!({ "s": "ab\u{fffd}", "ab\u{fffd}": 1, "pair": "😀" })]
    );
    assert_eq!(
        result.value,
        json!({
            "half": "ab\u{fffd}",
            "back": { "s": "ab\u{fffd}", "ab\u{fffd}": 1, "pair": "😀" },
            "low": "\u{fffd}",
            "length": 3,
        })
    );
    assert_eq!(result.console, vec!["ab\u{fffd}"]);
}

#[tokio::test]
async fn calls_a_program_did_not_await_never_start_and_the_result_says_so() {
    // CM-1: 50 writes fired without `await`, then `return`: none runs, in every run, and none
    // runs later either (the next program sees only its own call).
    let sandbox = sandbox(limits());
    let count = Arc::new(FnTool::new("count", |_| Ok(json!({ "ok": true }))));
    let tools = || -> Vec<Arc<dyn CallableTool>> { vec![count.clone(), echo()] };
    let mut first_console = None;
    for run in 0..5 {
        let result = sandbox
            .run(
                "for (let i = 0; i < 50; i++) { tools.count({ i }); }\nreturn 'returned'",
                tools(),
            )
            .await
            .expect("the program returns");
        assert_eq!(result.value, json!("returned"));
        // The same words every run, and the model reads them: a snapshot.
        let console = first_console.get_or_insert_with(|| result.console.clone());
        assert_eq!(&result.console, console, "run {run}");
        assert_eq!(count.calls(), run, "run {run}");
        // The next program's one awaited call is the only one that lands.
        let next = outcome(&sandbox, "await tools.count({}); return 1", tools()).await;
        assert_eq!(next, "ok 1");
        assert_eq!(count.calls(), run + 1, "run {run}");
    }
    insta::assert_snapshot!(first_console.unwrap_or_default().join("\n"));
}

#[tokio::test]
async fn a_call_already_running_when_the_program_returns_finishes_before_the_result() {
    // Sent together with an awaited call, the unawaited one has started; it runs to its end
    // before `run` returns (the same effects every run) and its result is dropped.
    let sandbox = sandbox(limits());
    let count = Arc::new(FnTool::new("count", |_| Ok(json!({ "ok": true }))));
    for run in 1..=3 {
        let result = sandbox
            .run(
                "tools.count({});\nawait tools.echo({});\nreturn 'returned'",
                vec![count.clone(), echo()],
            )
            .await
            .expect("the program returns");
        assert_eq!(result.value, json!("returned"));
        assert_eq!(count.calls(), run);
    }
}

#[tokio::test]
async fn a_name_that_is_no_tool_is_named_when_read() {
    let sandbox = sandbox(limits());
    let tools = || -> Vec<Arc<dyn CallableTool>> { vec![echo()] };
    let uncaught = outcome(&sandbox, "await tools.nope({});\nreturn 1", tools()).await;
    let caught = outcome(
        &sandbox,
        "try { await tools.reed({ url: 'x' }); } catch (e) { return [e.name, e.message]; }",
        tools(),
    )
    .await;
    let none = outcome(&sandbox, "return tools.anything()", vec![]).await;
    // What JavaScript itself asks of objects still answers as on a plain object.
    let probes = outcome(
        &sandbox,
        "const t = await tools; return [t === tools, typeof tools.then, typeof tools.toJSON, 'nope' in tools, Object.keys(tools), JSON.stringify(tools)]",
        tools(),
    )
    .await;
    assert_eq!(
        probes,
        r#"ok [true,"undefined","undefined",false,["echo"],"{}"]"#
    );
    insta::assert_snapshot!(format!("{uncaught}\n{caught}\n{none}"));
}

#[tokio::test]
async fn unbounded_async_recursion_ends_on_the_recursion_limit() {
    // Boa raises the limit inside a promise capability, as an internal "cannot fail per spec".
    let sandbox = sandbox(limits());
    let result = outcome(
        &sandbox,
        "async function deeper(n) { return await deeper(n + 1); }\nreturn await deeper(0);",
        vec![echo()],
    )
    .await;
    assert!(!result.contains("per spec"), "{result}");
    insta::assert_snapshot!(result);
}

#[tokio::test]
async fn integers_past_2_pow_53_in_tool_input_are_refused_and_the_rest_arrive_exactly() {
    // JavaScript numbers are doubles: `12345678901234567890` is already rounded when the
    // program holds it. A tool input with a number past 2^53 (where doubles stop holding every
    // integer) fails, catchable and naming the path, instead of passing a rounded value on;
    // every other number arrives as the same double.
    let sandbox = sandbox(limits());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let tool: Arc<dyn CallableTool> = Arc::new(FnTool::new("keep", move |input| {
        record.lock().expect("lock").push(input.clone());
        Ok(json!(null))
    }));
    let refused = outcome(
        &sandbox,
        "try { await tools.keep({ order: { id: 12345678901234567890 } }); return 'sent'; } catch (e) { return e.message; }",
        vec![tool.clone()],
    )
    .await;
    let negative = outcome(
        &sandbox,
        "try { await tools.keep({ list: [1, -(2 ** 60)] }); return 'sent'; } catch (e) { return e.message; }",
        vec![tool.clone()],
    )
    .await;
    let bigint = outcome(
        &sandbox,
        "try { await tools.keep({ n: 10n }); return 'sent'; } catch (e) { return e.name + ': ' + e.message; }",
        vec![tool.clone()],
    )
    .await;
    // 2^53 may be 2^53 + 1 already rounded: past Number.MAX_SAFE_INTEGER, refused too.
    let at_2_pow_53 = outcome(
        &sandbox,
        "try { await tools.keep({ n: 2 ** 53 }); return 'sent'; } catch (e) { return e.message; }",
        vec![tool.clone()],
    )
    .await;
    insta::assert_snapshot!(format!("{refused}\n{negative}\n{bigint}\n{at_2_pow_53}"));
    assert!(seen.lock().expect("lock").is_empty());

    let exact = outcome(
        &sandbox,
        "await tools.keep({ n: [2 ** 53 - 1, -(2 ** 53 - 1), 9007199254740991, 0.1 + 0.2, 5e-324, 123.456e-7, -0, 1e-300] }); return 'sent'",
        vec![tool],
    )
    .await;
    assert_eq!(exact, "ok \"sent\"");
    let input = seen.lock().expect("lock").clone();
    let numbers: Vec<f64> = input[0]["n"]
        .as_array()
        .expect("array")
        .iter()
        .map(|n| n.as_f64().expect("number"))
        .collect();
    let expected: [f64; 8] = [
        9_007_199_254_740_991.0,
        -9_007_199_254_740_991.0,
        9_007_199_254_740_991.0,
        0.1 + 0.2,
        5e-324,
        123.456e-7,
        0.0,
        1e-300,
    ];
    assert_eq!(numbers.len(), expected.len());
    for (got, want) in numbers.iter().zip(expected) {
        assert_eq!(got.to_bits(), want.to_bits(), "{got} != {want}");
    }
}

#[tokio::test]
async fn workers_report_their_confinement() {
    // SEC-1: the report comes from a started worker; on Linux every layer but Landlock is
    // always there (Landlock depends on the kernel's configuration and is reported either way).
    let sandbox = sandbox(limits());
    sandbox.warm().await.expect("a worker starts");
    let report = sandbox.confinement().expect("the worker sent its report");
    let names: Vec<&str> = report.layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "descriptors",
            "capabilities",
            "no_new_privs",
            "landlock",
            "seccomp",
            "process_group"
        ]
    );
    if cfg!(target_os = "linux") {
        for name in ["descriptors", "capabilities", "process_group"] {
            assert!(report.layer(name).is_some_and(|l| l.enforced), "{report}");
        }
        assert!(
            report.layer("seccomp").is_some_and(|l| l.enforced),
            "{report}"
        );
        assert!(
            report.layer("no_new_privs").is_some_and(|l| l.enforced),
            "{report}"
        );
    }
    // A confined worker still runs programs.
    assert_eq!(
        outcome(
            &sandbox,
            "return (await tools.echo({ a: 1 })).a",
            vec![echo()]
        )
        .await,
        "ok 1"
    );
}

/// A tool that answers after the delay the test set for it, so one run can make `a` the
/// fastest and the next one `b`.
#[derive(Debug)]
struct Delayed {
    name: &'static str,
    delay_ms: Arc<std::sync::atomic::AtomicU64>,
    schema: serde_json::Value,
}

#[async_trait::async_trait]
impl CallableTool for Delayed {
    fn name(&self) -> &str {
        self.name
    }
    fn input_schema(&self) -> &serde_json::Value {
        &self.schema
    }
    async fn call(
        &self,
        _input: serde_json::Value,
    ) -> Result<serde_json::Value, ishiki_codemode::ToolFailure> {
        let ms = self.delay_ms.load(std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        Ok(json!(self.name))
    }
}

/// Issue 24: ten identical runs gave different transcripts, because `Promise.race` between two
/// tool calls and the count of unawaited calls "finished after it returned" followed the
/// host's timing. Calls are answered in call order, so with the tools' speeds swapped from run
/// to run every run returns the same value and prints the same console lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_program_gives_the_same_outcome_whichever_tool_the_host_finishes_first() {
    let code = r#"
        const first = await Promise.race([tools.a({}), tools.b({})]);
        tools.a({});
        tools.b({});
        const last = await tools.c({});
        console.log('raced', first, 'then', last);
        return [first, last];
    "#;
    for sandbox in [sandbox(limits()), super::support::in_process(limits())] {
        let delays: Vec<Arc<std::sync::atomic::AtomicU64>> = (0..3)
            .map(|_| Arc::new(std::sync::atomic::AtomicU64::new(0)))
            .collect();
        let tools: Vec<Arc<dyn CallableTool>> = ["a", "b", "c"]
            .into_iter()
            .zip(&delays)
            .map(|(name, delay)| {
                Arc::new(Delayed {
                    name,
                    delay_ms: delay.clone(),
                    schema: json!({ "type": "object" }),
                }) as Arc<dyn CallableTool>
            })
            .collect();
        let mut outcomes = Vec::new();
        for run in 0..10u64 {
            // Odd runs: `a` is slow; even runs: `b` and the unawaited ones are slow.
            let (a, b, c) = if run % 2 == 1 { (40, 0, 0) } else { (0, 40, 0) };
            for (delay, ms) in delays.iter().zip([a, b, c]) {
                delay.store(ms, std::sync::atomic::Ordering::SeqCst);
            }
            let result = sandbox
                .run(code, tools.clone())
                .await
                .expect("the program returns");
            outcomes.push((result.value, result.console));
        }
        let first = outcomes[0].clone();
        for (run, outcome) in outcomes.iter().enumerate() {
            assert_eq!(outcome, &first, "run {run} differs from run 0");
        }
        assert_eq!(
            first.0,
            json!(["a", "c"]),
            "the race goes to the first call"
        );
    }
}

const ORPHAN_CHILD: &str = "ISHIKI_TEST_ORPHAN_HOST";

/// The host of the tests below, in the test's own binary run again with [`ORPHAN_CHILD`] set
/// (to `executed` for workers started without the fork server): runs an endless program in a
/// worker and never returns.
#[expect(
    clippy::print_stdout,
    reason = "a test's child process: it fails and reports as its test would"
)]
async fn orphaned_worker_host(fork_server: bool) {
    let limits = ishiki_codemode::Limits {
        timeout: std::time::Duration::from_secs(60),
        instruction_budget: u64::MAX,
        loop_iteration_limit: u64::MAX,
        ..limits()
    };
    let sandbox = if fork_server {
        sandbox(limits)
    } else {
        ishiki_codemode::Sandbox::new(ishiki_codemode::SandboxConfig {
            worker: ishiki_codemode::WorkerSpawn::Program(super::support::worker_path()),
            limits,
            fork_server: false,
            ..ishiki_codemode::SandboxConfig::default()
        })
    };
    println!("host ready");
    let _ = sandbox.run("while (true) {}", vec![]).await;
}

/// The processes whose parent is `parent`, from `/proc`.
#[cfg(target_os = "linux")]
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces, so read after the last `)`.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// Issue 24: a host killed by a signal left its worker running a busy program for seconds
/// (until its CPU limit). The worker notices it was orphaned and ends within a fraction of a
/// second; with the fork server (issue 26) the server notices first, then its worker.
#[cfg(target_os = "linux")]
#[test]
fn a_worker_whose_host_was_killed_ends_at_once() {
    orphaned_worker_ends(
        "suite::boundary::a_worker_whose_host_was_killed_ends_at_once",
        true,
    );
}

/// The same for a worker started without the fork server.
#[cfg(target_os = "linux")]
#[test]
fn an_executed_worker_whose_host_was_killed_ends_at_once() {
    orphaned_worker_ends(
        "suite::boundary::an_executed_worker_whose_host_was_killed_ends_at_once",
        false,
    );
}

#[cfg(target_os = "linux")]
fn orphaned_worker_ends(test: &str, fork_server: bool) {
    use std::io::BufRead as _;
    if std::env::var_os(ORPHAN_CHILD).is_some() {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(orphaned_worker_host(fork_server));
    }
    let mut host = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(ORPHAN_CHILD, "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the host starts");
    let mut lines = std::io::BufReader::new(host.stdout.take().expect("stdout")).lines();
    assert!(
        lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.contains("host ready")),
        "the host never got ready"
    );
    // The host's children, and theirs: the worker, or the fork server and the worker it
    // forked for the program.
    let descendants = |host: u32| {
        let mut all = children_of(host);
        let grandchildren: Vec<u32> = all.iter().flat_map(|&c| children_of(c)).collect();
        all.extend(grandchildren);
        all
    };
    let expected = if fork_server { 2 } else { 1 };
    let started = std::time::Instant::now();
    let workers = loop {
        let workers = descendants(host.id());
        if workers.len() >= expected || started.elapsed() > std::time::Duration::from_secs(20) {
            break workers;
        }
        std::thread::park_timeout(std::time::Duration::from_millis(20));
    };
    assert!(workers.len() >= expected, "no worker process: {workers:?}");
    // Let the program get busy, then kill the host without any cleanup.
    std::thread::park_timeout(std::time::Duration::from_millis(300));
    host.kill().expect("SIGKILL the host");
    host.wait().expect("the host is reaped");
    let killed = std::time::Instant::now();
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    };
    while workers.iter().any(|&pid| alive(pid)) {
        assert!(
            killed.elapsed() < std::time::Duration::from_secs(1),
            "the orphaned worker still runs {} ms after its host was killed",
            killed.elapsed().as_millis()
        );
        std::thread::park_timeout(std::time::Duration::from_millis(10));
    }
}
