//! `--verify-diagnostics`: checks the diagnostics a chunk produced against the
//! `expected-error` / `expected-warning` / `expected-remark` / `expected-note` comments in it,
//! with MLIR's designators (`@above`, `@below`, `@+N`, `@-N`, `@unknown`) and `-re` forms
//! whose `{{...}}` parts are regular expressions. Mismatches are reported in MLIR's words.

use super::Diag;
use crate::{Context, Diagnostic, Severity, SourceMgr};
use regex::Regex;
use std::sync::OnceLock;

/// How an expectation matches a message.
#[derive(Debug)]
enum Pattern {
    /// The message contains this text.
    Substring(String),
    /// The message matches this regex somewhere.
    Regex(Regex),
}

/// One `expected-*` comment.
#[derive(Debug)]
pub struct Expectation {
    severity: Severity,
    /// The line the diagnostic must be on; `None` for `@unknown`.
    line: Option<u32>,
    pattern: Pattern,
    /// The text between the outer `{{` and `}}`, for messages.
    text: String,
    /// Where the `expected-` word is (line, column), for reporting.
    at: (u32, u32),
    matched: bool,
}

/// A problem found while checking: rendered later at `at` (`None`: no position).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub at: Option<(u32, u32)>,
    pub message: String,
}

fn directive_regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"expected-(error|note|remark|warning)(-re)? *(@([+-][0-9]+|above|below|unknown))? *\{\{(.*)\}\}")
            .expect("static regex")
    })
}

fn severity_from(word: &str) -> Severity {
    match word {
        "error" => Severity::Error,
        "warning" => Severity::Warning,
        "remark" => Severity::Remark,
        _ => Severity::Note,
    }
}

/// Builds the regex of an `expected-*-re` message: literal text, with `{{re}}` parts verbatim.
fn build_regex(text: &str) -> Result<Regex, String> {
    let mut pattern = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        pattern.push_str(&regex::escape(&rest[..open]));
        let after = &rest[open + 2..];
        let close = after
            .find("}}")
            .ok_or("found start of regex with no end '}}'")?;
        pattern.push('(');
        pattern.push_str(&after[..close]);
        pattern.push(')');
        rest = &after[close + 2..];
    }
    pattern.push_str(&regex::escape(rest));
    Regex::new(&pattern).map_err(|e| format!("invalid regex: {e}"))
}

/// Collects the expectations of `text` (a whole chunk, padded so that its line numbers are
/// the original file's). Malformed directives are returned as mismatches.
pub fn parse_expectations(text: &str) -> (Vec<Expectation>, Vec<Mismatch>) {
    let re = directive_regex();
    let mut out: Vec<Expectation> = Vec::new();
    let mut errors = Vec::new();
    let mut pending_below: Vec<usize> = Vec::new();
    let mut last_plain_line = 0u32;
    let total_lines = text.lines().count() as u32;
    for (i, line) in text.lines().enumerate() {
        let line_no = i as u32 + 1;
        let Some(caps) = re.captures(line) else {
            for idx in pending_below.drain(..) {
                out[idx].line = Some(line_no);
            }
            last_plain_line = line_no;
            continue;
        };
        let whole = caps.get(0).map_or(0, |m| m.start());
        let at = (line_no, whole as u32 + 1);
        let severity = severity_from(&caps[1]);
        let body = caps.get(5).map_or("", |m| m.as_str()).to_string();
        let pattern = if caps.get(2).is_some() {
            match build_regex(&body) {
                Ok(r) => Pattern::Regex(r),
                Err(e) => {
                    errors.push(Mismatch {
                        at: Some(at),
                        message: e,
                    });
                    continue;
                }
            }
        } else {
            Pattern::Substring(body.clone())
        };
        let mut target = Some(line_no);
        let mut below = false;
        if let Some(d) = caps.get(4).map(|m| m.as_str()) {
            match d {
                "unknown" => target = None,
                "above" => target = Some(last_plain_line),
                "below" => {
                    below = true;
                    // A dangling @below points past the end, so it can never match.
                    target = Some(total_lines + 1);
                }
                _ => {
                    let n: i64 = d[1..].parse().unwrap_or(0);
                    let signed = if d.starts_with('-') { -n } else { n };
                    target = Some((line_no as i64 + signed).max(0) as u32);
                }
            }
        }
        if below {
            pending_below.push(out.len());
        }
        out.push(Expectation {
            severity,
            line: target,
            pattern,
            text: body,
            at,
            matched: false,
        });
    }
    (out, errors)
}

impl Expectation {
    fn matches(&self, message: &str) -> bool {
        match &self.pattern {
            Pattern::Substring(s) => message.contains(s.as_str()),
            Pattern::Regex(r) => r.is_match(message),
        }
    }
}

