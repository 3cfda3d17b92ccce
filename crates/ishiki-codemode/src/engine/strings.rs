//! Linear-time `String.prototype` methods installed over Boa's own.
//!
//! Boa 0.22 searches with `windows().skip(from)`, which walks from the start on every call, so
//! `split`, `indexOf`, `replaceAll` and friends are quadratic: `text.split("\n")` on 430 KB
//! takes seconds, and model programs split files into lines all the time. These replacements
//! follow the ECMAScript algorithms step by step for the common case — a string `this` and a
//! string pattern — and hand every other case (RegExp and other objects, numbers, `.call` on
//! non-strings) to the original built-in, which also keeps every error and side-effect order.
//! JS strings are UTF-16: all positions here are code-unit indices, and Latin-1 strings are
//! compared unit by unit with UTF-16 ones.

use boa_engine::object::builtins::JsArray;
use boa_engine::object::builtins::JsFunction;
use boa_engine::string::{JsStr, JsStrVariant};
use boa_engine::value::IntegerOrInfinity;
use boa_engine::{Context, JsResult, JsString, JsValue, NativeFunction};

/// The built-ins these replace, kept for the cases the fast paths hand back.
#[derive(Debug, Clone)]
pub(crate) struct Originals {
    split: JsFunction,
    index_of: JsFunction,
    last_index_of: JsFunction,
    includes: JsFunction,
    replace: JsFunction,
    replace_all: JsFunction,
}

type Native = fn(&JsValue, &[JsValue], &mut Context) -> JsResult<JsValue>;

/// Replaces the six methods on `String.prototype`, keeping name, length and attributes.
pub(crate) fn install(context: &mut Context) -> JsResult<()> {
    let proto = context.intrinsics().constructors().string().prototype();
    let get = |name: &str, context: &mut Context| -> JsResult<JsFunction> {
        proto
            .get(JsString::from(name), context)?
            .as_object()
            .and_then(JsFunction::from_object)
            .ok_or_else(|| {
                boa_engine::JsNativeError::typ()
                    .with_message(format!("String.prototype.{name} is missing"))
                    .into()
            })
    };
    let originals = Originals {
        split: get("split", context)?,
        index_of: get("indexOf", context)?,
        last_index_of: get("lastIndexOf", context)?,
        includes: get("includes", context)?,
        replace: get("replace", context)?,
        replace_all: get("replaceAll", context)?,
    };
    context.insert_data(originals);
    let methods: [(&str, usize, Native); 6] = [
        ("split", 2, split),
        ("indexOf", 1, index_of),
        ("lastIndexOf", 1, last_index_of),
        ("includes", 1, includes),
        ("replace", 2, replace),
        ("replaceAll", 2, replace_all),
    ];
    for (name, length, function) in methods {
        super::define_function(
            &proto,
            name,
            length,
            NativeFunction::from_fn_ptr(function),
            context,
        )?;
    }
    Ok(())
}

fn original(context: &Context, pick: fn(&Originals) -> &JsFunction) -> JsResult<JsFunction> {
    context
        .get_data::<Originals>()
        .map(|o| pick(o).clone())
        .ok_or_else(|| {
            boa_engine::JsNativeError::typ()
                .with_message("string built-ins are not installed")
                .into()
        })
}

fn delegate(
    pick: fn(&Originals) -> &JsFunction,
    this: &JsValue,
    args: &[JsValue],
    context: &mut Context,
) -> JsResult<JsValue> {
    original(context, pick)?.call(this, args, context)
}

fn arg(args: &[JsValue], i: usize) -> JsValue {
    args.get(i).cloned().unwrap_or_default()
}

/// `this` and the pattern argument, when both are string primitives.
fn strings(this: &JsValue, pattern: &JsValue) -> Option<(JsString, JsString)> {
    Some((this.as_string()?, pattern.as_string()?))
}

