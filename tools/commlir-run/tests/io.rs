//! `commlir-run --inputs` / `--outputs`: safetensors files in, safetensors files out, on the
//! sim backend at 2 ranks — known values (bf16, i1, i32, f32) through an all-reduce,
//! round trips that leave every digest unchanged, and the diagnostics for bad files.

use commlir_runtime::numeric::bf16_bits;
use commlir_runtime::tensor_file::{read_tensors, tensors_bytes};
use commlir_runtime::{digest, ElemType, Tensor, TensorType};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// An all-reduce of a bf16 and an i32 argument, an i1 argument passed through, and an f32
/// argument replicated on every rank.
const PROGRAM: &str = r#"coll.group @world {size = 2 : i64}
func.func @main(%x: tensor<4xbf16>, %mask: tensor<4xi1>, %n: tensor<3xi32>, %w: tensor<2xf32> {coll.replicated = @world}) -> (tensor<4xbf16>, tensor<4xi1>, tensor<3xi32>, tensor<2xf32>) {
  %r = coll.all_reduce %x {reduce_op = "sum", group = @world} : tensor<4xbf16>
  %y = coll.wait_tensor %r : tensor<4xbf16>
  %rn = coll.all_reduce %n {reduce_op = "sum", group = @world} : tensor<3xi32>
  %yn = coll.wait_tensor %rn : tensor<3xi32>
  return %y, %mask, %yn, %w : tensor<4xbf16>, tensor<4xi1>, tensor<3xi32>, tensor<2xf32>
}
"#;

