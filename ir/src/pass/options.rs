//! Pass options: their declarations (name, type, default, help), their parsed values, and the
//! MLIR option syntax inside `{...}`: `key=value` pairs separated by spaces, values that may be
//! quoted (`"a b"`, `'a b'`) or braced (`{a b}`), lists as `1,2,3`, and a bare key meaning
//! `true` for a boolean.

use std::fmt::Write as _;

/// The type of an option value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionKind {
    Bool,
    Int,
    UInt,
    Float,
    String,
    /// One of the listed strings.
    Enum(&'static [&'static str]),
    IntList,
    StringList,
}

impl OptionKind {
    /// The value placeholder shown in `--help` (`<int>`, `<string>`, ...), as LLVM's
    /// command-line library names the types.
    pub fn placeholder(self) -> &'static str {
        match self {
            OptionKind::Bool => "",
            OptionKind::Int | OptionKind::IntList => "<long>",
            OptionKind::UInt => "<ulong>",
            OptionKind::Float => "<number>",
            OptionKind::String | OptionKind::StringList => "<string>",
            OptionKind::Enum(_) => "<value>",
        }
    }

    fn describe(self) -> String {
        match self {
            OptionKind::Bool => "a boolean (true, false, 1 or 0)".into(),
            OptionKind::Int => "an integer".into(),
            OptionKind::UInt => "an unsigned integer".into(),
            OptionKind::Float => "a number".into(),
            OptionKind::String => "a string".into(),
            OptionKind::Enum(v) => format!("one of {}", v.join(", ")),
            OptionKind::IntList => "a comma-separated list of integers".into(),
            OptionKind::StringList => "a comma-separated list of strings".into(),
        }
    }
}

/// The declaration of one pass option.
#[derive(Clone, Copy, Debug)]
pub struct OptionDef {
    /// The option's name in pipelines (`max-iterations`).
    pub name: &'static str,
    pub kind: OptionKind,
    /// The default, written as it would be on the command line (`""` for an empty string or
    /// list; for a number, `0` when empty).
    pub default: &'static str,
    pub help: &'static str,
}

impl OptionDef {
    /// A boolean option.
    pub const fn bool(name: &'static str, default: bool, help: &'static str) -> Self {
        let default = if default { "true" } else { "false" };
        OptionDef {
            name,
            kind: OptionKind::Bool,
            default,
            help,
        }
    }
    /// An option of any kind with its default given as text.
    pub const fn new(
        name: &'static str,
        kind: OptionKind,
        default: &'static str,
        help: &'static str,
    ) -> Self {
        OptionDef {
            name,
            kind,
            default,
            help,
        }
    }

    /// The default value, parsed. Definitions are static data, so a malformed default is a
    /// programming error; it degrades to the kind's zero value rather than aborting a run.
    pub fn default_value(&self) -> OptionValue {
        let zero = OptionValue::zero(self.kind);
        if self.default.is_empty() {
            return zero;
        }
        let parsed = parse_value(self.kind, self.default);
        debug_assert!(parsed.is_ok(), "bad default for option '{}'", self.name);
        parsed.unwrap_or(zero)
    }
}

/// A parsed option value.
#[derive(Clone, Debug, PartialEq)]
pub enum OptionValue {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    /// A string, or an enum's chosen spelling.
    String(String),
    IntList(Vec<i64>),
    StringList(Vec<String>),
}

impl OptionValue {
    fn zero(kind: OptionKind) -> Self {
        match kind {
            OptionKind::Bool => OptionValue::Bool(false),
            OptionKind::Int => OptionValue::Int(0),
            OptionKind::UInt => OptionValue::UInt(0),
            OptionKind::Float => OptionValue::Float(0.0),
            OptionKind::String => OptionValue::String(String::new()),
            OptionKind::Enum(v) => OptionValue::String(v.first().copied().unwrap_or("").into()),
            OptionKind::IntList => OptionValue::IntList(Vec::new()),
            OptionKind::StringList => OptionValue::StringList(Vec::new()),
        }
    }

