//! What the engine reports when a program fails in a way JavaScript cannot catch: limits,
//! engine panics behind a limit, syntax errors with their program line.

use boa_engine::JsError;
use boa_engine::error::{EngineError, PanicError, RuntimeLimitError};

use crate::config::EngineConfig;
use crate::error::{CodemodeError, CodemodeErrorKind};
use crate::tool::clip;

pub(super) fn engine_error(error: &EngineError, config: &EngineConfig) -> CodemodeError {
    let message = match error {
        EngineError::RuntimeLimit(RuntimeLimitError::LoopIteration) => format!(
            "the program ran more than {} loop iterations in one function call; it probably loops forever",
            config.loop_iteration_limit
        ),
        EngineError::RuntimeLimit(RuntimeLimitError::Recursion) => format!(
            "the program nested function calls more than {} deep; it probably recurses without end",
            config.recursion_limit
        ),
        EngineError::RuntimeLimit(RuntimeLimitError::StackSize) => {
            "the program overflowed the engine's value stack (deep recursion or a huge argument list)"
                .to_owned()
        }
        EngineError::NoInstructionsRemain => format!(
            "the program used its whole budget of {} instructions; it probably loops forever",
            config.instruction_budget
        ),
        EngineError::Panic(panic) => {
            // Boa wraps a limit met inside some built-ins (a promise capability for a deeply
            // recursing async function) in an internal "cannot fail per spec" panic: name the
            // limit instead.
            if let Some(limit) = limit_behind(panic) {
                return engine_error(&limit, config);
            }
            return CodemodeError::new(
                CodemodeErrorKind::Worker,
                format!("the engine failed: {}", clip(panic.message(), 200)),
            );
        }
    };
    CodemodeError::new(CodemodeErrorKind::Limit, message)
}

/// The runtime limit or budget error a Boa panic was raised for, if any.
pub(super) fn limit_behind(panic: &PanicError) -> Option<EngineError> {
    let mut source = std::error::Error::source(panic);
    while let Some(error) = source {
        let js = error
            .downcast_ref::<JsError>()
            .or_else(|| error.downcast_ref::<Box<JsError>>().map(AsRef::as_ref));
        match js.and_then(JsError::as_engine) {
            Some(EngineError::Panic(inner)) => return limit_behind(inner),
            Some(engine) => return Some(engine.clone()),
            None => {}
        }
        source = error.source();
    }
    None
}

/// Renumbers "at line N" in a parser message for the wrapper's first line. An error on the
/// wrapper's closing line (after `last_program_line`) means the program left something open,
/// which swallowed the wrapper's own `})`.
pub(super) fn syntax_error(error: &JsError, last_program_line: usize) -> CodemodeError {
    const UNCLOSED: &str = "the program ends early (an unclosed bracket, string or comment?)";
    let raw = error
        .as_native()
        .map(|native| native.message().to_owned())
        .unwrap_or_else(|| error.to_string());
    let mut message = String::with_capacity(raw.len());
    let mut rest = raw.as_str();
    let mut past_end = false;
    while let Some(at) = rest.find("line ") {
        let (head, tail) = rest.split_at(at + "line ".len());
        message.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        match tail[..digits].parse::<usize>() {
            Ok(line) => {
                past_end |= line > last_program_line;
                message.push_str(&line.saturating_sub(1).max(1).to_string());
            }
            Err(_) => message.push_str(&tail[..digits]),
        }
        rest = &tail[digits..];
    }
    message.push_str(rest);
    let message = if past_end || message == "abrupt end" {
        UNCLOSED.to_owned()
    } else {
        message
    };
    CodemodeError::new(
        CodemodeErrorKind::Syntax,
        format!("syntax error: {}", clip(&message, 300)),
    )
}