/// A scratch directory of its own for each test (tests run in parallel).
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("commlir-io-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("p.mlir"), PROGRAM).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_string_lossy().into_owned()
    }

    /// Runs commlir-run in the directory (so diagnostics name files as given).
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_commlir-run"))
            .current_dir(&self.0)
            .args(args)
            .output()
            .expect("runs commlir-run")
    }

    fn write(&self, name: &str, tensors: &[(&str, &Tensor)]) {
        std::fs::write(self.0.join(name), tensors_bytes(tensors, &[]).unwrap()).unwrap();
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ty(elem: ElemType, shape: &[usize]) -> TensorType {
    TensorType {
        elem,
        shape: shape.to_vec(),
    }
}

const I1: ElemType = ElemType::Int {
    width: 1,
    signedness: commlir_ir::Signedness::Signless,
};
const I32: ElemType = ElemType::Int {
    width: 32,
    signedness: commlir_ir::Signedness::Signless,
};

fn t(elem: ElemType, values: &[f64]) -> Tensor {
    Tensor::from_f64(ty(elem, &[values.len()]), values)
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "commlir-run failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "expected exit code 1");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The digests printed for each result line, in order.
fn digests(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.split("digest=").nth(1))
        .map(|r| r[..16].to_string())
        .collect()
}

/// The inputs of rank `r` of the known-values test.
fn known_inputs(r: usize) -> [Tensor; 4] {
    let x = if r == 0 {
        [1.0, -2.5, 2f64.powi(-7), 3.140625]
    } else {
        // 1 + 2^-7 is bf16 0x3f81: the sum 1 + 2^-6 is exact, as are the others.
        [0.5, 0.5, 1.0 + 2f64.powi(-7), -3.0]
    };
    let mask = if r == 0 {
        [1.0, 0.0, 1.0, 1.0]
    } else {
        [0.0, 0.0, 1.0, 0.0]
    };
    let n = if r == 0 {
        [7.0, -3.0, 100000.0]
    } else {
        [1.0, 2.0, -100000.0]
    };
    [
        t(ElemType::BF16, &x),
        t(I1, &mask),
        t(I32, &n),
        t(ElemType::F32, &[0.1, -1e30]),
    ]
}

fn write_known(s: &Scratch) {
    for r in 0..2 {
        let [x, mask, n, w] = known_inputs(r);
        s.write(
            &format!("in_{r}.safetensors"),
            &[("x", &x), ("mask", &mask), ("n", &n), ("w", &w)],
        );
    }
}

#[test]
fn known_values_go_through_an_all_reduce_exactly() {
    let s = Scratch::new("known");
    write_known(&s);
    let out = ok(&s.run(&[
        "p.mlir",
        "--inputs",
        "in_{rank}.safetensors",
        "--outputs",
        "out_{rank}.safetensors",
    ]));
    assert_eq!(out.lines().count(), 8, "{out}");
    for r in 0..2 {
        let file = read_tensors(&s.path(&format!("out_{r}.safetensors"))).unwrap();
        let (tensors, meta) = (file.tensors, file.metadata);
        let names: Vec<&str> = tensors.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["result0", "result1", "result2", "result3"]);
        assert_eq!(
            meta.get("commlir"),
            Some(&format!(r#"{{"entry":"main","rank":{r},"world_size":2}}"#))
        );
        let got = |i: usize| &tensors[i].1;
        // bf16: compared as bit patterns, the exact sums.
        let bits: Vec<u16> = got(0).to_f64_vec().into_iter().map(bf16_bits).collect();
        let want: Vec<u16> = [1.5, -2.0, 1.0 + 2f64.powi(-6), 0.140625]
            .into_iter()
            .map(bf16_bits)
            .collect();
        assert_eq!(got(0).ty, ty(ElemType::BF16, &[4]));
        assert_eq!(bits, want);
        assert_eq!(got(1), &known_inputs(r)[1], "i1 passes through");
        assert_eq!(got(2), &t(I32, &[8.0, -1.0, 0.0]));
        assert_eq!(got(3), &known_inputs(r)[3], "f32 bits unchanged");
        // The printed digests are those of the tensors in the file.
        let printed = digests(&out);
        for (i, (_, t)) in tensors.iter().enumerate() {
            assert_eq!(printed[4 * r + i], format!("{:016x}", digest(t)));
        }
    }
}

#[test]
fn outputs_read_back_as_inputs_give_identical_digests() {
    // Identity over every argument: generated inputs → results file → inputs file must
    // reproduce every line, bit for bit.
    let s = Scratch::new("roundtrip");
    std::fs::write(
        s.0.join("id.mlir"),
        "func.func @main(%a: tensor<2x3xbf16>, %b: tensor<5xi1>, %c: tensor<4xf16>, %d: tensor<3xui8>, %e: tensor<2xf64>, %f: tensor<3xi64>) -> (tensor<2x3xbf16>, tensor<5xi1>, tensor<4xf16>, tensor<3xui8>, tensor<2xf64>, tensor<3xi64>) {\n  return %a, %b, %c, %d, %e, %f : tensor<2x3xbf16>, tensor<5xi1>, tensor<4xf16>, tensor<3xui8>, tensor<2xf64>, tensor<3xi64>\n}\n",
    )
    .unwrap();
    let first = ok(&s.run(&[
        "id.mlir",
        "--seed",
        "5",
        "--outputs",
        "gen_{rank}.safetensors",
    ]));
    for r in 0..2 {
        // Results are `result{i}`; as inputs they are `arg{i}`.
        let tensors = read_tensors(&s.path(&format!("gen_{r}.safetensors")))
            .unwrap()
            .tensors;
        let renamed: Vec<(String, &Tensor)> = tensors
            .iter()
            .map(|(n, t)| (n.replace("result", "arg"), t))
            .collect();
        let named: Vec<(&str, &Tensor)> = renamed.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        s.write(&format!("args_{r}.safetensors"), &named);
    }
    let second = ok(&s.run(&[
        "id.mlir",
        "--inputs",
        "args_{rank}.safetensors",
        "--outputs",
        "again_{rank}.safetensors",
    ]));
    assert_eq!(first, second);
    for r in 0..2 {
        let a = std::fs::read(s.0.join(format!("gen_{r}.safetensors"))).unwrap();
        let b = std::fs::read(s.0.join(format!("again_{r}.safetensors"))).unwrap();
        assert_eq!(a, b, "rank {r}: the results files are byte-identical");
    }
    // The collective program too: its generated run and the run on its own generated inputs
    // (read back from a file) agree.
    let gen = ok(&s.run(&["p.mlir", "--outputs", "p_{rank}.safetensors"]));
    assert_eq!(digests(&gen).len(), 8);
    let outs = read_tensors(&s.path("p_1.safetensors")).unwrap().tensors;
    for (i, (_, t)) in outs.iter().enumerate() {
        assert_eq!(digests(&gen)[4 + i], format!("{:016x}", digest(t)));
    }
}

#[test]
fn one_file_serves_every_rank_and_partial_files_fall_back() {
    let s = Scratch::new("shared");
    let [x, mask, n, w] = known_inputs(0);
    s.write(
        "all.safetensors",
        &[("arg0", &x), ("mask", &mask), ("n", &n), ("w", &w)],
    );
    let out = ok(&s.run(&["p.mlir", "--inputs", "all.safetensors", "--print", "full"]));
    // Both ranks hold x: the sum is 2x.
    assert!(out.contains("[2.0, -5.0, 0.015625, 6.28125]"), "{out}");
    // Without `n` and `w`, --inputs-partial generates them as without --inputs.
    s.write("some.safetensors", &[("x", &x), ("mask", &mask)]);
    let partial = ok(&s.run(&["p.mlir", "--inputs", "some.safetensors", "--inputs-partial"]));
    let generated = ok(&s.run(&["p.mlir"]));
    let (p, g) = (digests(&partial), digests(&generated));
    assert_ne!(p[0], g[0], "x comes from the file");
    assert_eq!(&p[2..4], &g[2..4], "n and w are generated");
}

#[test]
fn bad_inputs_are_diagnosed() {
    let s = Scratch::new("errors");
    write_known(&s);
    let [x, mask, n, w] = known_inputs(0);
    let at = "p.mlir:2:1: error: 'func.func' op ";
    // Wrong element type.
    let xf = x.cast(ElemType::F32);
    s.write(
        "dtype.safetensors",
        &[("x", &xf), ("mask", &mask), ("n", &n), ("w", &w)],
    );
    let e = err(&s.run(&["p.mlir", "--inputs", "dtype.safetensors"]));
    assert!(
        e.starts_with(&format!("{at}argument #0 (%x): tensor 'x' in 'dtype.safetensors' has type tensor<4xf32>, expected tensor<4xbf16>\n")),
        "{e}"
    );
    // Wrong shape (and bool for i1 is checked the same way).
    let xs = x.reshaped(vec![2, 2]);
    s.write(
        "shape.safetensors",
        &[("x", &xs), ("mask", &mask), ("n", &n), ("w", &w)],
    );
    let e = err(&s.run(&["p.mlir", "--inputs", "shape.safetensors"]));
    assert!(
        e.starts_with(&format!("{at}argument #0 (%x): tensor 'x' in 'shape.safetensors' has type tensor<2x2xbf16>, expected tensor<4xbf16>\n")),
        "{e}"
    );
    // Missing tensor.
    s.write("missing.safetensors", &[("x", &x), ("n", &n), ("w", &w)]);
    let e = err(&s.run(&["p.mlir", "--inputs", "missing.safetensors"]));
    assert!(
        e.starts_with(&format!("{at}argument #1 (%mask): 'missing.safetensors' has no tensor 'mask' (or 'arg1'); it holds: n, w, x\n")),
        "{e}"
    );
    // Missing file (rank 1 of a per-rank pattern).
    std::fs::remove_file(s.0.join("in_1.safetensors")).unwrap();
    let e = err(&s.run(&["p.mlir", "--inputs", "in_{rank}.safetensors"]));
    assert!(
        e.contains("error: cannot read 'in_1.safetensors', the inputs of rank 1: No such file"),
        "{e}"
    );
    // Corrupt files: never a panic.
    std::fs::write(s.0.join("junk.safetensors"), b"not a safetensors file").unwrap();
    let e = err(&s.run(&["p.mlir", "--inputs", "junk.safetensors"]));
    assert!(
        e.contains("error: 'junk.safetensors' is not a valid safetensors file: "),
        "{e}"
    );
    let mut cut = std::fs::read(s.0.join("in_0.safetensors")).unwrap();
    cut.truncate(cut.len() - 3);
    std::fs::write(s.0.join("cut.safetensors"), cut).unwrap();
    let e = err(&s.run(&["p.mlir", "--inputs", "cut.safetensors"]));
    assert!(
        e.contains("'cut.safetensors' is not a valid safetensors file"),
        "{e}"
    );
    // A replicated argument that differs between ranks.
    let w1 = t(ElemType::F32, &[0.1, 2.0]);
    let [x1, m1, n1, _] = known_inputs(1);
    s.write(
        "in_1.safetensors",
        &[("x", &x1), ("mask", &m1), ("n", &n1), ("w", &w1)],
    );
    let e = err(&s.run(&["p.mlir", "--inputs", "in_{rank}.safetensors"]));
    assert!(
        e.starts_with(&format!("{at}argument #3 (%w) is marked coll.replicated, but the inputs of rank 1 and rank 0 differ\n")),
        "{e}"
    );
    // Several ranks cannot share one results file.
    let e = err(&s.run(&["p.mlir", "--outputs", "out.safetensors"]));
    assert_eq!(e, "error: --outputs 'out.safetensors': 2 ranks write one file each: put {rank} in the file name (e.g. out_{rank}.safetensors)\n");
    assert!(!Path::new(&s.path("out.safetensors")).exists());
}
