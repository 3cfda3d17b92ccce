//! The `tools` object: one async function per callable tool, queued calls with their bounds,
//! and the depth-guarded JSON a call's input travels as.

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::object::builtins::{JsPromise, JsProxyBuilder};
use boa_engine::property::{PropertyDescriptor, PropertyKey};
use boa_engine::{Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction};

use super::QueuedCall;
use super::console::{json_string, utf8_len};
use super::realm::{fatal, session, shared};
use crate::error::{CodemodeError, CodemodeErrorKind, human_bytes};
use crate::protocol::MAX_JSON_DEPTH;
use crate::tool::{clip, is_callable_name};

/// The `tools` object: one function per callable name, nothing inherited.
pub(super) fn install_tools(context: &mut Context, tools: &[String]) -> JsResult<()> {
    let object = JsObject::with_null_proto();
    for name in tools.iter().filter(|name| is_callable_name(name)) {
        let function = NativeFunction::from_copy_closure_with_captures(
            call_tool,
            JsString::from(name.as_str()),
        );
        let function = FunctionObjectBuilder::new(context.realm(), function)
            .name(JsString::from(name.as_str()))
            .length(1)
            .constructor(false)
            .build();
        object.create_data_property_or_throw(JsString::from(name.as_str()), function, context)?;
    }
    // `finish` and `wait` exist only as direct calls (CM-4): say so instead of "not a function".
    for name in crate::tool::RESERVED_TOOL_NAMES {
        let function =
            NativeFunction::from_copy_closure_with_captures(reserved_tool, JsString::from(name));
        let function = FunctionObjectBuilder::new(context.realm(), function)
            .name(JsString::from(name))
            .length(1)
            .constructor(false)
            .build();
        // Not enumerable: `Object.keys(tools)` lists what a program can call.
        object.define_property_or_throw(
            JsString::from(name),
            PropertyDescriptor::builder()
                .value(function)
                .writable(false)
                .enumerable(false)
                .configurable(false),
            context,
        )?;
    }
    // Reading a name that is no tool throws a TypeError naming it, instead of Boa's nameless
    // "not a callable function" at the call.
    let proxy = JsProxyBuilder::new(object).get(tools_get).build(context)?;
    context.global_object().define_property_or_throw(
        JsString::from("tools"),
        PropertyDescriptor::builder()
            .value(proxy)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        context,
    )?;
    Ok(())
}

/// Names JavaScript itself probes on objects (`await tools`, `JSON.stringify(tools)`,
/// `String(tools)`): reading them gives `undefined`, as on a plain object, rather than an error.
pub(super) const PROBED_NAMES: [&str; 5] = ["then", "toJSON", "toString", "valueOf", "constructor"];

