//! The `commlir-opt` command line: mlir-opt's flag names and meanings, built with clap's
//! builder API so that every registered pass becomes a flag (`--cse`,
//! `--test-options='flag=true count=3'`). LLVM-style single-dash long flags (`-cse`,
//! `-split-input-file`) are accepted too, since MLIR tests are written that way.

use clap::builder::BoolishValueParser;
use clap::{Arg, ArgAction, ArgMatches, Command};
use commlir_ir::pass::{OptionKind, PassInfo, PassRegistry};
use std::ffi::OsString;

/// The default `--split-input-file` marker, also used between chunks in the output.
pub const SPLIT_MARKER: &str = "// -----";

fn flag(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .action(ArgAction::SetTrue)
        .help(help)
}

fn pass_list(name: &'static str, help: &'static str) -> Arg {
    Arg::new(name)
        .long(name)
        .value_name("PASS")
        .action(ArgAction::Append)
        .value_delimiter(',')
        .help(help)
}

/// The help text of a pass flag: its summary, then its options with type, default and help.
fn pass_help(info: &PassInfo) -> String {
    let mut s = info.summary.to_string();
    for o in info.options {
        let ty = match o.kind {
            OptionKind::Bool => "<bool>".to_string(),
            OptionKind::Enum(v) => format!("<{}>", v.join("|")),
            OptionKind::IntList => "<long>,...".to_string(),
            OptionKind::StringList => "<string>,...".to_string(),
            k => k.placeholder().to_string(),
        };
        let default = if o.default.is_empty() {
            String::new()
        } else {
            format!(" (default: {})", o.default)
        };
        s.push_str(&format!("\n  {}={ty} - {}{default}", o.name, o.help));
    }
    s
}

/// The driver's own flags (pass flags are added by [`command`]).
fn base_command() -> Command {
    Command::new("commlir-opt")
        .version(env!("CARGO_PKG_VERSION"))
        .about("commlir modular optimizer driver (mlir-opt's flags)")
        .arg(Arg::new("input").value_name("INPUT").default_value("-").help("Input file ('-' for stdin)"))
        .arg(Arg::new("output").short('o').value_name("FILE").default_value("-").help("Output file ('-' for stdout)"))
        .arg(
            Arg::new("split-input-file")
                .long("split-input-file")
                .value_name("MARKER")
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value(SPLIT_MARKER)
                .help("Split the input at marker lines (default '// -----') and process each chunk independently"),
        )
        .arg(
            Arg::new("output-split-marker")
                .long("output-split-marker")
                .value_name("MARKER")
                .default_value(SPLIT_MARKER)
                .help("Line written between the outputs of split chunks"),
        )
        .arg(flag("verify-diagnostics", "Check that emitted diagnostics match expected-* lines in the input"))
        .arg(flag("allow-unregistered-dialect", "Allow operations of unregistered dialects"))
        .arg(flag("mlir-print-op-generic", "Print the generic form of every operation"))
        .arg(flag("mlir-print-debuginfo", "Print locations"))
        .arg(pass_list("mlir-print-ir-before", "Print the IR before each run of these passes"))
        .arg(pass_list("mlir-print-ir-after", "Print the IR after each run of these passes"))
        .arg(flag("mlir-print-ir-before-all", "Print the IR before every pass"))
        .arg(flag("mlir-print-ir-after-all", "Print the IR after every pass"))
        .arg(flag("mlir-print-ir-after-change", "When printing the IR after a pass, only print it if the pass changed it"))
        .arg(flag("mlir-print-ir-after-failure", "Print the IR after a pass that failed"))
        .arg(flag("mlir-print-ir-module-scope", "When printing the IR around a pass, print the whole module"))
        .arg(flag("mlir-timing", "Report the execution time of each pass and phase on stderr"))
        .arg(flag("mlir-pass-statistics", "Report pass statistics on stderr"))
        .arg(flag("mlir-disable-threading", "Accepted for compatibility (commlir-opt runs on one thread)"))
        .arg(flag(
            "mlir-very-unsafe-disable-verifier-on-parsing",
            "Do not verify the IR after parsing it",
        ))
        .arg(
            Arg::new("comm-report")
                .long("comm-report")
                .value_name("FILE")
                .help("Write the communication report (JSON: peak memory, exposed communication, collectives, pools) of the IR after the pipeline"),
        )
        .arg(
            Arg::new("comm-timeline")
                .long("comm-timeline")
                .value_name("FILE")
                .help("Write the simulated schedule of each function of the IR after the pipeline: FILE.json as Chrome trace events (Perfetto, chrome://tracing), FILE.svg as a picture"),
        )
        .arg(
            Arg::new("machine")
                .long("machine")
                .value_name("NAME|FILE")
                .help("The machine --comm-report and --comm-timeline simulate on: a built-in name (--list-machines) or a machine file (default: the module's commlir.machine, else h200x2-nvlink)"),
        )
        .arg(
            Arg::new("pass-pipeline")
                .long("pass-pipeline")
                .value_name("PIPELINE")
                .help("A textual pass pipeline, e.g. 'builtin.module(func.func(cse))'"),
        )
        .arg(
            Arg::new("verify-each")
                .long("verify-each")
                .value_name("BOOL")
                .num_args(0..=1)
                .require_equals(true)
                .default_value("true")
                .default_missing_value("true")
                .value_parser(BoolishValueParser::new())
                .help("Verify the IR after each pass"),
        )
        .arg(flag("dump-pass-pipeline", "Print the pass pipeline, in canonical form, on stderr before running it"))
        .arg(flag("list-passes", "List the registered passes with their options and exit"))
        .arg(flag("list-machines", "List the built-in machine descriptions of the cost model and exit"))
        .arg(flag("show-dialects", "List the registered dialects and exit"))
}

