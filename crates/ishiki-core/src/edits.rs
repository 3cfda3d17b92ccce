//! The edit planner: every change the pipeline makes to an earlier part of the request goes
//! through [`plan`], which knows what it costs on the model and may hold it back.
//!
//! The projection edits earlier context: a `once` attachment leaves the request after it was
//! delivered, `recent` images are pruned in batches, a budget releases viewed images. On a
//! model that binds each thinking block to its prefix (Anthropic preserved thinking), such an
//! edit invalidates every thinking block after it, and on every model it rewrites the prompt
//! cache from that point. Under [`EditPolicy::AtUserTurns`] the planner keeps the previous
//! request's version of each edited attachment message while a tool loop runs — the model is
//! reasoning step by step and its live thinking stands after the edit — and applies every held
//! edit at once when the next user turn arrives, where the loop's reasoning has served.
//!
//! What it holds, and what it never does:
//! - only attachment messages (`att-…`, made by the projection) are held: a message the
//!   conversation withdrew or history that changed goes at once;
//! - a held message keeps its place and its previous bytes; everything new is appended after
//!   the previous request, as projected;
//! - a hold never makes the request carry more than the per-request image budgets allow
//!   ([`ImageBudget`]): over it, every edit applies now;
//! - the delivery state is the projection's: a held `once` image was already delivered, and is
//!   only shown again.
//!
//! `Immediate` (the default) applies every edit in the request that causes it, as the
//! projection rules say literally (docs/decisions.md says when each policy is chosen).

use std::collections::HashMap;
use std::sync::Arc;

use ishiki_model::{Message, Part, Role};

/// When the projection's edits of earlier context reach the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EditPolicy {
    /// In the request that causes them (the projection rules applied literally).
    #[default]
    Immediate,
    /// Held while a tool loop runs, applied together when a new user message starts a turn:
    /// for models whose thinking is bound to its prefix.
    AtUserTurns,
}

/// The per-request image limits a held request must still meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageBudget {
    /// Images per request.
    pub images: usize,
    /// Image bytes per request (decoded).
    pub bytes: u64,
}

/// What [`plan`] did to one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EditReport {
    /// Attachment messages sent in their previous version (their edit waits).
    pub held: usize,
    /// The index of the first message that differs from the previous request, if any: where
    /// this request's prefix changed (later reasoning invalid, the cache rewritten from here).
    pub changed_at: Option<usize>,
}

/// The messages to send: `projected`, with the edits of earlier attachment messages held back
/// under `policy` while no new user message arrived since `previous` (the last request that
/// got an answer). `budget` bounds what a hold may carry.
pub fn plan(
    previous: &[Arc<Message>],
    projected: Vec<Arc<Message>>,
    policy: EditPolicy,
    budget: ImageBudget,
) -> (Vec<Arc<Message>>, EditReport) {
    let immediate = |messages: Vec<Arc<Message>>| {
        let changed_at = changed_at(previous, &messages);
        (
            messages,
            EditReport {
                held: 0,
                changed_at,
            },
        )
    };
    if policy == EditPolicy::Immediate || previous.is_empty() {
        return immediate(projected);
    }
    let before: HashMap<&str, usize> = previous
        .iter()
        .enumerate()
        .map(|(i, m)| (m.id.as_str(), i))
        .collect();
    let user_turn = projected.iter().any(|m| {
        m.role == Role::User && !is_attachment(&m.id) && !before.contains_key(m.id.as_str())
    });
    if user_turn {
        return immediate(projected);
    }
    let now: HashMap<&str, &Arc<Message>> = projected.iter().map(|m| (m.id.as_str(), m)).collect();
    // The previous request, message by message: what is still projected stays as projected
    // (identical unless it is an edited attachment message, which is held); a vanished
    // attachment message is held; anything else vanished (withdrawn) goes.
    let mut held = 0;
    let mut messages: Vec<Arc<Message>> = Vec::with_capacity(projected.len() + 4);
    for old in previous {
        match now.get(old.id.as_str()) {
            Some(new) if Arc::ptr_eq(new, old) || ***new == **old => messages.push((*new).clone()),
            Some(_) | None if is_attachment(&old.id) => {
                held += 1;
                messages.push(old.clone());
            }
            Some(new) => messages.push((*new).clone()),
            None => {}
        }
    }
    if held == 0 {
        return immediate(projected);
    }
    // New messages keep their projected order after the previous request. One projected
    // between earlier messages (an attachment of an old source showing again) is an edit the
    // hold cannot keep apart: apply everything now.
    let last_old = projected
        .iter()
        .rposition(|m| before.contains_key(m.id.as_str()));
    let first_new = projected
        .iter()
        .position(|m| !before.contains_key(m.id.as_str()));
    if let (Some(first_new), Some(last_old)) = (first_new, last_old)
        && first_new < last_old
    {
        return immediate(projected);
    }
    messages.extend(
        projected
            .iter()
            .filter(|m| !before.contains_key(m.id.as_str()))
            .cloned(),
    );
    let (images, bytes) = images_of(&messages);
    if images > budget.images || bytes > budget.bytes {
        return immediate(projected);
    }
    let changed_at = changed_at(previous, &messages);
    (messages, EditReport { held, changed_at })
}

/// The first position where `current` does not repeat `previous`.
fn changed_at(previous: &[Arc<Message>], current: &[Arc<Message>]) -> Option<usize> {
    previous
        .iter()
        .zip(current)
        .position(|(a, b)| !Arc::ptr_eq(a, b) && a != b)
        .or_else(|| (current.len() < previous.len()).then_some(current.len()))
}

