//! Completing a tool input cut short, as the official Anthropic SDK does (its vendored
//! partial-JSON parser): a call cut by `max_tokens` keeps every value that arrived whole.

use serde_json::Value;

/// Completes a JSON text cut short, as the official Anthropic SDK's partial-JSON parser does:
/// an unterminated string or literal is dropped, then a dangling `:`, `,` or object key, then
/// every open object and array is closed. `None` when even that is not JSON.
pub(crate) fn complete(text: &str) -> Option<Value> {
    #[derive(Clone, Copy, PartialEq)]
    enum Token {
        Open(u8),
        Close,
        Colon,
        Comma,
        /// A complete scalar (string, number or literal) ending at this byte offset.
        Scalar,
    }
    let bytes = text.as_bytes();
    let mut tokens: Vec<(Token, usize, usize)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        match bytes[i] {
            b'{' | b'[' => tokens.push((Token::Open(bytes[i]), start, i + 1)),
            b'}' | b']' => tokens.push((Token::Close, start, i + 1)),
            b':' => tokens.push((Token::Colon, start, i + 1)),
            b',' => tokens.push((Token::Comma, start, i + 1)),
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if i >= bytes.len() {
                    break; // unterminated: dropped
                }
                tokens.push((Token::Scalar, start, i + 1));
            }
            b if b.is_ascii_whitespace() => {}
            _ => {
                while i + 1 < bytes.len()
                    && !matches!(bytes[i + 1], b',' | b':' | b'}' | b']')
                    && !bytes[i + 1].is_ascii_whitespace()
                {
                    i += 1;
                }
                let word = &text[start..=i];
                // A number at the very end may have been cut (`12` of `123`): the SDK drops it,
                // and so does a number or literal that does not parse.
                let number = matches!(bytes[start], b'-' | b'0'..=b'9');
                if serde_json::from_str::<Value>(word).is_err() || (number && i + 1 == bytes.len())
                {
                    break;
                }
                tokens.push((Token::Scalar, start, i + 1));
            }
        }
        i += 1;
    }
    // Strip what cannot end a value: a separator, or a key without its value.
    loop {
        let n = tokens.len();
        let before = |k: usize| n.checked_sub(k + 1).map(|at| tokens[at].0);
        let in_object_key = |k: usize| {
            matches!(before(k + 1), Some(Token::Open(b'{') | Token::Comma)) && {
                // A comma is a key position only inside an object.
                let mut depth = 0i32;
                let mut object = false;
                for (t, _, _) in tokens[..n - k - 1].iter().rev() {
                    match t {
                        Token::Close => depth += 1,
                        Token::Open(kind) if depth == 0 => {
                            object = *kind == b'{';
                            break;
                        }
                        Token::Open(_) => depth -= 1,
                        _ => {}
                    }
                }
                object
            }
        };
        match before(0) {
            Some(Token::Colon | Token::Comma) => {
                tokens.pop();
            }
            Some(Token::Scalar) if in_object_key(0) => {
                tokens.pop();
            }
            _ => break,
        }
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut open = Vec::new();
    for (token, start, end) in &tokens {
        match token {
            Token::Open(kind) => open.push(*kind),
            Token::Close => {
                open.pop();
            }
            _ => {}
        }
        out.push_str(&text[*start..*end]);
    }
    for kind in open.iter().rev() {
        out.push(if *kind == b'{' { '}' } else { ']' });
    }
    serde_json::from_str(&out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cut_tool_input_is_completed_as_the_sdk_completes_it() {
        let cases = [
            (r#"{"a": "hel"#, json!({})),
            (r#"{"a": 1, "b": [2"#, json!({ "a": 1, "b": [] })),
            (r#"{"a": 1, "b": [2, 3"#, json!({ "a": 1, "b": [2] })),
            (r#"{"a": 1, "b""#, json!({ "a": 1 })),
            (r#"{"a": 1, "b":"#, json!({ "a": 1 })),
            (r#"{"a": {"c": [1, 2,"#, json!({ "a": { "c": [1, 2] } })),
            (r#"{"a": tr"#, json!({})),
            (r#"{"s": "x\"y", "t": ["u"#, json!({ "s": "x\"y", "t": [] })),
        ];
        for (text, expected) in cases {
            assert_eq!(complete(text), Some(expected), "{text}");
        }
    }
}