    /// Writes the value as MLIR prints it in a pipeline (the text after `key=`).
    pub fn print(&self, out: &mut String) {
        match self {
            OptionValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            OptionValue::Int(i) => {
                let _ = write!(out, "{i}");
            }
            OptionValue::UInt(u) => {
                let _ = write!(out, "{u}");
            }
            OptionValue::Float(f) => out.push_str(&format_double(*f)),
            OptionValue::String(s) => print_string(out, s),
            OptionValue::IntList(v) => {
                let items: Vec<String> = v.iter().map(|i| i.to_string()).collect();
                out.push_str(&items.join(","));
            }
            OptionValue::StringList(v) => {
                for (i, s) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    print_string(out, s);
                }
            }
        }
    }

    /// Whether the value prints as nothing at all (an empty list, which MLIR leaves out).
    fn is_empty_list(&self) -> bool {
        matches!(self, OptionValue::IntList(v) if v.is_empty())
            || matches!(self, OptionValue::StringList(v) if v.is_empty())
    }
}

/// Strings with a space, comma or brace are wrapped in braces so that they read back as one
/// value (MLIR's textual pipeline escaping).
fn print_string(out: &mut String, s: &str) {
    let needs_braces = s
        .chars()
        .any(|c| c.is_whitespace() || c == ',' || c == '{' || c == '}');
    if needs_braces {
        out.push('{');
        out.push_str(s);
        out.push('}');
    } else {
        out.push_str(s);
    }
}

/// Formats a double the way LLVM's `raw_ostream` does (`printf("%e")`: `1.500000e-01`).
pub fn format_double(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{f:.6e}");
    match s.split_once('e') {
        Some((mantissa, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mantissa}e{sign}{digits:0>2}")
        }
        None => s,
    }
}

/// Parses the text of one value (already unquoted for scalars) as `kind`.
pub fn parse_value(kind: OptionKind, text: &str) -> Result<OptionValue, String> {
    let bad = || format!("'{text}' is not {}", kind.describe());
    match kind {
        OptionKind::Bool => match text {
            "true" | "TRUE" | "True" | "1" => Ok(OptionValue::Bool(true)),
            "false" | "FALSE" | "False" | "0" => Ok(OptionValue::Bool(false)),
            _ => Err(bad()),
        },
        OptionKind::Int => parse_i64(text).map(OptionValue::Int).ok_or_else(bad),
        OptionKind::UInt => parse_u64(text).map(OptionValue::UInt).ok_or_else(bad),
        OptionKind::Float => text
            .parse::<f64>()
            .map(OptionValue::Float)
            .map_err(|_| bad()),
        OptionKind::String => Ok(OptionValue::String(unquote(text).to_string())),
        OptionKind::Enum(allowed) => {
            let t = unquote(text);
            if allowed.contains(&t) {
                Ok(OptionValue::String(t.to_string()))
            } else {
                Err(bad())
            }
        }
        OptionKind::IntList => split_list(text)
            .into_iter()
            .map(|item| parse_i64(unquote(item)).ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()
            .map(OptionValue::IntList),
        OptionKind::StringList => Ok(OptionValue::StringList(
            split_list(text)
                .into_iter()
                .map(|s| unquote(s).to_string())
                .collect(),
        )),
    }
}

fn parse_i64(text: &str) -> Option<i64> {
    let t = text.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let mag = parse_u64(body)?;
    if neg {
        0i64.checked_sub_unsigned(mag)
    } else {
        i64::try_from(mag).ok()
    }
}

fn parse_u64(text: &str) -> Option<u64> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok();
    }
    if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// Removes one level of surrounding quotes or braces.
pub fn unquote(text: &str) -> &str {
    let t = text.trim();
    let b = t.as_bytes();
    if b.len() >= 2 {
        let (first, last) = (b[0], b[b.len() - 1]);
        if (first == b'"' && last == b'"')
            || (first == b'\'' && last == b'\'')
            || (first == b'{' && last == b'}')
        {
            return &t[1..t.len() - 1];
        }
    }
    t
}

/// Splits a list value at the commas that are not inside quotes or braces.
fn split_list(text: &str) -> Vec<&str> {
    let text = text.trim();
    if text.is_empty() {
        return Vec::new();
    }
    let mut items = Vec::new();
    let mut start = 0;
    let mut depth = 0usize;
    let mut quote: Option<u8> = None;
    for (i, b) in text.bytes().enumerate() {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'{') => depth += 1,
            (None, b'}') => depth = depth.saturating_sub(1),
            (None, b',') if depth == 0 => {
                items.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(text[start..].trim());
    items
}

/// One `key[=value]` item of an option string, with byte offsets into that string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawOption<'a> {
    pub key: &'a str,
    pub key_at: usize,
    /// The value text (still quoted or braced), if there was an `=`.
    pub value: Option<&'a str>,
    pub value_at: usize,
}

