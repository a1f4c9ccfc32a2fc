//! Pass statistics: named counters a pass declares statically (MLIR's `Statistic`) and bumps
//! while it runs; the pass manager keeps one set per pass in the pipeline and prints them in
//! MLIR's "Pass statistics report" layout.

/// The declaration of one statistic.
#[derive(Clone, Copy, Debug)]
pub struct StatisticDef {
    /// Short name, printed before the description (`num-cse'd`).
    pub name: &'static str,
    pub description: &'static str,
}

impl StatisticDef {
    /// A statistic declaration.
    pub const fn new(name: &'static str, description: &'static str) -> Self {
        StatisticDef { name, description }
    }
}

/// The counters of one pass instance, in declaration order.
#[derive(Clone, Debug, Default)]
pub struct Statistics {
    counters: Vec<(StatisticDef, u64)>,
}

impl Statistics {
    /// Every declared statistic at zero.
    pub fn new(defs: &[StatisticDef]) -> Self {
        Statistics {
            counters: defs.iter().map(|d| (*d, 0)).collect(),
        }
    }

    /// Adds `n` to statistic `name`. An undeclared name is added on the fly (a pass author's
    /// slip should show up in the report, not abort the run).
    pub fn add(&mut self, name: &str, n: u64) {
        match self.counters.iter_mut().find(|(d, _)| d.name == name) {
            Some((_, v)) => *v += n,
            None => {
                debug_assert!(false, "undeclared statistic '{name}'");
                let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
                self.counters.push((StatisticDef::new(leaked, ""), n));
            }
        }
    }

    /// The value of statistic `name` (0 if undeclared).
    pub fn get(&self, name: &str) -> u64 {
        self.counters
            .iter()
            .find(|(d, _)| d.name == name)
            .map_or(0, |(_, v)| *v)
    }

    /// All counters in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&StatisticDef, u64)> {
        self.counters.iter().map(|(d, v)| (d, *v))
    }

    /// Whether the pass declares no statistics.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// The counters as MLIR prints them under a pass, one per line, values right-aligned:
    /// `{indent}(S) {value} {name} - {description}`.
    pub fn render(&self, indent: usize, out: &mut String) {
        let width = self
            .counters
            .iter()
            .map(|(_, v)| v.to_string().len())
            .max()
            .unwrap_or(1);
        for (d, v) in &self.counters {
            out.push_str(&format!(
                "{:indent$}(S) {v:>width$} {} - {}\n",
                "", d.name, d.description
            ));
        }
    }
}

/// The title banner MLIR puts above its reports (statistics and timing).
pub fn report_banner(title: &str) -> String {
    let rule = format!("==={}===\n", "-".repeat(73));
    let pad = 80usize.saturating_sub(title.len()) / 2;
    format!("{rule}{:pad$}{title}\n{rule}", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_renders_aligned() {
        let mut s = Statistics::new(&[
            StatisticDef::new("a", "first"),
            StatisticDef::new("b", "second"),
        ]);
        s.add("a", 3);
        s.add("b", 120);
        s.add("a", 1);
        assert_eq!(s.get("a"), 4);
        let mut out = String::new();
        s.render(4, &mut out);
        assert_eq!(out, "    (S)   4 a - first\n    (S) 120 b - second\n");
    }

    #[test]
    fn banner_is_centered() {
        let b = report_banner("... Pass statistics report ...");
        let lines: Vec<_> = b.lines().collect();
        assert_eq!(lines[0].len(), 79);
        assert_eq!(
            lines[1],
            format!("{}... Pass statistics report ...", " ".repeat(25))
        );
    }
}