/// `String.prototype.split(separator, limit)` for a string separator.
fn split(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let Some((s, separator)) = strings(this, &arg(args, 0)) else {
        return delegate(|o| &o.split, this, args, context);
    };
    // 4. If limit is undefined, let lim be 2^32 - 1; else let lim be ℝ(? ToUint32(limit)).
    let limit = arg(args, 1);
    let lim = if limit.is_undefined() {
        u32::MAX
    } else {
        limit.to_u32(context)?
    } as usize;
    // 6. If lim = 0, return an empty array.
    if lim == 0 {
        return Ok(JsArray::new(context)?.into());
    }
    // 9. An empty separator splits into code units.
    if separator.is_empty() {
        let head = s.len().min(lim);
        let units = (0..head).map(|i| JsValue::from(s.slice(i, i + 1)));
        return Ok(JsArray::from_iter(units, context).into());
    }
    // 10. If S is the empty String, return « S ».
    if s.is_empty() {
        return Ok(JsArray::from_iter([JsValue::from(s)], context).into());
    }
    let finder = Finder::new(separator.as_str());
    let hay = s.as_str();
    let mut parts = Vec::new();
    let mut i = 0;
    let mut j = finder.find(hay, 0);
    while let Some(index) = j {
        parts.push(JsValue::from(s.slice(i, index)));
        if parts.len() == lim {
            return Ok(JsArray::from_iter(parts, context).into());
        }
        i = index + separator.len();
        j = finder.find(hay, i);
    }
    parts.push(JsValue::from(s.slice(i, s.len())));
    Ok(JsArray::from_iter(parts, context).into())
}

fn clamp(pos: IntegerOrInfinity, len: usize) -> usize {
    pos.clamp_finite(0, len as i64) as usize
}

/// `String.prototype.indexOf(searchString, position)`.
fn index_of(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let Some((s, search)) = strings(this, &arg(args, 0)) else {
        return delegate(|o| &o.index_of, this, args, context);
    };
    let start = clamp(arg(args, 1).to_integer_or_infinity(context)?, s.len());
    Ok(match Finder::new(search.as_str()).find(s.as_str(), start) {
        Some(i) => JsValue::from(i),
        None => JsValue::from(-1),
    })
}

/// `String.prototype.includes(searchString, position)`.
fn includes(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let Some((s, search)) = strings(this, &arg(args, 0)) else {
        return delegate(|o| &o.includes, this, args, context);
    };
    let start = clamp(arg(args, 1).to_integer_or_infinity(context)?, s.len());
    Ok(Finder::new(search.as_str())
        .find(s.as_str(), start)
        .is_some()
        .into())
}

/// `String.prototype.lastIndexOf(searchString, position)`.
fn last_index_of(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let Some((s, search)) = strings(this, &arg(args, 0)) else {
        return delegate(|o| &o.last_index_of, this, args, context);
    };
    // 4-6. numPos = ToNumber(position); NaN means +∞.
    let num_pos = arg(args, 1).to_number(context)?;
    let pos = if num_pos.is_nan() {
        IntegerOrInfinity::PositiveInfinity
    } else {
        JsValue::from(num_pos).to_integer_or_infinity(context)?
    };
    let len = s.len();
    let start = clamp(pos, len);
    if search.is_empty() {
        return Ok(JsValue::from(start));
    }
    let Some(last_start) = len.checked_sub(search.len()) else {
        return Ok(JsValue::from(-1));
    };
    let end = start.min(last_start) + search.len();
    Ok(match Finder::new(search.as_str()).rfind(s.as_str(), end) {
        Some(i) => JsValue::from(i),
        None => JsValue::from(-1),
    })
}

/// How a replacement is produced: a function's result or a template with `$` patterns.
enum Replacer {
    Function(boa_engine::JsObject),
    Template(JsString),
}

impl Replacer {
    fn new(value: &JsValue, context: &mut Context) -> JsResult<Self> {
        Ok(match value.as_callable() {
            Some(function) => Self::Function(function),
            None => Self::Template(value.to_string(context)?),
        })
    }

    fn replacement(
        &self,
        search: &JsString,
        s: &JsString,
        position: usize,
        context: &mut Context,
    ) -> JsResult<JsString> {
        match self {
            Self::Function(function) => function
                .call(
                    &JsValue::undefined(),
                    &[
                        search.clone().into(),
                        JsValue::from(position),
                        s.clone().into(),
                    ],
                    context,
                )?
                .to_string(context),
            Self::Template(template) => Ok(substitution(
                search.as_str(),
                s.as_str(),
                position,
                template,
            )),
        }
    }
}