/// Splits an option string into `key[=value]` items. Errors carry the byte offset of an
/// unterminated quote or brace.
pub fn split_options(text: &str) -> Result<Vec<RawOption<'_>>, (usize, String)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let key_at = i;
        while i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'=' {
            i += 1;
        }
        let key = &text[key_at..i];
        if i < bytes.len() && bytes[i] == b'=' {
            i += 1;
            let value_at = i;
            let mut depth = 0usize;
            let mut quote: Option<(u8, usize)> = None;
            while i < bytes.len() {
                let b = bytes[i];
                match quote {
                    Some((q, _)) if b == q => quote = None,
                    Some(_) => {}
                    None => match b {
                        b'"' | b'\'' => quote = Some((b, i)),
                        b'{' => depth += 1,
                        b'}' => {
                            if depth == 0 {
                                return Err((i, "unbalanced '}' in option value".into()));
                            }
                            depth -= 1;
                        }
                        _ if b.is_ascii_whitespace() && depth == 0 => break,
                        _ => {}
                    },
                }
                i += 1;
            }
            if let Some((_, at)) = quote {
                return Err((at, "unterminated quote in option value".into()));
            }
            if depth != 0 {
                return Err((value_at, "unbalanced '{' in option value".into()));
            }
            out.push(RawOption {
                key,
                key_at,
                value: Some(&text[value_at..i]),
                value_at,
            });
        } else {
            out.push(RawOption {
                key,
                key_at,
                value: None,
                value_at: i,
            });
        }
    }
    Ok(out)
}

/// The option values of one pass instance, in declaration order.
#[derive(Clone, Debug)]
pub struct PassOptions {
    values: Vec<(&'static OptionDef, OptionValue)>,
    /// Names assigned explicitly, to reject a scalar given twice.
    assigned: Vec<&'static str>,
}

impl PassOptions {
    /// Every declared option at its default.
    pub fn defaults(defs: &'static [OptionDef]) -> Self {
        PassOptions {
            values: defs.iter().map(|d| (d, d.default_value())).collect(),
            assigned: Vec::new(),
        }
    }

    /// Sets option `key` from its text; a missing value means `true` for a boolean. A list
    /// given twice accumulates, as LLVM's list options do.
    pub fn set(&mut self, key: &str, value: Option<&str>) -> Result<(), String> {
        let Some(slot) = self.values.iter_mut().find(|(d, _)| d.name == key) else {
            return Err(format!("no such option '{key}'"));
        };
        let def = slot.0;
        let text = match (value, def.kind) {
            (Some(v), _) => v,
            (None, OptionKind::Bool) => "true",
            (None, _) => return Err(format!("option '{key}' requires a value")),
        };
        let parsed = parse_value(def.kind, text)
            .map_err(|e| format!("invalid value for option '{key}': {e}"))?;
        let first = !self.assigned.contains(&def.name);
        match (&mut slot.1, parsed) {
            (OptionValue::IntList(old), OptionValue::IntList(new)) if !first => old.extend(new),
            (OptionValue::StringList(old), OptionValue::StringList(new)) if !first => {
                old.extend(new)
            }
            (_, _) if !first => return Err(format!("option '{key}' given more than once")),
            (s, p) => *s = p,
        }
        self.assigned.push(def.name);
        Ok(())
    }

    /// The value of option `name`, if declared.
    pub fn get(&self, name: &str) -> Option<&OptionValue> {
        self.values
            .iter()
            .find(|(d, _)| d.name == name)
            .map(|(_, v)| v)
    }
    /// A boolean option (false if undeclared or of another kind).
    pub fn get_bool(&self, name: &str) -> bool {
        matches!(self.get(name), Some(OptionValue::Bool(true)))
    }
    /// An integer option (0 if undeclared or of another kind).
    pub fn get_int(&self, name: &str) -> i64 {
        match self.get(name) {
            Some(OptionValue::Int(i)) => *i,
            Some(OptionValue::UInt(u)) => i64::try_from(*u).unwrap_or(i64::MAX),
            _ => 0,
        }
    }
    /// An unsigned option (0 if undeclared or of another kind).
    pub fn get_uint(&self, name: &str) -> u64 {
        match self.get(name) {
            Some(OptionValue::UInt(u)) => *u,
            Some(OptionValue::Int(i)) => u64::try_from(*i).unwrap_or(0),
            _ => 0,
        }
    }
    /// A float option (0.0 if undeclared or of another kind).
    pub fn get_float(&self, name: &str) -> f64 {
        match self.get(name) {
            Some(OptionValue::Float(f)) => *f,
            Some(OptionValue::Int(i)) => *i as f64,
            _ => 0.0,
        }
    }
    /// A string or enum option ("" if undeclared or of another kind).
    pub fn get_str(&self, name: &str) -> &str {
        match self.get(name) {
            Some(OptionValue::String(s)) => s,
            _ => "",
        }
    }
    /// An integer-list option (empty if undeclared or of another kind).
    pub fn get_int_list(&self, name: &str) -> &[i64] {
        match self.get(name) {
            Some(OptionValue::IntList(v)) => v,
            _ => &[],
        }
    }
    /// A string-list option (empty if undeclared or of another kind).
    pub fn get_str_list(&self, name: &str) -> &[String] {
        match self.get(name) {
            Some(OptionValue::StringList(v)) => v,
            _ => &[],
        }
    }