/// Matches every diagnostic (notes included) against the expectations; returns what did not
/// match, in MLIR's wording, followed by the expectations that were never produced.
pub fn check(expectations: &mut [Expectation], diags: &[Diag], file: &str) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let mut all: Vec<&Diag> = Vec::new();
    for d in diags {
        all.push(d);
        all.extend(d.notes.iter());
    }
    for d in all {
        // Diagnostics in another file (or without a position) can only match `@unknown`.
        let line = d
            .position
            .as_ref()
            .filter(|(f, _, _)| f == file)
            .map(|(_, l, _)| *l);
        let candidates: Vec<usize> = (0..expectations.len())
            .filter(|&i| expectations[i].line == line && expectations[i].matches(&d.message))
            .collect();
        // Prefer an expectation not yet used, so repeated diagnostics pair off one by one.
        let exact = candidates
            .iter()
            .copied()
            .filter(|&i| expectations[i].severity == d.severity)
            .min_by_key(|&i| expectations[i].matched);
        if let Some(i) = exact {
            expectations[i].matched = true;
            continue;
        }
        if let Some(&near) = candidates.first() {
            out.push(Mismatch {
                at: Some(expectations[near].at),
                message: format!(
                    "'{}' diagnostic emitted when expecting a '{}'",
                    d.severity.as_str(),
                    expectations[near].severity.as_str()
                ),
            });
            continue;
        }
        let at = d
            .position
            .as_ref()
            .filter(|(f, _, _)| f == file)
            .map(|(_, l, c)| (*l, *c));
        out.push(Mismatch {
            at,
            message: format!("unexpected {}: {}", d.severity.as_str(), d.message),
        });
    }
    for e in expectations.iter().filter(|e| !e.matched) {
        out.push(Mismatch {
            at: Some(e.at),
            message: format!(
                "expected {} \"{}\" was not produced",
                e.severity.as_str(),
                e.text
            ),
        });
    }
    out
}

/// `--verify-diagnostics` of one chunk: the chunk's `expected-*` designators against the
/// diagnostics its processing produced; returns every mismatch rendered as an MLIR error at
/// the designator's (or the unexpected diagnostic's) position, empty when all match.
pub fn verify(text: &str, diags: &[Diag], file: &str, sm: &SourceMgr) -> Vec<String> {
    let (mut expectations, mut problems) = parse_expectations(text);
    problems.extend(check(&mut expectations, diags, file));
    let mut ctx = Context::new();
    problems
        .into_iter()
        .map(|p| {
            let loc = match p.at {
                Some((line, col)) => ctx.file_loc(file, line, col),
                None => ctx.unknown_loc(),
            };
            sm.render(&ctx, &Diagnostic::error(loc, p.message))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diag(sev: Severity, line: u32, msg: &str) -> Diag {
        Diag {
            severity: sev,
            position: Some(("f.mlir".into(), line, 3)),
            message: msg.into(),
            rendered: String::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn designators() {
        let text = "a\n// expected-error @below {{first}}\n// expected-note @below {{n}}\nb\nc // expected-error {{same}}\n// expected-warning @above {{w}}\n// expected-remark@-6 {{r}}\n// expected-error @unknown {{u}}\n";
        let (exps, errs) = parse_expectations(text);
        assert!(errs.is_empty());
        let lines: Vec<_> = exps.iter().map(|e| e.line).collect();
        // `@above` skips designator lines: line 5 holds one, so it points at line 4.
        assert_eq!(lines, [Some(4), Some(4), Some(5), Some(4), Some(1), None]);
    }

    #[test]
    fn regex_form() {
        let (mut exps, errs) =
            parse_expectations("x // expected-error-re {{value {{[0-9]+}} is}}\n");
        assert!(errs.is_empty());
        let bad = check(
            &mut exps,
            &[diag(Severity::Error, 1, "the value 42 is bad")],
            "f.mlir",
        );
        assert!(bad.is_empty(), "{bad:?}");
        let (mut exps, _) = parse_expectations("x // expected-error-re {{value {{[0-9]+}} is}}\n");
        let bad = check(
            &mut exps,
            &[diag(Severity::Error, 1, "the value x is bad")],
            "f.mlir",
        );
        assert_eq!(bad.len(), 2);
        assert_eq!(bad[0].message, "unexpected error: the value x is bad");
        assert_eq!(
            bad[1].message,
            "expected error \"value {{[0-9]+}} is\" was not produced"
        );
        assert_eq!(bad[1].at, Some((1, 6)));
    }

    #[test]
    fn near_miss_and_unknown() {
        let (mut exps, _) = parse_expectations(
            "x // expected-warning {{oops}}\n// expected-error @unknown {{nowhere}}\n",
        );
        let mut d = diag(Severity::Error, 1, "oops");
        let mut u = diag(Severity::Error, 0, "nowhere to be seen");
        u.position = None;
        d.notes.push(diag(Severity::Note, 1, "unrelated"));
        let bad = check(&mut exps, &[d, u], "f.mlir");
        let msgs: Vec<_> = bad.iter().map(|m| m.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "'error' diagnostic emitted when expecting a 'warning'",
                "unexpected note: unrelated",
                "expected warning \"oops\" was not produced"
            ]
        );
    }

    #[test]
    fn bad_regex_is_reported() {
        let (_, errs) = parse_expectations("// expected-error-re {{a {{(}} b}}\n");
        assert_eq!(errs.len(), 1);
        assert!(errs[0].message.starts_with("invalid regex"));
    }
}
