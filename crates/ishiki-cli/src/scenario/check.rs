//! The checks over steps that need only the file: unique ids, and references (`withdraw`,
//! `$continue`, `${…}`) that name ids of earlier steps only.

use std::collections::BTreeMap;

use serde_json::Value;
use serde_saphyr::{Location, Spanned};

use super::Step;
use super::diagnostic::{ScenarioError, ScenarioErrorKind, Source};
use super::load::push_key;
use crate::interpolate;
use crate::interpolate::Interpolator;

/// Where an id is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IdKind {
    Call,
    Message,
}

#[derive(Debug, Clone)]
pub(super) struct IdDef {
    pub(super) kind: IdKind,
    pub(super) step: usize,
    pub(super) path: String,
}

/// Fields of a `tool_result` event a reference to a call may walk into (`folded` is added to
/// it once a request folds the result).
pub(super) const RESULT_FIELDS: [&str; 9] = [
    "event",
    "step",
    "call_id",
    "name",
    "is_error",
    "text",
    "attachments",
    "continue",
    "folded",
];

/// Fields of an `inbound` event a reference to a message may walk into.
pub(super) const INBOUND_FIELDS: [&str; 3] = ["event", "id", "images"];

/// Checks ids and every reference; returns the ids.
pub(super) fn check_steps(
    src: &Source<'_>,
    steps: &[Spanned<Step>],
) -> Result<BTreeMap<String, IdDef>, ScenarioError> {
    let invalid = |path: &str, at: Location, message: &str| {
        src.error(ScenarioErrorKind::Invalid, path, Some(at), message)
    };
    let mut ids: BTreeMap<String, IdDef> = BTreeMap::new();
    for (i, step) in steps.iter().enumerate() {
        let mut defined = Vec::new();
        match &step.value {
            Step::User(user) => defined.push((
                user.id.clone(),
                IdKind::Message,
                format!("steps[{i}].user.id"),
            )),
            Step::Model(model) => {
                for (j, call) in model.calls.iter().enumerate() {
                    defined.push((
                        call.id.clone(),
                        IdKind::Call,
                        format!("steps[{i}].model.calls[{j}].id"),
                    ));
                }
            }
            Step::Withdraw(_) | Step::Restart(_) | Step::Clock(_) | Step::Cleanup(_) => {}
        }
        for (id, kind, path) in defined {
            if let Some(first) = ids.get(&id) {
                return Err(invalid(
                    &path,
                    step.referenced,
                    &format!("id {id} is already used by {}", first.path),
                ));
            }
            ids.insert(
                id,
                IdDef {
                    kind,
                    step: i,
                    path,
                },
            );
        }
    }
    let interpolator = Interpolator::new(ids.keys().cloned());
    for (i, step) in steps.iter().enumerate() {
        let at = step.referenced;
        let check_refs = |path: &str, text: &str| -> Result<(), ScenarioError> {
            let refs = interpolator
                .references(text)
                .map_err(|e| invalid(path, at, &e.to_string()))?;
            for r in refs {
                let problem = match ids.get(&r.id) {
                    None => Some(format!(
                        "no call or user message has id {} (a reference names an earlier call or user message)",
                        r.id
                    )),
                    Some(def) if def.step >= i => Some(format!(
                        "{} is defined at {}; a step may only refer to earlier steps",
                        r.id, def.path
                    )),
                    Some(def) => {
                        let (what, fields): (&str, &[&str]) = match def.kind {
                            IdKind::Call => ("the tool_result of call", &RESULT_FIELDS),
                            IdKind::Message => ("the inbound event of message", &INBOUND_FIELDS),
                        };
                        match r.path.first() {
                            Some(f) if fields.contains(&f.as_str()) => None,
                            _ => Some(format!(
                                "{what} {} has the fields {}",
                                r.id,
                                fields.join(", ")
                            )),
                        }
                    }
                };
                if let Some(problem) = problem {
                    return Err(invalid(
                        path,
                        at,
                        &format!("bad reference `{}`: {problem}", r.text),
                    ));
                }
            }
            Ok(())
        };
        match &step.value {
            Step::User(user) => {
                if let Some(text) = &user.text {
                    check_refs(&format!("steps[{i}].user.text"), text)?;
                }
            }
            Step::Model(model) => {
                let base = format!("steps[{i}].model");
                if model.fail.is_some()
                    && (!model.calls.is_empty() || model.text.is_some() || model.abort)
                {
                    return Err(invalid(
                        &format!("{base}.fail"),
                        at,
                        "a failing model step has no response: `fail` cannot be combined with `calls`, `text` or `abort`",
                    ));
                }
                for (field, text) in [("text", &model.text), ("fail", &model.fail)] {
                    if let Some(text) = text {
                        check_refs(&format!("{base}.{field}"), text)?;
                    }
                }
                for (j, call) in model.calls.iter().enumerate() {
                    let call_path = format!("{base}.calls[{j}]");
                    check_refs(&format!("{call_path}.name"), &call.name)?;
                    let input_path = format!("{call_path}.input");
                    let target = interpolate::continue_target(&call.input)
                        .map_err(|e| invalid(&input_path, at, &e.to_string()))?;
                    match target {
                        Some(target) => match ids.get(target) {
                            Some(def) if def.kind == IdKind::Call && def.step < i => {}
                            found => {
                                let what = match found {
                                    None => format!("unknown call id {target}"),
                                    Some(def) if def.kind == IdKind::Message => {
                                        format!("{target}, a user message")
                                    }
                                    Some(def) => format!("{target}, defined at {}", def.path),
                                };
                                return Err(invalid(
                                    &format!("{input_path}.$continue"),
                                    at,
                                    &format!(
                                        "`$continue` names {what}; it must name a call of an earlier step"
                                    ),
                                ));
                            }
                        },
                        None => {
                            let mut strings = Vec::new();
                            collect_strings(&call.input, input_path, &mut strings);
                            for (path, text) in strings {
                                check_refs(&path, text)?;
                            }
                        }
                    }
                }
            }
            Step::Withdraw(id) => match ids.get(id) {
                Some(def) if def.kind == IdKind::Message && def.step < i => {}
                _ => {
                    return Err(invalid(
                        &format!("steps[{i}].withdraw"),
                        at,
                        &format!("no earlier user step has message id {id}"),
                    ));
                }
            },
            Step::Restart(_) | Step::Clock(_) | Step::Cleanup(_) => {}
        }
    }
    Ok(ids)
}

/// Every string inside a JSON value, with its path.
pub(super) fn collect_strings<'v>(
    value: &'v Value,
    path: String,
    out: &mut Vec<(String, &'v str)>,
) {
    match value {
        Value::String(s) => out.push((path, s)),
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                collect_strings(v, format!("{path}[{i}]"), out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                let mut p = path.clone();
                push_key(&mut p, k);
                collect_strings(v, p, out);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}