    /// Whether the pass declares no options at all.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The options as MLIR prints them inside `{...}`: every option with its value, sorted by
    /// name, separated by spaces (empty lists are left out).
    pub fn to_option_string(&self) -> String {
        let mut sorted: Vec<_> = self
            .values
            .iter()
            .filter(|(_, v)| !v.is_empty_list())
            .collect();
        sorted.sort_by_key(|(d, _)| d.name);
        let mut out = String::new();
        for (i, (d, v)) in sorted.iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(d.name);
            out.push('=');
            v.print(&mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static DEFS: [OptionDef; 5] = [
        OptionDef::bool("flag", false, "a flag"),
        OptionDef::new("count", OptionKind::Int, "0", "a count"),
        OptionDef::new("name", OptionKind::String, "", "a name"),
        OptionDef::new("list", OptionKind::IntList, "", "a list"),
        OptionDef::new("ratio", OptionKind::Float, "0.5", "a ratio"),
    ];

    #[test]
    fn defaults_print_sorted() {
        let o = PassOptions::defaults(&DEFS);
        assert_eq!(
            o.to_option_string(),
            "count=0 flag=false name= ratio=5.000000e-01"
        );
    }

    #[test]
    fn set_and_print() {
        let mut o = PassOptions::defaults(&DEFS);
        for r in split_options("flag count=-3 name={a b} list=1,2,0x10").unwrap() {
            o.set(r.key, r.value).unwrap();
        }
        assert!(o.get_bool("flag"));
        assert_eq!(o.get_int("count"), -3);
        assert_eq!(o.get_str("name"), "a b");
        assert_eq!(o.get_int_list("list"), &[1, 2, 16]);
        assert_eq!(
            o.to_option_string(),
            "count=-3 flag=true list=1,2,16 name={a b} ratio=5.000000e-01"
        );
    }

    #[test]
    fn quoted_values() {
        let raw = split_options(r#"name="x y" list='1'"#).unwrap();
        assert_eq!(raw[0].value, Some("\"x y\""));
        let mut o = PassOptions::defaults(&DEFS);
        o.set("name", raw[0].value).unwrap();
        assert_eq!(o.get_str("name"), "x y");
    }

    #[test]
    fn errors() {
        let mut o = PassOptions::defaults(&DEFS);
        assert!(o
            .set("nope", Some("1"))
            .unwrap_err()
            .contains("no such option 'nope'"));
        assert!(o
            .set("count", None)
            .unwrap_err()
            .contains("requires a value"));
        assert!(o
            .set("flag", Some("yes"))
            .unwrap_err()
            .contains("not a boolean"));
        o.set("count", Some("1")).unwrap();
        assert!(o
            .set("count", Some("2"))
            .unwrap_err()
            .contains("more than once"));
        o.set("list", Some("1")).unwrap();
        o.set("list", Some("2,3")).unwrap();
        assert_eq!(o.get_int_list("list"), &[1, 2, 3]);
        assert_eq!(split_options("name=\"abc").unwrap_err().0, 5);
        assert_eq!(split_options("name={abc").unwrap_err().0, 5);
    }

    #[test]
    fn doubles_print_like_llvm() {
        assert_eq!(format_double(0.0), "0.000000e+00");
        assert_eq!(format_double(131072.0), "1.310720e+05");
        assert_eq!(format_double(-0.25), "-2.500000e-01");
        assert_eq!(format_double(1e-100), "1.000000e-100");
    }
}
