//! The linear `String.prototype` methods, seen from programs: results, RegExp fallback, speed
//! class (a 20 000-line split must not be quadratic).

use super::support::{in_process, limits, outcome};

#[tokio::test]
async fn string_methods_keep_their_semantics_and_regexp_behaviour() {
    let sandbox = in_process(limits());
    let result = outcome(
        &sandbox,
        r#"
        const s = "a1b22c😀d";
        const out = [
            s.split(/\d+/),
            s.split("", 3),
            "x--y--z".split("--", 2),
            s.indexOf("2"), s.lastIndexOf("2"), s.includes("😀"), s.indexOf("\uDE00"),
            "aXbXc".replace("X", "[$&|$`|$']"),
            "aXbXc".replaceAll("X", (m, i) => i),
            "aXbXc".replace(/x/gi, "-"),
            "aXbXc".replaceAll(/X/g, "_"),
            String.prototype.split.call(12321, 2),
            String.prototype.split.name + String.prototype.split.length,
        ];
        let errors = [];
        try { "abc".includes(/b/); } catch (e) { errors.push(e.constructor.name); }
        try { "abc".replaceAll(/b/, "x"); } catch (e) { errors.push(e.constructor.name); }
        try { String.prototype.indexOf.call(null, "x"); } catch (e) { errors.push(e.constructor.name); }
        return [out, errors];
        "#,
        vec![],
    )
    .await;
    insta::assert_snapshot!(result);
}

#[tokio::test]
async fn twenty_thousand_lines_split_filter_join_within_a_small_budget() {
    // With Boa's own (quadratic) methods this takes seconds and would meet the suite's 2 s
    // timeout; linear, it is instant.
    let sandbox = in_process(limits());
    let result = outcome(
        &sandbox,
        r#"
        const text = "TODO: x\ndone: y\n".repeat(10000);
        const tasks = text.split("\n").filter((l) => l.startsWith("TODO:"));
        return [tasks.length, tasks.join("\n").length, text.replaceAll("done", "ok").indexOf("ok"), text.lastIndexOf("TODO")];
        "#,
        vec![],
    )
    .await;
    assert_eq!(result, "ok [10000,79999,8,159984]");
}
