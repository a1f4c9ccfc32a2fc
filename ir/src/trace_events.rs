//! Chrome's Trace Event Format, written as text: the one writer behind
//! `commlir-opt --comm-timeline=FILE.json` (the simulated schedule, in `commlir-passes`) and
//! `commlir-run --trace=FILE.json` (the measured run, in `commlir-runtime`), so that the two
//! files read alike. It lives here, in the IR core, because that is the one crate both may
//! depend on (the runtime must not depend on the passes).
//!
//! No serde: the few JSON shapes a trace needs are written by hand, exactly as `serde_json`
//! writes them (compact, object keys of `args` in byte order, floats in the shortest
//! form that reads back, strings escaped the same way), so that the files stay byte-identical.

use std::fmt::Write as _;

/// A value of an event's `args`.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Str(String),
    Int(u64),
    /// Written as `null` when not finite, as JSON has no such numbers.
    Float(f64),
}

impl From<&str> for Arg {
    fn from(s: &str) -> Self {
        Arg::Str(s.to_string())
    }
}

impl From<String> for Arg {
    fn from(s: String) -> Self {
        Arg::Str(s)
    }
}

impl From<u64> for Arg {
    fn from(v: u64) -> Self {
        Arg::Int(v)
    }
}

impl From<u32> for Arg {
    fn from(v: u32) -> Self {
        Arg::Int(u64::from(v))
    }
}

impl From<usize> for Arg {
    fn from(v: usize) -> Self {
        Arg::Int(v as u64)
    }
}

impl From<f64> for Arg {
    fn from(v: f64) -> Self {
        Arg::Float(v)
    }
}

/// An event's `args` object: written with its keys in byte order (a later value of a key
/// replaces the earlier one).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Args(Vec<(&'static str, Arg)>);

impl Args {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` (builder form).
    pub fn with(mut self, key: &'static str, value: impl Into<Arg>) -> Self {
        self.set(key, value);
        self
    }

    /// Sets `key`, replacing an earlier value.
    pub fn set(&mut self, key: &'static str, value: impl Into<Arg>) {
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    fn write(&self, out: &mut String) {
        let mut entries: Vec<&(&'static str, Arg)> = self.0.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        out.push('{');
        for (i, (k, v)) in entries.into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            push_str(out, k);
            out.push(':');
            match v {
                Arg::Str(s) => push_str(out, s),
                Arg::Int(n) => {
                    let _ = write!(out, "{n}");
                }
                Arg::Float(f) => push_f64(out, *f),
            }
        }
        out.push('}');
    }
}

/// One trace event, with the format's field names, written in a fixed field order (the same
/// events give byte-identical files); the optional fields are left out when `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct Event<'a> {
    pub name: &'a str,
    pub cat: Option<&'a str>,
    pub ph: &'a str,
    /// Microseconds.
    pub ts: f64,
    pub dur: Option<f64>,
    pub pid: u64,
    pub tid: u32,
    /// A reserved color name of the trace viewers.
    pub cname: Option<&'a str>,
    pub args: Option<Args>,
}

impl Event<'_> {
    /// The event as one line of compact JSON.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"name\":");
        push_str(&mut out, self.name);
        if let Some(cat) = self.cat {
            out.push_str(",\"cat\":");
            push_str(&mut out, cat);
        }
        out.push_str(",\"ph\":");
        push_str(&mut out, self.ph);
        out.push_str(",\"ts\":");
        push_f64(&mut out, self.ts);
        if let Some(dur) = self.dur {
            out.push_str(",\"dur\":");
            push_f64(&mut out, dur);
        }
        let _ = write!(out, ",\"pid\":{},\"tid\":{}", self.pid, self.tid);
        if let Some(cname) = self.cname {
            out.push_str(",\"cname\":");
            push_str(&mut out, cname);
        }
        if let Some(args) = &self.args {
            out.push_str(",\"args\":");
            args.write(&mut out);
        }
        out.push('}');
        out
    }
}

