//! Guards around MLIR's parser, which recurses on nesting and overflows its stack on deep
//! input (`mlir-opt` crashes there; commlir must not): a pre-scan that rejects nesting deeper
//! than commlir's own parser allows, with a located diagnostic, and a large stack for the
//! MLIR work itself.

use crate::session::MlirDiagnostic;

/// The deepest bracket nesting handed to MLIR: commlir's parser limit
/// ([`commlir_ir::parser::ParseOptions`]'s default).
pub const MAX_NESTING: usize = 1000;

/// The stack MLIR's parser, verifier and printer run on.
pub const MLIR_STACK_BYTES: usize = 512 << 20;

/// Checks that `(`, `[`, `{` and `<` nest at most `limit` deep in `text` (outside string
/// literals and `//` comments); the error points at the first bracket past the limit.
/// `>` of `->` may close nothing: depth is never negative, so that only under-counts.
pub fn check_nesting(source_name: &str, text: &str, limit: usize) -> Result<(), MlirDiagnostic> {
    let b = text.as_bytes();
    let (mut depth, mut line, mut line_start) = (0usize, 1u32, 0usize);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line += 1;
                line_start = i + 1;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'(' | b'[' | b'{' | b'<' => {
                depth += 1;
                if depth > limit {
                    let col = text[line_start..i].chars().count() as u32 + 1;
                    return Err(MlirDiagnostic {
                        severity: "error",
                        file_loc: Some((source_name.to_string(), line, col)),
                        message: format!(
                            "nesting deeper than {limit} levels: not handed to MLIR, whose parser recurses on it"
                        ),
                        notes: Vec::new(),
                    });
                }
            }
            b')' | b']' | b'}' | b'>' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Runs `f` on a thread with [`MLIR_STACK_BYTES`] of stack.
pub fn on_big_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("commlir-mlir".into())
            .stack_size(MLIR_STACK_BYTES)
            .spawn_scoped(s, f)
            .expect("cannot start the MLIR thread")
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_bounded_and_located() {
        assert!(check_nesting("f", "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32>", 3).is_ok());
        let deep = format!("x\n  {}", "(".repeat(5));
        let d = check_nesting("f", &deep, 4).unwrap_err();
        assert_eq!(d.file_loc, Some(("f".into(), 2, 7)));
        // Brackets in strings and comments do not count.
        assert!(check_nesting("f", "\"((((((\" // ((((((\n()", 2).is_ok());
        // `->` never drives the depth negative.
        assert!(check_nesting("f", "-> -> -> ((", 2).is_ok());
    }
}
