//! Turning pest's failures into MLIR-shaped messages.
//!
//! pest reports the rules (and, with error detail on, the literal tokens) it tried at the
//! furthest position it reached. Those are mapped to readable words (`type`, `SSA operand`,
//! `')'`) so a user never sees a raw rule list.

use super::grammar::Rule;
use pest::error::{Error, ErrorVariant, InputLocation};

/// A syntax error: byte offset (within the text that was parsed) and message.
pub(crate) struct SyntaxError {
    pub pos: usize,
    pub message: String,
}

/// Reads a readable message and the error offset out of a pest error.
pub(crate) fn describe(err: &Error<Rule>) -> SyntaxError {
    let mut pos = match err.location {
        InputLocation::Pos(p) => p,
        InputLocation::Span((s, _)) => s,
    };
    let positives = match &err.variant {
        ErrorVariant::CustomError { message } => {
            let message = if message.contains("stack limit") || message.contains("call limit") {
                "input too complex: nesting or backtracking limit reached".to_string()
            } else {
                message.clone()
            };
            return SyntaxError { pos, message };
        }
        ErrorVariant::ParsingError { positives, .. } => positives,
    };
    // pest places the error at the furthest *rule* it tried; with error detail on it also
    // knows the furthest literal token it tried, which is where the input really went wrong.
    let mut tokens: Vec<String> = Vec::new();
    let mut token_pos = 0;
    if let Some(a) = err.parse_attempts() {
        token_pos = a.max_position;
        // pest does not export its token type; its Display gives the literal text.
        for t in a.expected_tokens() {
            if let Some(w) = token_word(&t.to_string()) {
                if !tokens.contains(&w) {
                    tokens.push(w);
                }
            }
        }
    }
    let mut words: Vec<String> = Vec::new();
    if token_pos > pos && !tokens.is_empty() {
        pos = token_pos;
    } else {
        for r in positives {
            if let Some(w) = rule_word(*r) {
                if !words.iter().any(|x| x == w) {
                    words.push(w.to_string());
                }
            }
        }
        if token_pos != pos {
            tokens.clear();
        }
    }
    // Rule words already cover the literal tokens that start them (`loc` → "location").
    if words.is_empty() {
        words = tokens;
    }
    // A string literal is one way to start a location or an attribute; name the whole thing.
    if words.len() > 1 {
        words.retain(|w| w != "string literal");
    }
    let message = match words.len() {
        0 => "unexpected token".to_string(),
        1 => format!("expected {}", words[0]),
        _ => {
            words.truncate(6);
            let last = words.pop().unwrap_or_default();
            format!("expected {} or {}", words.join(", "), last)
        }
    };
    SyntaxError { pos, message }
}

/// The readable name of a rule pest expected, or `None` for rules that are only noise in a
/// message (optional trailers, whitespace).
fn rule_word(r: Rule) -> Option<&'static str> {
    use Rule::*;
    Some(match r {
        value_use => "SSA operand",
        value_def => "SSA value name",
        value_name => "SSA identifier",
        block_name | block => "block",
        string => "string literal",
        symbol | symbol_ref => "symbol reference",
        number | dec_int => "integer literal",
        r#type | type_tree | function_type | fn_results | int_type | float_type | index_type
        | none_type | tensor_type | memref_type | unranked | dims | dim | encoding
        | layout_rest | tuple_type | opaque_type | dialect_type | func_result
        | func_result_bare | func_results => "type",
        attr_tree | typed_number | typed_string | array_attr | hash_attr | bool_attr
        | unit_attr | dense_array | opaque_attr | opaque_body | type_attr | attr_key
        | dict_entry => "attribute value",
        location | loc_unknown | loc_callsite | loc_fused | loc_file | loc_name | loc_alias => {
            "location"
        }
        operation | generic_op | custom_op | module_op | func_op | return_op | call_op
        | op_name | kw_module | kw_func | kw_return | kw_call => "operation",
        region => "'{'",
        func_args => "'('",
        func_arg | block_arg => "argument",
        EOI => "end of file",
        _ => return None,
    })
}

/// A literal token as shown in a message: punctuation quoted, keywords quoted; whitespace and
/// comment starts dropped.
fn token_word(t: &str) -> Option<String> {
    match t {
        "" | " " | "\t" | "\r" | "\n" | "//" | "BUILTIN_RULE" => None,
        // Character ranges (`0..9`) are spelled out by the rule words instead.
        _ if t.chars().count() == 4 && t.contains("..") => None,
        _ => Some(format!("'{t}'")),
    }
}