/// A metadata event (`ph: "M"`) naming or ordering a process or thread.
pub fn meta(name: &'static str, pid: u64, tid: u32, args: Args) -> Event<'static> {
    Event {
        name,
        cat: None,
        ph: "M",
        ts: 0.0,
        dur: None,
        pid,
        tid,
        cname: None,
        args: Some(args),
    }
}

/// The metadata events of one process: its name, its place (`pid`) and, for each
/// `(tid, name)` of `threads`, the thread's name and place (`tid`).
pub fn process_meta(pid: u64, process: &str, threads: &[(u32, &str)]) -> Vec<String> {
    let mut events = vec![
        meta("process_name", pid, 0, Args::new().with("name", process)).to_json(),
        meta(
            "process_sort_index",
            pid,
            0,
            Args::new().with("sort_index", pid),
        )
        .to_json(),
    ];
    for &(tid, name) in threads {
        events.push(meta("thread_name", pid, tid, Args::new().with("name", name)).to_json());
        events.push(
            meta(
                "thread_sort_index",
                pid,
                tid,
                Args::new().with("sort_index", tid),
            )
            .to_json(),
        );
    }
    events
}

/// Writes the events (JSON lines) as a Trace Event Format object
/// (`{"traceEvents": [...], "displayTimeUnit": "ns"}`): one event per line, so that the file
/// diffs and greps well.
pub fn write_trace(events: &[String]) -> String {
    let mut out = String::from("{\"traceEvents\": [\n");
    for (i, e) in events.iter().enumerate() {
        out.push_str(e);
        out.push_str(if i + 1 < events.len() { ",\n" } else { "\n" });
    }
    out.push_str("],\n\"displayTimeUnit\": \"ns\"}\n");
    out
}

/// `s` as a JSON string: `"`, `\` and the control characters escaped (the short escapes
/// where JSON has them, else `\u00xx`).
pub fn push_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `v` as a JSON number in the shortest form that reads back to it, laid out as `serde_json`
/// does: `1.0`, `0.25`, `0.00001`, `1e-7`, `1.5e+20`; `null` when not finite.
pub fn push_f64(out: &mut String, v: f64) {
    if !v.is_finite() {
        out.push_str("null");
        return;
    }
    if v.is_sign_negative() {
        out.push('-');
    }
    if v == 0.0 {
        out.push_str("0.0");
        return;
    }
    // The shortest round-trip digits and the decimal exponent of the first one. Where two
    // strings of that length are as near to `v`, take the even one, as `serde_json` does:
    // `v` correctly rounded to that many digits (ties to even).
    let shortest = format!("{:e}", v.abs());
    let len = shortest
        .split_once('e')
        .map_or(1, |(m, _)| m.replace('.', "").len());
    let sci = format!("{:.*e}", len - 1, v.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|&c| c != '.').collect();
    let len = digits.len() as i32;
    // 10^(point - 1) <= v < 10^point.
    let point = exp + 1;
    if len <= point && point <= 16 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (point - len) as usize));
        out.push_str(".0");
    } else if 0 < point && point <= 16 {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    } else if -5 < point && point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if len > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(out, "e{:+}", point - 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: f64) -> String {
        let mut s = String::new();
        push_f64(&mut s, v);
        s
    }

    /// The layouts of `serde_json`, value by value.
    #[test]
    fn floats_as_serde_json_writes_them() {
        for (v, want) in [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (10.0, "10.0"),
            (0.25, "0.25"),
            (-2.5, "-2.5"),
            (123.456, "123.456"),
            (0.1, "0.1"),
            (1e-5, "0.00001"),
            (1.5e-5, "0.000015"),
            (1e-6, "1e-6"),
            (1.25e-7, "1.25e-7"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e20, "1.5e+20"),
            (9007199254740993.0, "9007199254740992.0"),
            (f64::NAN, "null"),
            (f64::INFINITY, "null"),
        ] {
            assert_eq!(f(v), want, "{v:e}");
        }
    }

    #[test]
    fn strings_escaped_as_serde_json_does() {
        let mut s = String::new();
        push_str(&mut s, "a\"b\\c\nd\te\u{1}f\u{7f}é");
        assert_eq!(s, "\"a\\\"b\\\\c\\nd\\te\\u0001f\u{7f}é\"");
    }

    #[test]
    fn event_fields_in_order_args_sorted() {
        let mut args = Args::new().with("op", "x").with("index", 3usize);
        args.set("bytes", 8u64);
        let e = Event {
            name: "n",
            cat: Some("comm"),
            ph: "X",
            ts: 1.0,
            dur: Some(0.5),
            pid: 2,
            tid: 1,
            cname: None,
            args: Some(args),
        };
        assert_eq!(
            e.to_json(),
            "{\"name\":\"n\",\"cat\":\"comm\",\"ph\":\"X\",\"ts\":1.0,\"dur\":0.5,\"pid\":2,\
             \"tid\":1,\"args\":{\"bytes\":8,\"index\":3,\"op\":\"x\"}}"
        );
        assert_eq!(
            write_trace(&process_meta(1, "p", &[(1, "compute")])),
            "{\"traceEvents\": [\n\
             {\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0.0,\"pid\":1,\"tid\":0,\"args\":{\"name\":\"p\"}},\n\
             {\"name\":\"process_sort_index\",\"ph\":\"M\",\"ts\":0.0,\"pid\":1,\"tid\":0,\"args\":{\"sort_index\":1}},\n\
             {\"name\":\"thread_name\",\"ph\":\"M\",\"ts\":0.0,\"pid\":1,\"tid\":1,\"args\":{\"name\":\"compute\"}},\n\
             {\"name\":\"thread_sort_index\",\"ph\":\"M\",\"ts\":0.0,\"pid\":1,\"tid\":1,\"args\":{\"sort_index\":1}}\n\
             ],\n\"displayTimeUnit\": \"ns\"}\n"
        );
    }
}