/// `String.prototype.replace(searchValue, replaceValue)` for a string pattern.
fn replace(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let Some((s, search)) = strings(this, &arg(args, 0)) else {
        return delegate(|o| &o.replace, this, args, context);
    };
    let replacer = Replacer::new(&arg(args, 1), context)?;
    let Some(position) = Finder::new(search.as_str()).find(s.as_str(), 0) else {
        return Ok(s.into());
    };
    let replacement = replacer.replacement(&search, &s, position, context)?;
    let hay = s.as_str();
    let (Some(before), Some(after)) = (hay.get(..position), hay.get(position + search.len()..))
    else {
        return Ok(s.clone().into());
    };
    Ok(JsString::concat_array(&[before, replacement.as_str(), after]).into())
}

/// `String.prototype.replaceAll(searchValue, replaceValue)` for a string pattern.
fn replace_all(this: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let Some((s, search)) = strings(this, &arg(args, 0)) else {
        return delegate(|o| &o.replace_all, this, args, context);
    };
    let replacer = Replacer::new(&arg(args, 1), context)?;
    let finder = Finder::new(search.as_str());
    let hay = s.as_str();
    let advance = search.len().max(1);
    let mut positions = Vec::new();
    let mut position = finder.find(hay, 0);
    while let Some(p) = position {
        positions.push(p);
        position = finder.find(hay, p + advance);
    }
    if positions.is_empty() {
        return Ok(s.into());
    }
    let mut replacements = Vec::with_capacity(positions.len());
    for &p in &positions {
        replacements.push(replacer.replacement(&search, &s, p, context)?);
    }
    let mut parts = Vec::with_capacity(positions.len() * 2 + 1);
    let mut end_of_last_match = 0;
    for (&p, replacement) in positions.iter().zip(&replacements) {
        parts.push(hay.get(end_of_last_match..p).unwrap_or(JsStr::EMPTY));
        parts.push(replacement.as_str());
        end_of_last_match = p + search.len();
    }
    if end_of_last_match < hay.len() {
        parts.push(hay.get(end_of_last_match..).unwrap_or(JsStr::EMPTY));
    }
    Ok(JsString::concat_array(&parts).into())
}

/// GetSubstitution for a string pattern (no captures, no named groups): only `$$`, `$&`,
/// `` $` `` and `$'` are special; `$1`, `$<` and a lone `$` stay as written.
pub(crate) fn substitution(
    matched: JsStr<'_>,
    s: JsStr<'_>,
    position: usize,
    template: &JsString,
) -> JsString {
    let t = template.as_str();
    if !t.iter().any(|u| u == u16::from(b'$')) {
        return template.clone();
    }
    let units: Vec<u16> = t.iter().collect();
    let mut out: Vec<u16> = Vec::with_capacity(units.len());
    let mut i = 0;
    while i < units.len() {
        let unit = units[i];
        if unit == u16::from(b'$')
            && let Some(&next) = units.get(i + 1)
        {
            let piece = match u8::try_from(next) {
                Ok(b'$') => Some(JsStr::latin1(b"$")),
                Ok(b'&') => Some(matched),
                Ok(b'`') => s.get(..position.min(s.len())),
                Ok(b'\'') => {
                    let tail = (position + matched.len()).min(s.len());
                    s.get(tail..)
                }
                _ => None,
            };
            if let Some(piece) = piece {
                out.extend(piece.iter());
                i += 2;
                continue;
            }
        }
        out.push(unit);
        i += 1;
    }
    JsString::from(&out[..])
}

/// A needle prepared once for many searches in one haystack.
struct Finder {
    /// The needle as bytes, when every unit fits Latin-1 (otherwise it cannot occur in a
    /// Latin-1 haystack).
    latin1: Option<Vec<u8>>,
    utf16: Vec<u16>,
}

impl Finder {
    fn new(needle: JsStr<'_>) -> Self {
        let utf16: Vec<u16> = needle.iter().collect();
        let latin1 = utf16
            .iter()
            .map(|&u| u8::try_from(u).ok())
            .collect::<Option<Vec<u8>>>();
        Self { latin1, utf16 }
    }