/// The `get` trap of `tools`: a tool, or a TypeError that names the missing one.
pub(super) fn tools_get(
    _this: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let Some(target) = args.first().and_then(JsValue::as_object) else {
        return Ok(JsValue::undefined());
    };
    let key = args
        .get(1)
        .cloned()
        .unwrap_or_default()
        .to_property_key(context)?;
    if matches!(key, PropertyKey::Symbol(_)) || target.has_own_property(key.clone(), context)? {
        return target.get(key, context);
    }
    let name = key.to_string();
    if PROBED_NAMES.contains(&name.as_str()) {
        return Ok(JsValue::undefined());
    }
    let names = session(context)?.borrow().tool_names.clone();
    let listed = if names.is_empty() {
        "this program has no tools".to_owned()
    } else {
        const SHOWN: usize = 30;
        let mut listed = format!(
            "the tools are {}",
            names
                .iter()
                .take(SHOWN)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
        if names.len() > SHOWN {
            listed.push_str(&format!(" and {} more", names.len() - SHOWN));
        }
        listed
    };
    Err(JsNativeError::typ()
        .with_message(format!(
            "tools.{} is not a tool; {listed}",
            clip(&name, 100)
        ))
        .into())
}

/// `tools.finish` / `tools.wait`: direct-only tools, refused with a message that says why.
pub(super) fn reserved_tool(
    _this: &JsValue,
    _args: &[JsValue],
    name: &JsString,
    _context: &mut Context,
) -> JsResult<JsValue> {
    let tool = name.to_std_string_lossy();
    Err(JsNativeError::typ()
        .with_message(format!(
            "tools.{tool} cannot be called from a program: {tool} is a direct call only; return what the next step needs and call {tool} directly"
        ))
        .into())
}

/// Tool calls a program may have waiting for results at once: enough for any `Promise.all`
/// a model writes, few enough that calling in a loop without `await` stops at once. Going past
/// it ends the program (a `try` around the call cannot turn it into a spin that only the
/// instruction budget ends).
pub(super) const MAX_PENDING_CALLS: usize = 1024;

/// `tools.<name>(input)`: sends the call and returns a pending promise.
pub(super) fn call_tool(
    _this: &JsValue,
    args: &[JsValue],
    name: &JsString,
    context: &mut Context,
) -> JsResult<JsValue> {
    let tool = name.to_std_string_lossy();
    if session(context)?.borrow().pending.len() >= MAX_PENDING_CALLS {
        return Err(fatal(
            context,
            CodemodeError::new(
                CodemodeErrorKind::Limit,
                format!(
                    "the program started more than {MAX_PENDING_CALLS} tool calls without waiting for their results (at tools.{tool}); await some before starting more"
                ),
            ),
        ));
    }
    let config = shared(context)?.config.clone();
    let input = match args.first() {
        None => None,
        Some(value) if value.is_undefined() => None,
        Some(value) => Some(value.clone()),
    };
    let input_json = match input {
        // `tools.list()` means "no arguments": an empty object, as schemas expect.
        None => "{}".to_owned(),
        Some(input) => {
            let text = match to_json(&input, context) {
                Err(error) if session(context)?.borrow().json_too_deep => {
                    drop(error);
                    return Err(JsNativeError::typ()
                        .with_message(format!(
                            "tools.{tool}: the input nests more than {MAX_JSON_DEPTH} levels deep"
                        ))
                        .into());
                }
                other => other?,
            };
            let Some(text) = text else {
                return Err(JsNativeError::typ()
                    .with_message(format!(
                        "tools.{tool}: the input cannot be converted to JSON"
                    ))
                    .into());
            };
            let size = utf8_len(&text);
            if size > config.max_transfer_bytes {
                return Err(fatal(
                    context,
                    CodemodeError::new(
                        CodemodeErrorKind::TransferTooLarge,
                        format!(
                            "the input to tools.{tool} is {} as JSON; the per-call transfer limit is {}",
                            human_bytes(size as u64),
                            human_bytes(config.max_transfer_bytes as u64)
                        ),
                    ),
                ));
            }
            json_string(&text)
        }
    };
    let depth = crate::protocol::json_depth(&input_json);
    if depth > MAX_JSON_DEPTH {
        return Err(JsNativeError::typ()
            .with_message(format!(
                "tools.{tool}: the input nests {depth} levels deep; the limit is {MAX_JSON_DEPTH}"
            ))
            .into());
    }
    let session = session(context)?;
    let (promise, resolvers) = JsPromise::new_pending(context);
    let mut session = session.borrow_mut();
    session.next_id += 1;
    let id = session.next_id;
    // Sent when the program next waits (see `Engine::drive`).
    session.queued.push_back(QueuedCall {
        id,
        tool,
        input: input_json,
    });
    session.pending.insert(id, resolvers);
    Ok(promise.into())
}

/// `JSON.stringify(value)` with the original function and the depth guard; `None` when JSON
/// has no representation (`undefined`, functions, symbols).
pub(super) fn to_json(value: &JsValue, context: &mut Context) -> JsResult<Option<JsString>> {
    let (stringify, guard) = {
        let shared = shared(context)?;
        (shared.stringify.clone(), shared.depth_guard.clone())
    };
    // A `toJSON` may log, which converts again: keep the outer conversion's path aside.
    let session = session(context)?;
    let outer = {
        let mut session = session.borrow_mut();
        session.json_too_deep = false;
        std::mem::take(&mut session.json_path)
    };
    let text = stringify.call(
        &JsValue::undefined(),
        &[value.clone(), guard.into()],
        context,
    );
    session.borrow_mut().json_path = outer;
    Ok(text?.as_string())
}

/// The replacer behind [`to_json`]: `stringify` calls it for every value with the holder as
/// `this`, depth first, so the path of open containers is the stack popped back to the holder.
pub(super) fn depth_guard(
    this: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let value = args.get(1).cloned().unwrap_or_default();
    let session = session(context)?;
    let mut session = session.borrow_mut();
    if let Some(holder) = this.as_object() {
        while let Some(top) = session.json_path.last() {
            if JsObject::equals(top, &holder) {
                break;
            }
            session.json_path.pop();
        }
    }
    if let Some(object) = value.as_object()
        && !object.is_callable()
    {
        if session.json_path.len() >= MAX_JSON_DEPTH {
            session.json_too_deep = true;
            return Err(JsNativeError::range()
                .with_message(format!(
                    "value nests more than {MAX_JSON_DEPTH} levels deep"
                ))
                .into());
        }
        session.json_path.push(object);
    }
    Ok(value)
}
