//! Assets after retention cleanup (RES-9, PRJ-9): a deleted asset's id is never handed out
//! again, and its attachment message gives a terminal reason once, in the same words after a
//! restart.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ishiki_core::{Durability, ManualClock, ModelResponse, Part, Request, Runtime};

use super::runtime::{assembly, clock_at, png};

const PROFILE: &str = "assets: { cleanup: { enabled: true, retentionDays: 1 } }";

async fn open(dir: &Path, clock: Arc<ManualClock>) -> Runtime {
    Runtime::builder(assembly(PROFILE, "seeing"), dir)
        .clock(clock)
        .durability(Durability::Normal)
        .build()
        .await
        .expect("the runtime opens")
}

/// The attachment lines of a request: text parts that start with `[attachment`.
fn attachment_lines(request: &Request) -> Vec<String> {
    request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::Text { text } if text.starts_with("[attachment") => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// One answered request; returns what it carried.
async fn answer(rt: &mut Runtime) -> Request {
    let prepared = rt.prepare().await.expect("a request");
    let request = prepared.request.clone();
    rt.commit(prepared, ModelResponse::from_text("ok".to_owned()))
        .await
        .expect("a commit");
    request
}

/// Issue 24: after cleanup deleted an asset, a rerun with the scenario clock handed its id to
/// a new image, and the old record then embedded the new bytes. Ids are checked against
/// history too.
#[tokio::test]
async fn res9_an_asset_id_is_never_reused_after_retention_deletes_the_asset() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("state");
    let clock = clock_at(Duration::ZERO);
    let mut rt = open(&dir, clock.clone()).await;
    let first = rt
        .add_user_message("u1", "a png", &[png(4, 4, 1)])
        .await
        .expect("a user message")[0]
        .url
        .clone();
    answer(&mut rt).await;
    clock.advance(Duration::from_secs(2 * 86_400));
    assert_eq!(
        rt.cleanup_assets().await.expect("a cleanup"),
        vec![first.clone()]
    );
    drop(rt);

    // The rerun's clock starts where the first run's did: the same ids come up again.
    let mut rt = open(&dir, clock_at(Duration::ZERO)).await;
    let second = rt
        .add_user_message("u2", "another image", &[png(5, 5, 2)])
        .await
        .expect("a second user message")[0]
        .url
        .clone();
    assert_ne!(second, first, "the deleted asset's id was handed out again");
}

/// Issue 24: a deleted asset was announced as "could not be read … tried again" in every later
/// request, in other words after a restart. It is terminal: stated once, the same before and
/// after a restart.
#[tokio::test]
async fn prj9_an_asset_deleted_by_retention_is_announced_once_in_the_same_words_after_a_restart() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let mut seen = Vec::new();
    for restart in [false, true] {
        let dir = tmp.path().join(format!("state-{restart}"));
        let clock = clock_at(Duration::ZERO);
        let mut rt = open(&dir, clock.clone()).await;
        rt.add_user_message("u1", "a png", &[png(4, 4, 1)])
            .await
            .expect("a user message");
        clock.advance(Duration::from_secs(2 * 86_400));
        assert_eq!(rt.cleanup_assets().await.expect("a cleanup").len(), 1);
        if restart {
            drop(rt);
            rt = open(&dir, clock.clone()).await;
        }
        let first = attachment_lines(&answer(&mut rt).await);
        assert_eq!(first.len(), 1, "the reason is stated: {first:?}");
        assert_eq!(
            attachment_lines(&answer(&mut rt).await),
            Vec::<String>::new(),
            "and stated once"
        );
        seen.push(first[0].clone());
    }
    assert_eq!(seen[0], seen[1], "the same words after a restart");
    assert_eq!(
        seen[0].split_once(']').map(|(_, rest)| rest),
        Some(
            " not provided: it was deleted when its retention period (assets.cleanup.retentionDays: 1) ended, and cannot be shown again."
        ),
        "{}",
        seen[0]
    );
}
