//! Sorting from programs: any comparator, however inconsistent, gives some order; consistent
//! ones keep the specification's order, holes, `undefined` and errors.

use super::support::{limits, outcome, sandbox};

#[tokio::test]
async fn an_inconsistent_comparator_gives_some_order_instead_of_ending_the_program() {
    // The shuffle idiom: with Rust's `sort_by` underneath, this ended the worker with "does not
    // correctly implement a total order", past the program's own try/catch.
    let sandbox = sandbox(limits());
    let result = outcome(
        &sandbox,
        r#"
        const checks = [];
        for (let round = 0; round < 20; round++) {
            const n = 100 + round * 37;
            const a = Array.from({ length: n }, (_, i) => i);
            a.sort(() => Math.random() - 0.5);
            const t = Float64Array.from(a);
            t.sort(() => Math.random() - 0.5);
            const u = Int32Array.from(a).toSorted(() => Math.random() - 0.5);
            const v = a.toSorted(() => (Math.random() < 0.5 ? -1 : 1));
            const sum = (xs) => xs.reduce((s, x) => s + x, 0);
            const expected = (n * (n - 1)) / 2;
            checks.push(
                new Set(a).size === n && sum(a) === expected &&
                new Set(t).size === n && sum(Array.from(t)) === expected &&
                new Set(u).size === n && sum(Array.from(u)) === expected &&
                new Set(v).size === n && sum(v) === expected
            );
        }
        return checks.every((c) => c);
        "#,
        vec![],
    )
    .await;
    assert_eq!(result, "ok true");
}

#[tokio::test]
async fn consistent_comparators_keep_the_specified_order() {
    let sandbox = sandbox(limits());
    let result = outcome(
        &sandbox,
        r#"
        const holes = [3, undefined, , 1, 10, 2];
        holes.sort();
        const stable = [[1, "a"], [0, "b"], [1, "c"], [0, "d"]].sort((x, y) => x[0] - y[0]);
        const typed = new Float64Array([3, NaN, -0, 0, -1]).sort();
        const byAbs = new Int8Array([-3, 2, -1, 3]).sort((x, y) => Math.abs(x) - Math.abs(y));
        const copy = [5, 4, 3];
        const sorted = copy.toSorted((x, y) => x - y);
        const errors = [];
        try { [2, 1].sort(() => { throw new Error("boom"); }); } catch (e) { errors.push(e.message); }
        try { [2, 1].sort(1); } catch (e) { errors.push(e.constructor.name); }
        try { new Uint8Array(2).sort("x"); } catch (e) { errors.push(e.constructor.name); }
        try { Array.prototype.toSorted.call({ length: 2 ** 32 }); } catch (e) { errors.push(e.constructor.name); }
        return {
            holes: [holes.length, holes.slice(0, 4), 4 in holes, holes[4], 5 in holes],
            stable: stable.map((p) => p[1]).join(""),
            typed: Array.from(typed, (x) => Object.is(x, -0) ? "-0" : String(x)),
            byAbs: Array.from(byAbs),
            sorted, copy, errors,
            names: [Array.prototype.sort.name, Array.prototype.sort.length, Int8Array.prototype.toSorted.name],
        };
        "#,
        vec![],
    )
    .await;
    insta::assert_snapshot!(result);
}
