//! End-to-end tests of the `commlir-run` binary on small programs.

use std::path::PathBuf;
use std::process::{Command, Output};

fn input(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "inputs", name]
        .iter()
        .collect();
    p.to_string_lossy().into_owned()
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_commlir-run"))
        .args(args)
        .output()
        .expect("runs commlir-run")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn prints_one_line_per_rank_and_result() {
    let o = run(&[&input("mlp.mlir"), "--ranks", "4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4);
    for (r, line) in lines.iter().enumerate() {
        let prefix = format!("rank {r} result 0: tensor<4x16xbf16> digest=");
        assert!(line.starts_with(&prefix), "{line}");
        let rest = &line[prefix.len()..];
        assert_eq!(rest.find(' '), Some(16), "16 hex digits: {line}");
        assert!(
            rest.contains(" sum=") && rest.contains(" max_abs="),
            "{line}"
        );
    }
    // Deterministic, and the seed matters.
    assert_eq!(out, stdout(&run(&[&input("mlp.mlir"), "--ranks", "4"])));
    assert_ne!(
        out,
        stdout(&run(&[&input("mlp.mlir"), "--ranks", "4", "--seed", "3"]))
    );
}

#[test]
fn coll_and_comm_forms_print_the_same_lines() {
    let a = run(&[&input("gather_coll.mlir")]);
    let b = run(&[&input("gather_comm.mlir")]);
    assert!(
        a.status.success() && b.status.success(),
        "{}{}",
        stderr(&a),
        stderr(&b)
    );
    assert_eq!(stdout(&a), stdout(&b));
    assert!(stdout(&a).contains("rank 1 result 1: tensor<2x4xf32> digest="));
}

#[test]
fn print_full_and_check() {
    let o = run(&[&input("entries.mlir"), "--print", "full", "--check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "rank 0 result 0: tensor<2xf32> digest=e66dcc32b35bb575 sum=3.000000e0 max_abs=1.500000e0\n  [1.5, 1.5]\n\
         rank 1 result 0: tensor<2xf32> digest=e66dcc32b35bb575 sum=3.000000e0 max_abs=1.500000e0\n  [1.5, 1.5]\n"
    );
    let o = run(&[&input("entries.mlir"), "--entry", "first", "--ranks", "1"]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("rank 0 result 0: tensor<2xf32>"));
    assert_eq!(stdout(&o).lines().count(), 1);
}

#[test]
fn errors_are_diagnostics_with_exit_code_1() {
    let o = run(&[&input("subgroup.mlir"), "--ranks", "4"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("subgroup.mlir:3:"), "{e}");
    assert!(e.contains(": error: 'coll.all_reduce' op is executed by rank 2, which is not a member of group @tp"), "{e}");
    assert!(
        e.contains("coll.all_reduce %x") && e.contains("^"),
        "source line and caret: {e}"
    );

    let o = run(&[&input("group_size.mlir")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("group @tp has size 3, but 2 ranks run"),
        "{}",
        stderr(&o)
    );

    let o = run(&[&input("mlp.mlir"), "--backend", "cuda"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not a commlir artifact"));

    let o = run(&[&input("entries.mlir"), "--entry", "nope"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no function named @nope"));

    let o = run(&["/nonexistent/file.mlir"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn cuda_graph_needs_the_cuda_backend() {
    // Rejected with the sim backend (the default), with a clear message and exit code 1.
    let o = run(&[&input("mlp.mlir"), "--cuda-graph"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("--cuda-graph needs --backend cuda"),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
    let o = run(&["--nccl-baseline", "all_reduce", "--cuda-graph"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("not to --nccl-baseline"),
        "{}",
        stderr(&o)
    );
    // Accepted with the cuda backend: the run gets as far as reading the artifact.
    let o = run(&[
        &input("mlp.mlir"),
        "--backend",
        "cuda",
        "--cuda-graph",
        "--check",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(!e.contains("--cuda-graph"), "{e}");
    assert!(e.contains("not a commlir artifact"), "{e}");
}

#[test]
fn cpu_affinity_takes_gpu_or_none() {
    // Both values accepted (the sim backend ignores placement); anything else is a usage
    // error naming the choices.
    for v in ["gpu", "none"] {
        let o = run(&[&input("mlp.mlir"), "--ranks", "2", "--cpu-affinity", v]);
        assert_eq!(o.status.code(), Some(0), "{v}: {}", stderr(&o));
    }
    let o = run(&[&input("mlp.mlir"), "--cpu-affinity", "numa"]);
    assert_ne!(o.status.code(), Some(0));
    let e = stderr(&o);
    assert!(e.contains("gpu") && e.contains("none"), "{e}");
}

#[test]
fn symm_windows_takes_on_or_off() {
    // Both values accepted (the sim backend has no NCCL registration); anything else is a
    // usage error naming the choices.
    for v in ["on", "off"] {
        let o = run(&[&input("mlp.mlir"), "--ranks", "2", "--symm-windows", v]);
        assert_eq!(o.status.code(), Some(0), "{v}: {}", stderr(&o));
    }
    let o = run(&[&input("mlp.mlir"), "--symm-windows", "maybe"]);
    assert_ne!(o.status.code(), Some(0));
    let e = stderr(&o);
    assert!(e.contains("on") && e.contains("off"), "{e}");
}
