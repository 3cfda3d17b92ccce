//! `Array.prototype.sort`/`toSorted` and `%TypedArray%.prototype.sort`/`toSorted` installed
//! over Boa's own, sorting with a merge sort that tolerates any comparator.
//!
//! Boa 0.22 sorts with Rust's `slice::sort_by`, which since Rust 1.81 may panic ("does not
//! correctly implement a total order") when the comparator is inconsistent. JavaScript allows
//! such comparators — `a.sort(() => Math.random() - 0.5)` is a common shuffle — and requires
//! only that the result be *some* permutation; the panic instead ends the program past any
//! `try`/`catch`. The merge sort here only ever moves elements it owns between two buffers, so
//! whatever the comparator answers, each element comes out exactly once and no index leaves its
//! slice. Everything else follows the ECMAScript algorithms (`SortIndexedProperties`,
//! `CompareArrayElements`, `CompareTypedArrayElements`); validation of typed arrays and the
//! comparator-less typed-array sorts, whose numeric order is total, stay Boa's.

use boa_engine::object::builtins::{JsArray, JsFunction};
use boa_engine::{
    Context, JsNativeError, JsObject, JsResult, JsString, JsValue, NativeFunction, js_string,
};
use std::cmp::Ordering;

/// The typed-array built-ins these replace, kept for validation and the comparator-less sort.
#[derive(Debug, Clone)]
struct Originals {
    typed_sort: JsFunction,
    typed_to_sorted: JsFunction,
    /// A native `() => 0`: with it Boa's sort validates and copies without reordering (a
    /// comparator that calls everything equal is consistent, so it cannot panic).
    keep_order: JsFunction,
}

type Native = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

/// Replaces the four sorting methods, keeping name, length and attributes.
pub(crate) fn install(context: &mut Context) -> JsResult<()> {
    let typed = context
        .intrinsics()
        .constructors()
        .typed_array()
        .prototype();
    let get = |object: &JsObject, name: &str, context: &mut Context| -> JsResult<JsFunction> {
        object
            .get(JsString::from(name), context)?
            .as_object()
            .and_then(JsFunction::from_object)
            .ok_or_else(|| {
                JsNativeError::typ()
                    .with_message(format!("{name} is missing"))
                    .into()
            })
    };
    let keep_order = boa_engine::object::FunctionObjectBuilder::new(
        context.realm(),
        NativeFunction::from_fn_ptr(|_, _, _| Ok(JsValue::from(0))),
    )
    .build();
    let originals = Originals {
        typed_sort: get(&typed, "sort", context)?,
        typed_to_sorted: get(&typed, "toSorted", context)?,
        keep_order,
    };
    context.insert_data(originals);
    let array = context.intrinsics().constructors().array().prototype();
    let methods: [(&JsObject, &str, Native); 4] = [
        (&array, "sort", array_sort),
        (&array, "toSorted", array_to_sorted),
        (&typed, "sort", typed_sort),
        (&typed, "toSorted", typed_to_sorted),
    ];
    for (object, name, function) in methods {
        super::define_function(
            object,
            name,
            1,
            NativeFunction::from_fn_ptr(function),
            context,
        )?;
    }
    Ok(())
}

fn originals(context: &Context) -> JsResult<Originals> {
    context.get_data::<Originals>().cloned().ok_or_else(|| {
        JsNativeError::typ()
            .with_message("sort built-ins are not installed")
            .into()
    })
}