/// The full command: driver flags plus one flag per registered pass (under "Passes").
pub fn command(registry: &PassRegistry) -> Command {
    let mut cmd = base_command();
    let taken: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    for info in registry.passes() {
        // A pass named like a driver flag could not be told apart; it stays usable in
        // --pass-pipeline.
        if taken.iter().any(|t| t == info.argument) {
            continue;
        }
        cmd = cmd.arg(
            Arg::new(info.argument)
                .long(info.argument)
                .value_name("OPTIONS")
                .num_args(0..=1)
                .require_equals(true)
                .default_missing_value("")
                .action(ArgAction::Append)
                .help(pass_help(info))
                .help_heading("Passes"),
        );
    }
    cmd
}

/// Rewrites LLVM-style `-long-flag[=v]` arguments to `--long-flag[=v]` when `long-flag` is one
/// of `cmd`'s long flags; everything after `--` is left alone.
pub fn normalize_args(cmd: &Command, args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let longs: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
    let mut out = Vec::new();
    let mut rest_verbatim = false;
    for (i, a) in args.into_iter().enumerate() {
        if i == 0 || rest_verbatim {
            out.push(a);
            continue;
        }
        let Some(s) = a.to_str() else {
            out.push(a);
            continue;
        };
        if s == "--" {
            rest_verbatim = true;
            out.push(a);
            continue;
        }
        let single_dash_long = s.len() > 2 && s.starts_with('-') && !s.starts_with("--");
        let name = s
            .get(1..)
            .map(|n| n.split_once('=').map_or(n, |(k, _)| k))
            .unwrap_or("");
        if single_dash_long && longs.contains(&name) {
            out.push(OsString::from(format!("-{s}")));
        } else {
            out.push(a);
        }
    }
    out
}

/// The pass flags in command-line order, each with its option text.
pub fn pass_flags(
    matches: &ArgMatches,
    registry: &PassRegistry,
) -> Vec<(&'static PassInfo, String)> {
    let mut found: Vec<(usize, &'static PassInfo, String)> = Vec::new();
    for info in registry.passes() {
        let Ok(Some(values)) = matches.try_get_many::<String>(info.argument) else {
            continue;
        };
        let Some(indices) = matches.indices_of(info.argument) else {
            continue;
        };
        for (idx, v) in indices.zip(values) {
            found.push((idx, info, v.clone()));
        }
    }
    found.sort_by_key(|(i, _, _)| *i);
    found.into_iter().map(|(_, info, v)| (info, v)).collect()
}

/// The `--list-passes` text: each pass with its summary, then its options.
pub fn list_passes(registry: &PassRegistry) -> String {
    let mut rows: Vec<(String, String)> = Vec::new();
    for info in registry.passes() {
        rows.push((format!("  --{}", info.argument), info.summary.to_string()));
        for o in info.options {
            let value = match o.kind {
                OptionKind::Bool => String::new(),
                k => format!("={}", k.placeholder()),
            };
            let default = if o.default.is_empty() {
                String::new()
            } else {
                format!(" (default: {})", o.default)
            };
            rows.push((
                format!("      --{}{value}", o.name),
                format!("{}{default}", o.help),
            ));
        }
    }
    let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let mut out = String::from("Available passes:\n");
    for (left, right) in rows {
        out.push_str(&format!("{left:width$} - {right}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_is_consistent() {
        command(PassRegistry::global()).debug_assert();
    }

    #[test]
    fn single_dash_long_flags_are_normalized() {
        let cmd = command(PassRegistry::global());
        let args: Vec<OsString> = [
            "commlir-opt",
            "-split-input-file",
            "-o",
            "x",
            "-",
            "-verify-each=false",
            "-zzz",
            "--",
            "-cse",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let out: Vec<String> = normalize_args(&cmd, args)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            out,
            [
                "commlir-opt",
                "--split-input-file",
                "-o",
                "x",
                "-",
                "--verify-each=false",
                "-zzz",
                "--",
                "-cse"
            ]
        );
    }
}