/// Whether a message is an attachment message made by the projection (`att-call-…`,
/// `att-msg-…`).
fn is_attachment(id: &str) -> bool {
    id.starts_with("att-")
}

fn images_of(messages: &[Arc<Message>]) -> (usize, u64) {
    let mut count = 0;
    let mut bytes = 0u64;
    for part in messages.iter().flat_map(|m| &m.content) {
        if let Part::Image(media) = part {
            count += 1;
            bytes = bytes.saturating_add(media.bytes);
        }
    }
    (count, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ishiki_model::MediaPart;
    use proptest::prelude::*;

    fn message(id: &str, role: Role, content: Vec<Part>) -> Arc<Message> {
        Arc::new(Message {
            id: id.into(),
            role,
            created_at: "2026-01-01T00:00:00Z".into(),
            content,
        })
    }

    fn text(t: &str) -> Part {
        Part::Text { text: t.into() }
    }

    fn image(url: &str) -> Part {
        Part::Image(MediaPart {
            media_type: "image/png".into(),
            url: url.into(),
            bytes: 100,
            sha256: "00".into(),
            data: None,
        })
    }

    const ROOMY: ImageBudget = ImageBudget {
        images: 100,
        bytes: 1 << 30,
    };

    #[test]
    fn a_tool_loop_holds_an_attachment_edit_and_a_user_turn_applies_it() {
        let user = message("m1", Role::User, vec![text("look")]);
        let a1 = message("s1-assistant", Role::Assistant, vec![text("reading")]);
        let r1 = message("s1-tools", Role::Tool, vec![text("result")]);
        let shown = message(
            "att-call-c1",
            Role::User,
            vec![text("[attachment]"), image("a")],
        );
        let gone = message("att-call-c1", Role::User, vec![text("[attachment: a]")]);
        let a2 = message("s2-assistant", Role::Assistant, vec![text("again")]);
        let r2 = message("s2-tools", Role::Tool, vec![text("result 2")]);
        let previous = vec![user.clone(), a1.clone(), r1.clone(), shown.clone()];
        // The `once` image was delivered; the projection drops it in the next request.
        let projected = vec![
            user.clone(),
            a1.clone(),
            r1.clone(),
            gone.clone(),
            a2.clone(),
            r2.clone(),
        ];
        let (sent, report) = plan(&previous, projected.clone(), EditPolicy::AtUserTurns, ROOMY);
        assert_eq!(
            sent,
            vec![
                user.clone(),
                a1.clone(),
                r1.clone(),
                shown.clone(),
                a2.clone(),
                r2.clone()
            ]
        );
        assert_eq!(
            report,
            EditReport {
                held: 1,
                changed_at: None
            }
        );
        // Immediate: the edit goes now, and the report says where the prefix changed.
        let (sent, report) = plan(&previous, projected.clone(), EditPolicy::Immediate, ROOMY);
        assert_eq!(sent, projected);
        assert_eq!(report.changed_at, Some(3));
        // A new user message: everything held applies together.
        let m2 = message("m2", Role::User, vec![text("next")]);
        let mut at_turn = projected.clone();
        at_turn.push(m2);
        let (sent, report) = plan(&sent, at_turn.clone(), EditPolicy::AtUserTurns, ROOMY);
        assert_eq!((sent, report.held), (at_turn, 0));
        // A hold never passes the image budget.
        let tight = ImageBudget {
            images: 0,
            bytes: 0,
        };
        let (sent, report) = plan(&previous, projected.clone(), EditPolicy::AtUserTurns, tight);
        assert_eq!((sent, report.held), (projected, 0));
    }

    #[test]
    fn a_withdrawn_message_leaves_at_once_even_in_a_tool_loop() {
        let m1 = message("m1", Role::User, vec![text("secret")]);
        let m0 = message("m0", Role::User, vec![text("start")]);
        let previous = vec![m0.clone(), m1.clone()];
        let (sent, _) = plan(&previous, vec![m0.clone()], EditPolicy::AtUserTurns, ROOMY);
        assert_eq!(sent, vec![m0]);
    }

    proptest! {
        /// Whatever the edits, a held request starts with the previous request unchanged
        /// (append-only), contains every new message in projected order, and never holds a
        /// message that is not an attachment.
        #[test]
        fn a_held_request_is_an_append_of_the_previous_one(
            n in 1usize..8,
            edits in prop::collection::vec(any::<bool>(), 8),
            added in 0usize..4,
        ) {
            let mut previous = vec![message("m0", Role::User, vec![text("start")])];
            let mut projected = previous.clone();
            for (k, edited) in edits.iter().take(n).enumerate() {
                let a = message(&format!("s{k}-assistant"), Role::Assistant, vec![text("x")]);
                let att = message(&format!("att-call-{k}"), Role::User, vec![image(&format!("{k}"))]);
                previous.push(a.clone());
                previous.push(att.clone());
                projected.push(a);
                projected.push(if *edited {
                    message(&format!("att-call-{k}"), Role::User, vec![text("pruned")])
                } else {
                    att
                });
            }
            for k in 0..added {
                projected.push(message(&format!("t{k}"), Role::Tool, vec![text("r")]));
            }
            let (sent, report) = plan(&previous, projected.clone(), EditPolicy::AtUserTurns, ROOMY);
            prop_assert_eq!(&sent[..previous.len()], &previous[..]);
            prop_assert_eq!(report.changed_at, None);
            prop_assert_eq!(&sent[previous.len()..], &projected[previous.len()..]);
            prop_assert_eq!(report.held, edits[..n].iter().filter(|e| **e).count());
        }
    }
}