/// A stable bottom-up merge sort that assumes nothing of `after` (true: `a` must come after
/// `b`). Elements only move from one buffer into the other, so every element comes out exactly
/// once whatever `after` answers. Stops at the comparator's first error, as the specification
/// asks.
pub(crate) fn merge_sort<T: Clone, E>(
    items: Vec<T>,
    mut after: impl FnMut(&T, &T) -> Result<bool, E>,
) -> Result<Vec<T>, E> {
    let n = items.len();
    let mut from = items;
    let mut into: Vec<T> = Vec::with_capacity(n);
    let mut width = 1usize;
    while width < n {
        into.clear();
        for run in from.chunks(width.saturating_mul(2)) {
            let (left, right) = run.split_at(width.min(run.len()));
            let (mut l, mut r) = (left.iter().peekable(), right.iter().peekable());
            while let (Some(a), Some(b)) = (l.peek(), r.peek()) {
                if after(a, b)? {
                    into.push((*b).clone());
                    r.next();
                } else {
                    into.push((*a).clone());
                    l.next();
                }
            }
            into.extend(l.cloned());
            into.extend(r.cloned());
        }
        std::mem::swap(&mut from, &mut into);
        width = width.saturating_mul(2);
    }
    Ok(from)
}

/// Step 1 of every sort: `comparefn` must be undefined or callable.
fn comparator(args: &[JsValue], message: &'static str) -> JsResult<Option<JsObject>> {
    match args.first().cloned().unwrap_or_default() {
        value if value.is_undefined() => Ok(None),
        value => match value.as_object() {
            Some(object) if object.is_callable() => Ok(Some(object)),
            _ => Err(JsNativeError::typ().with_message(message).into()),
        },
    }
}

/// `? Call(comparefn, undefined, « x, y »)` as a number, NaN counting as +0.
fn call_comparator(
    comparefn: &JsObject,
    x: &JsValue,
    y: &JsValue,
    context: &mut Context,
) -> JsResult<Ordering> {
    let v = comparefn
        .call(&JsValue::undefined(), &[x.clone(), y.clone()], context)?
        .to_number(context)?;
    Ok(v.partial_cmp(&0.0).unwrap_or(Ordering::Equal))
}

/// `CompareArrayElements(x, y, comparefn)`.
fn compare_array_elements(
    x: &JsValue,
    y: &JsValue,
    comparefn: Option<&JsObject>,
    context: &mut Context,
) -> JsResult<Ordering> {
    match (x.is_undefined(), y.is_undefined()) {
        (true, true) => return Ok(Ordering::Equal),
        (true, false) => return Ok(Ordering::Greater),
        (false, true) => return Ok(Ordering::Less),
        (false, false) => {}
    }
    if let Some(comparefn) = comparefn {
        return call_comparator(comparefn, x, y, context);
    }
    let x = x.to_string(context)?;
    let y = y.to_string(context)?;
    // Code-unit order, which is what `IsLessThan` does for two strings.
    Ok(x.cmp(&y))
}

/// `SortIndexedProperties(obj, len, SortCompare, holes)` with [`merge_sort`].
fn sort_indexed_properties(
    obj: &JsObject,
    len: u64,
    skip_holes: bool,
    compare: impl Fn(&JsValue, &JsValue, &mut Context) -> JsResult<Ordering>,
    context: &mut Context,
) -> JsResult<Vec<JsValue>> {
    let mut items = Vec::new();
    for k in 0..len {
        if !skip_holes || obj.has_property(k, context)? {
            items.push(obj.get(k, context)?);
        }
    }
    merge_sort(items, |x, y| {
        Ok(compare(x, y, context)? == Ordering::Greater)
    })
}

fn length_of_array_like(obj: &JsObject, context: &mut Context) -> JsResult<u64> {
    obj.get(js_string!("length"), context)?.to_length(context)
}

/// `Array.prototype.sort ( comparefn )`.
fn array_sort(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let comparefn = comparator(
        args,
        "The comparison function must be either a function or undefined",
    )?;
    let obj = this.to_object(context)?;
    let len = length_of_array_like(&obj, context)?;
    let sorted = sort_indexed_properties(
        &obj,
        len,
        true,
        |x, y, context| compare_array_elements(x, y, comparefn.as_ref(), context),
        context,
    )?;
    let count = sorted.len() as u64;
    for (j, item) in sorted.into_iter().enumerate() {
        obj.set(j, item, true, context)?;
    }
    // The holes that were skipped move to the end, as deleted indices.
    for j in count..len {
        obj.delete_property_or_throw(j, context)?;
    }
    Ok(obj.into())
}

