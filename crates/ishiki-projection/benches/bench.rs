//! `cargo bench -p ishiki-projection --bench bench`: time one projection of a long history.
//!
//! A history of N attachment records of which N/10 are images still in play (a third each
//! `once`, `recent`, `retain`; half of the `recent`/`retain` ones viewed) and the rest `once`
//! images consumed long ago; every seventh tool call has left the active context. Measured at
//! N = 10,000, 20,000 and 40,000; the rows give the time per projection and the growth ratio
//! (linear growth means 2x and 4x). Extra CLI arguments (cargo passes `--bench`) are ignored.

#![allow(clippy::print_stdout, reason = "a bench binary reports on stdout")]

use std::collections::HashSet;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use ishiki_projection::{
    AttachmentConfig, AttachmentRecord, DeliveryState, Lifetime, ProjectionInput, SourceLink,
    Verdict, project,
};

struct History {
    records: Vec<AttachmentRecord>,
    state: DeliveryState,
    inactive: HashSet<SourceLink>,
}

fn history(n: usize) -> History {
    // Records first, then the state, as a runtime loads them: each in one batch.
    let records: Vec<AttachmentRecord> = (0..n)
        .map(|i| {
            let lifetime = match (i % 10, (i / 10) % 3) {
                (0, 1) => Lifetime::Recent,
                (0, 2) => Lifetime::Retain,
                _ => Lifetime::Once,
            };
            AttachmentRecord {
                id: format!("rec-{i:08}"),
                source: SourceLink::ToolResult {
                    call_id: format!("call-{}", i / 2),
                },
                url: format!("artifact://bench/{i:08}.png"),
                media_type: "image/png".to_owned(),
                bytes: 50_000 + (i as u64 % 997),
                dimensions: Some((800, 600)),
                lifetime,
                seq: i as u64,
                created_at: format!("2025-01-01T00:00:{:02}Z", i % 60),
            }
        })
        .collect();
    let inactive = records
        .iter()
        .enumerate()
        .filter(|(i, _)| (i / 2) % 7 == 3)
        .map(|(_, r)| r.source.clone())
        .collect();
    let mut json = String::from(r#"{"records":["#);
    for (i, r) in records.iter().enumerate() {
        let flags = if i % 10 != 0 {
            r#""viewed":true,"consumed":true"#
        } else if r.lifetime != Lifetime::Once && (i / 10) % 2 == 0 {
            r#""viewed":true"#
        } else {
            continue;
        };
        let _ = write!(json, r#"{{"id":"{}","seq":{},{flags}}},"#, r.id, r.seq);
    }
    json.pop();
    json.push_str("]}");
    let state: DeliveryState = match serde_json::from_str(&json) {
        Ok(state) => state,
        Err(e) => panic!("bench state does not deserialize: {e}"),
    };
    History {
        records,
        state,
        inactive,
    }
}

/// The best per-projection time over a few rounds (the machine is shared; the minimum is the
/// least disturbed measurement).
fn time_projection(h: &History, config: &AttachmentConfig) -> Duration {
    let run = || {
        project(&ProjectionInput {
            records: &h.records,
            active: &|s| !h.inactive.contains(s),
            verdict: &|_| Verdict::Available,
            state: &h.state,
            config,
            image_input: true,
            audio_input: false,
        })
    };
    // Warm up and size the rounds to about 50 ms each.
    let start = Instant::now();
    black_box(run());
    let once = start.elapsed().max(Duration::from_micros(1));
    let iterations =
        (Duration::from_millis(50).as_nanos() / once.as_nanos()).clamp(3, 10_000) as u32;
    (0..7)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                black_box(run());
            }
            start.elapsed() / iterations
        })
        .min()
        .unwrap_or(once)
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let config = AttachmentConfig::default();
    let sizes = [10_000usize, 20_000, 40_000];
    let mut times = Vec::new();
    for n in sizes {
        let h = history(n);
        let t = time_projection(&h, &config);
        let target = if n == 10_000 { "<= 1 ms" } else { "linear" };
        println!(
            "BENCH\tproject {n} records ({} images in play)\t{}\t{target}",
            n / 10,
            ms(t)
        );
        times.push(t);
    }
    let base = times[0].as_secs_f64();
    for (n, t) in sizes.iter().zip(&times).skip(1) {
        let want = *n as f64 / sizes[0] as f64;
        println!(
            "BENCH\tprojection growth {n}/{}\t{:.2}x\t~{want:.0}x (linear)",
            sizes[0],
            t.as_secs_f64() / base
        );
    }
}
