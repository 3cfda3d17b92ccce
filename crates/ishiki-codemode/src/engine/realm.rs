//! The realm's plumbing: the sandbox state behind a context, fatal stops, native functions,
//! the globals a program sees (`console`, a seeded `Math.random`, a frozen `Date`).

use boa_engine::error::PanicError;
use boa_engine::object::FunctionObjectBuilder;
use boa_engine::property::PropertyDescriptor;
use boa_engine::{
    Context, JsError, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction,
};

use super::console::{console_error, console_log, console_warn};
use super::{SessionRef, Shared};
use crate::error::CodemodeError;

pub(super) fn shared(context: &Context) -> JsResult<&Shared> {
    context.get_data::<Shared>().ok_or_else(|| {
        JsNativeError::typ()
            .with_message("sandbox state is missing")
            .into()
    })
}

pub(super) fn session(context: &Context) -> JsResult<SessionRef> {
    context.get_data::<SessionRef>().cloned().ok_or_else(|| {
        JsNativeError::typ()
            .with_message("sandbox state is missing")
            .into()
    })
}

/// Ends the program with `failure`, past any `try`/`catch` in it.
pub(super) fn fatal(context: &Context, failure: CodemodeError) -> JsError {
    if let Ok(session) = session(context) {
        session.borrow_mut().fatal = Some(failure);
    }
    PanicError::new("codemode: program stopped by the sandbox").into()
}

/// Defines a non-enumerable, non-constructor native method `name` on `object`.
pub(super) fn define_function(
    object: &JsObject,
    name: &str,
    length: usize,
    function: NativeFunction,
    context: &mut Context,
) -> JsResult<()> {
    let function = FunctionObjectBuilder::new(context.realm(), function)
        .name(JsString::from(name))
        .length(length)
        .constructor(false)
        .build();
    object.define_property_or_throw(
        JsString::from(name),
        PropertyDescriptor::builder()
            .value(function)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        context,
    )?;
    Ok(())
}

/// `console`, `Math.random`, and removal of what makes runs differ.
pub(super) fn install_globals(context: &mut Context) -> JsResult<()> {
    let global = context.global_object();
    for name in ["WeakRef", "FinalizationRegistry"] {
        global.delete_property_or_throw(JsString::from(name), context)?;
    }
    let math = global.get(JsString::from("Math"), context)?;
    if let Some(math) = math.as_object() {
        define_function(
            &math,
            "random",
            0,
            NativeFunction::from_fn_ptr(random),
            context,
        )?;
    }
    let console = JsObject::with_object_proto(context.intrinsics());
    for (name, level) in [
        ("log", 0u8),
        ("info", 0),
        ("debug", 0),
        ("warn", 1),
        ("error", 2),
    ] {
        let function = NativeFunction::from_copy_closure(match level {
            1 => console_warn,
            2 => console_error,
            _ => console_log,
        });
        define_function(&console, name, 0, function, context)?;
    }
    global.define_property_or_throw(
        JsString::from("console"),
        PropertyDescriptor::builder()
            .value(console)
            .writable(true)
            .enumerable(false)
            .configurable(true),
        context,
    )?;
    Ok(())
}

/// `Math.random`: xorshift64* from the configured seed, so runs repeat exactly.
pub(super) fn random(
    _this: &JsValue,
    _args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    let session = session(context)?;
    let mut session = session.borrow_mut();
    let mut x = session.rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    session.rng = x;
    let bits = x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
    Ok(JsValue::from(bits as f64 / (1u64 << 53) as f64))
}

/// A non-zero xorshift state from any seed.
pub(super) fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) | 1
}