/// `Array.prototype.toSorted ( comparefn )`.
fn array_to_sorted(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let comparefn = comparator(
        args,
        "The comparison function must be either a function or undefined",
    )?;
    let obj = this.to_object(context)?;
    let len = length_of_array_like(&obj, context)?;
    // ArrayCreate(len) refuses lengths past 2^32 - 1.
    if len > u64::from(u32::MAX) {
        return Err(JsNativeError::range()
            .with_message("array exceeded max size")
            .into());
    }
    let sorted = sort_indexed_properties(
        &obj,
        len,
        false,
        |x, y, context| compare_array_elements(x, y, comparefn.as_ref(), context),
        context,
    )?;
    Ok(JsArray::from_iter(sorted, context).into())
}

const TYPED_NOT_CALLABLE: &str = "TypedArray.sort called with non-callable comparefn";

/// Sorts a valid typed array in place with a comparator (`CompareTypedArrayElements` with
/// `comparefn` present: the comparator decides, NaN counting as +0).
fn sort_typed_in_place(
    array: &JsObject,
    comparefn: &JsObject,
    context: &mut Context,
) -> JsResult<()> {
    let len = boa_engine::object::builtins::JsTypedArray::from_object(array.clone())?
        .length(context)? as u64;
    let sorted = sort_indexed_properties(
        array,
        len,
        false,
        |x, y, context| call_comparator(comparefn, x, y, context),
        context,
    )?;
    for (j, item) in sorted.into_iter().enumerate() {
        // A comparator may have detached or shrunk the buffer: writes past it are no-ops.
        array.set(j, item, true, context)?;
    }
    Ok(())
}

/// `%TypedArray%.prototype.sort ( comparefn )`.
fn typed_sort(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let originals = originals(context)?;
    let Some(comparefn) = comparator(args, TYPED_NOT_CALLABLE)? else {
        // Numeric order is total: Boa's own sort cannot panic on it.
        return originals.typed_sort.call(this, args, context);
    };
    // Boa validates the typed array (a TypeError when detached or out of bounds) and keeps its
    // order.
    originals
        .typed_sort
        .call(this, &[originals.keep_order.clone().into()], context)?;
    let array = this
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("Value is not a typed array object"))?;
    sort_typed_in_place(&array, &comparefn, context)?;
    Ok(this.clone())
}

/// `%TypedArray%.prototype.toSorted ( comparefn )`.
fn typed_to_sorted(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let originals = originals(context)?;
    let Some(comparefn) = comparator(args, TYPED_NOT_CALLABLE)? else {
        return originals.typed_to_sorted.call(this, args, context);
    };
    // A validated copy of the same kind, in the original order, then sorted in place.
    let copy =
        originals
            .typed_to_sorted
            .call(this, &[originals.keep_order.clone().into()], context)?;
    let array = copy
        .as_object()
        .ok_or_else(|| JsNativeError::typ().with_message("Value is not a typed array object"))?;
    sort_typed_in_place(&array, &comparefn, context)?;
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::merge_sort;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn merge_sort_returns_a_permutation_whatever_the_comparator_answers(
            items in proptest::collection::vec(0u32..1000, 0..300),
            answers in proptest::collection::vec(any::<bool>(), 1..64),
        ) {
            let mut i = 0usize;
            let sorted: Result<Vec<u32>, ()> = merge_sort(items.clone(), |_, _| {
                i += 1;
                Ok(answers[i % answers.len()])
            });
            let mut sorted = sorted.expect("no error");
            let mut items = items;
            sorted.sort_unstable();
            items.sort_unstable();
            prop_assert_eq!(sorted, items);
        }

        #[test]
        fn merge_sort_is_a_stable_sort_for_a_consistent_comparator(
            items in proptest::collection::vec((0u8..8, any::<u16>()), 0..300),
        ) {
            let sorted: Result<_, ()> = merge_sort(items.clone(), |a, b| Ok(a.0 > b.0));
            let mut expected = items;
            expected.sort_by_key(|item| item.0);
            prop_assert_eq!(sorted.expect("no error"), expected);
        }
    }
}