    /// StringIndexOf(hay, needle, from).
    fn find(&self, hay: JsStr<'_>, from: usize) -> Option<usize> {
        if from > hay.len() {
            return None;
        }
        if self.utf16.is_empty() {
            return Some(from);
        }
        match hay.variant() {
            JsStrVariant::Latin1(h) => {
                let needle = self.latin1.as_deref()?;
                memchr::memmem::find(&h[from..], needle).map(|i| i + from)
            }
            JsStrVariant::Utf16(h) => find_units(&h[from..], &self.utf16).map(|i| i + from),
        }
    }

    /// The last match that ends at or before `end`.
    fn rfind(&self, hay: JsStr<'_>, end: usize) -> Option<usize> {
        let end = end.min(hay.len());
        match hay.variant() {
            JsStrVariant::Latin1(h) => {
                let needle = self.latin1.as_deref()?;
                memchr::memmem::rfind(&h[..end], needle)
            }
            JsStrVariant::Utf16(h) => rfind_units(&h[..end], &self.utf16),
        }
    }
}

fn find_units(hay: &[u16], needle: &[u16]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let last_start = hay.len().checked_sub(needle.len())?;
    (0..=last_start).find(|&i| hay[i] == first && &hay[i + 1..i + needle.len()] == rest)
}

fn rfind_units(hay: &[u16], needle: &[u16]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let last_start = hay.len().checked_sub(needle.len())?;
    (0..=last_start)
        .rev()
        .find(|&i| hay[i] == first && &hay[i + 1..i + needle.len()] == rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use boa_engine::context::ContextBuilder;
    use boa_engine::{JsObject, Source};
    use proptest::prelude::*;

    /// Code units that exercise the interesting cases: `$` patterns, Latin-1 above ASCII,
    /// a BMP character and both halves of a surrogate pair (so pairs and lone halves occur).
    const UNITS: [u16; 14] = [
        b'a' as u16,
        b'b' as u16,
        b'\n' as u16,
        b'$' as u16,
        b'&' as u16,
        b'`' as u16,
        b'\'' as u16,
        b'1' as u16,
        b'<' as u16,
        0xE9,
        0xFC,
        0x4E2D,
        0xD83D,
        0xDE00,
    ];

    fn units(max: usize) -> impl Strategy<Value = Vec<u16>> {
        prop::collection::vec(prop::sample::select(&UNITS[..]), 0..max)
    }

    /// A string from code units: Latin-1 storage when `latin1` and possible, else UTF-16.
    fn js(units: &[u16], latin1: bool) -> JsString {
        match units
            .iter()
            .map(|&u| u8::try_from(u).ok())
            .collect::<Option<Vec<u8>>>()
        {
            Some(bytes) if latin1 => JsString::from(JsStr::latin1(&bytes)),
            _ => JsString::from(units),
        }
    }

    struct Pair {
        context: Context,
        fast: JsObject,
        original: Originals,
        replacer: JsValue,
    }

    fn pair() -> Pair {
        let mut context = ContextBuilder::new()
            .instructions_remaining(usize::MAX)
            .build()
            .expect("context");
        install(&mut context).expect("install");
        let original = context.get_data::<Originals>().expect("originals").clone();
        let fast = context.intrinsics().constructors().string().prototype();
        let replacer = context
            .eval(Source::from_bytes("(m, p, s) => `[${m}|${p}|${s.length}]`"))
            .expect("replacer");
        Pair {
            context,
            fast,
            original,
            replacer,
        }
    }

    /// A comparable rendering of a result: strings as code units, arrays element-wise.
    fn render(result: JsResult<JsValue>, context: &mut Context) -> String {
        match result {
            Err(error) => format!("error {}", error.as_native().map_or("?", |e| e.message())),
            Ok(value) => {
                if let Some(s) = value.as_string() {
                    return format!("string {:?}", s.to_vec());
                }
                if let Some(array) = value.as_object().and_then(|o| JsArray::from_object(o).ok()) {
                    let len = array.length(context).unwrap_or_default();
                    let items: Vec<String> = (0..len)
                        .map(|i| {
                            let item = array.get(i, context).unwrap_or_default();
                            render(Ok(item), context)
                        })
                        .collect();
                    return format!("array [{}]", items.join(", "));
                }
                if let Some(n) = value.as_number() {
                    return format!("number {n}");
                }
                format!("other {}", value.display())
            }
        }
    }

    fn compare(
        p: &mut Pair,
        method: &str,
        pick: fn(&Originals) -> &JsFunction,
        this: JsString,
        args: &[JsValue],
    ) -> (String, String) {
        let fast = p
            .fast
            .get(JsString::from(method), &mut p.context)
            .expect("method");
        let fast = fast.as_callable().expect("callable");
        let this = JsValue::from(this);
        let got = fast.call(&this, args, &mut p.context);
        let got = render(got, &mut p.context);
        let want = pick(&p.original).call(&this, args, &mut p.context);
        let want = render(want, &mut p.context);
        (got, want)
    }

    fn position() -> impl Strategy<Value = JsValue> {
        prop_oneof![
            Just(JsValue::undefined()),
            Just(JsValue::from(f64::NAN)),
            Just(JsValue::from(f64::INFINITY)),
            Just(JsValue::from(f64::NEG_INFINITY)),
            (-3i32..12).prop_map(JsValue::from),
            Just(JsValue::from(2.5)),
        ]
    }

    fn limit() -> impl Strategy<Value = JsValue> {
        prop_oneof![
            Just(JsValue::undefined()),
            (0i32..6).prop_map(JsValue::from),
            Just(JsValue::from(-1)),
            Just(JsValue::from(4_294_967_297.0)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn fast_split_matches_original(
            s in units(24), sep in units(3), latin1 in any::<bool>(), lim in limit()
        ) {
            let mut p = pair();
            let args = [JsValue::from(js(&sep, !latin1)), lim];
            let (got, want) = compare(&mut p, "split", |o| &o.split, js(&s, latin1), &args);
            prop_assert_eq!(got, want);
        }

        #[test]
        fn fast_searches_match_original(
            s in units(24), search in units(3), latin1 in any::<bool>(), pos in position()
        ) {
            let mut p = pair();
            let args = [JsValue::from(js(&search, !latin1)), pos];
            let this = js(&s, latin1);
            let (got, want) = compare(&mut p, "indexOf", |o| &o.index_of, this.clone(), &args);
            prop_assert_eq!(got, want);
            let (got, want) =
                compare(&mut p, "lastIndexOf", |o| &o.last_index_of, this.clone(), &args);
            prop_assert_eq!(got, want);
            let (got, want) = compare(&mut p, "includes", |o| &o.includes, this, &args);
            prop_assert_eq!(got, want);
        }

        #[test]
        fn fast_replace_matches_original(
            s in units(20), search in units(3), template in units(6),
            latin1 in any::<bool>(), functional in any::<bool>()
        ) {
            let mut p = pair();
            let replacement = if functional {
                p.replacer.clone()
            } else {
                JsValue::from(js(&template, latin1))
            };
            let args = [JsValue::from(js(&search, !latin1)), replacement];
            let this = js(&s, latin1);
            let (got, want) = compare(&mut p, "replace", |o| &o.replace, this.clone(), &args);
            prop_assert_eq!(got, want);
            let (got, want) = compare(&mut p, "replaceAll", |o| &o.replace_all, this, &args);
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn astral_and_dollar_cases() {
        let mut p = pair();
        let smile: Vec<u16> = "a😀b😀".encode_utf16().collect();
        let half = [0xDE00u16];
        let args = [
            JsValue::from(JsString::from(&half[..])),
            JsValue::undefined(),
        ];
        let (got, want) = compare(
            &mut p,
            "split",
            |o| &o.split,
            JsString::from(&smile[..]),
            &args,
        );
        assert_eq!(got, want);
        let args = [
            JsValue::from(JsString::from("b")),
            JsValue::from(JsString::from("<$&|$`|$'|$$|$1|$<x>|$>")),
        ];
        let (got, want) = compare(
            &mut p,
            "replaceAll",
            |o| &o.replace_all,
            JsString::from("abcb"),
            &args,
        );
        assert_eq!(got, want);
        assert_eq!(
            got,
            format!(
                "string {:?}",
                "a<b|a|cb|$|$1|$<x>|$>c<b|abc||$|$1|$<x>|$>"
                    .encode_utf16()
                    .collect::<Vec<_>>()
            )
        );
    }
}
