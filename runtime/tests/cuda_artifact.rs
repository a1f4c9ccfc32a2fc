//! The artifact reader, the tolerance checker and the no-GPU diagnostic of the cuda backend.
//! None of these needs a GPU; on a machine that has one, the driver test is skipped.

use commlir_runtime::cuda::{self, artifact, check};
use commlir_runtime::{inputs, RankResults, Tensor, TensorType};

/// A container in the format `codegen/src/artifact.rs` writes (written here independently).
fn container(sections: &[(&[u8; 4], &[u8])]) -> Vec<u8> {
    let align = |n: usize| n.div_ceil(16) * 16;
    let mut out = b"CMLIRART".to_vec();
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    let mut off = align(16 + 24 * sections.len());
    for (tag, data) in sections {
        out.extend_from_slice(*tag);
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(off as u64).to_le_bytes());
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        off = align(off + data.len());
    }
    for (_, data) in sections {
        out.resize(align(out.len()), 0);
        out.extend_from_slice(data);
    }
    out
}

/// The manifest, `ABI` standing for the runner's ABI version.
const MANIFEST: &str = r#"{
  "abi_version": ABI, "block_size": 256, "entry": "main", "entry_symbol": "commlir_main",
  "format": "commlir-artifact", "format_version": 1,
  "functions": [{"name": "main", "symbol": "commlir_fn_main",
                 "args": ["memref<4x8xbf16>"], "results": ["memref<4x8xbf16>"]}],
  "groups": [{"index": 0, "name": "tp", "ranks": "", "size": 2, "symm_mem": true}],
  "kernels": ["k0_clone"], "num_events": 3,
  "target": {"cpu": "sm_90", "ptx_features": "+ptx80", "triple": "nvptx64-nvidia-cuda"}
}"#;

fn manifest() -> String {
    MANIFEST.replace("ABI", &cuda::abi::ABI_VERSION.to_string())
}

fn sample() -> Vec<u8> {
    container(&[
        (b"MANI", manifest().as_bytes()),
        (b"PTX\0", b".version 8.0\n\0"),
        (b"HOST", b"\x7fELF-not-really-a-library"),
        (b"RTIR", b"module {}"),
    ])
}

#[test]
fn parses_a_well_formed_artifact() {
    let a = artifact::parse(&sample()).unwrap();
    assert_eq!(a.manifest.entry, "main");
    assert_eq!(a.manifest.kernels, vec!["k0_clone"]);
    assert_eq!(a.manifest.num_events, 3);
    assert_eq!(a.manifest.groups[0].name, "tp");
    assert!(a.manifest.groups[0].symm_mem);
    assert_eq!(a.ptx.last(), Some(&0));
    assert_eq!(a.rt_ir, "module {}");
    let f = a.manifest.entry_function().unwrap();
    let t = artifact::parse_type(&f.args[0]).unwrap();
    assert_eq!(t.shape, vec![4, 8]);
    assert_eq!(a.manifest.source, None);
}

#[test]
fn rejects_broken_artifacts_with_reasons() {
    let err = |b: &[u8]| artifact::parse(b).unwrap_err();
    assert!(err(b"hello").contains("bad magic"));
    let mut v = sample();
    v[8] = 9;
    assert!(err(&v).contains("format version 9"));
    let mut v = sample();
    v[12] = 200; // 200 sections cannot fit
    assert!(err(&v).contains("truncated"));
    let whole = sample();
    assert!(err(&whole[..whole.len() - 5]).contains("outside the file"));
    let no_host = container(&[(b"MANI", manifest().as_bytes())]);
    assert!(err(&no_host).contains("HOST"));
    // A version this runner does not speak (the next one).
    let other = (cuda::abi::ABI_VERSION + 1).to_string();
    let bad_abi = MANIFEST.replace("ABI", &other);
    let v = container(&[(b"MANI", bad_abi.as_bytes()), (b"HOST", b"\x7fELF")]);
    assert!(err(&v).contains(&format!("ABI version {other}")));
    let bad_json = container(&[(b"MANI", b"{"), (b"HOST", b"\x7fELF")]);
    assert!(err(&bad_json).contains("manifest is not valid"));
}

#[test]
fn tolerance_checker_on_generated_data() {
    let ty = TensorType {
        elem: commlir_runtime::ElemType::BF16,
        shape: vec![64],
    };
    let t = inputs::generate(&ty, 0, 0, 0);
    let sim = vec![RankResults {
        rank: 0,
        results: vec![t.clone()],
    }];
    assert!(check::compare(&sim, &sim).passed());
    // One element off by 10%: outside bf16's tolerance.
    let mut v = t.to_f64_vec();
    v[5] = v[5] * 1.1 + 0.05;
    let gpu = vec![RankResults {
        rank: 0,
        results: vec![Tensor::from_f64(ty, &v)],
    }];
    let r = check::compare(&gpu, &sim);
    assert_eq!(r.mismatched, 1);
    assert!(r.summary().starts_with("check: FAIL"));
    assert!(r.problems[0].contains("element 5"));
}

#[test]
fn no_driver_is_a_clear_diagnostic() {
    if cuda::ffi::driver_present() {
        eprintln!("skipped: a CUDA driver is present");
        return;
    }
    let e = cuda::run(&sample(), &cuda::CudaOptions::default()).unwrap_err();
    assert_eq!(e, cuda::NO_DRIVER);
    assert!(e.contains("no CUDA driver found"));
}

#[test]
fn results_computed_from_less_precise_values_take_their_tolerance() {
    commlir_dialects::link();
    let mut ctx = commlir_ir::Context::new();
    let text = "func.func @f(%x: tensor<4xbf16>, %y: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>, tensor<4xbf16>) {
  %c = compute.cast %x : (tensor<4xbf16>) -> tensor<4xf32>
  %s = compute.mul %c, %c : tensor<4xf32>
  %l = compute.reduce_sum %s {dim = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
  %z = compute.add %y, %y : tensor<4xf32>
  return %l, %z, %x : tensor<f32>, tensor<4xf32>, tensor<4xbf16>
}";
    let m = commlir_ir::parser::parse_source(
        &mut ctx,
        "t.mlir",
        text.as_bytes(),
        &commlir_ir::parser::ParseOptions::default(),
    )
    .unwrap();
    let f = commlir_runtime::sim::find_entry(&ctx, m, None).unwrap();
    use commlir_runtime::ElemType::{BF16, F32};
    // The loss depends on bf16 values; the f32 sum of f32 arguments does not.
    assert_eq!(
        check::least_precise_inputs(&ctx, f),
        vec![Some(BF16), Some(F32), Some(BF16)]
    );
    // A loss 5e-5 away (the bf16 activations an ulp apart): outside f32's tolerance, inside
    // bf16's.
    let one = |v: f64| {
        vec![RankResults {
            rank: 0,
            results: vec![Tensor::from_f64(
                TensorType {
                    elem: F32,
                    shape: vec![],
                },
                &[v],
            )],
        }]
    };
    assert!(!check::compare(&one(1.01538), &one(1.01543)).passed());
    assert!(check::compare_with(&one(1.01538), &one(1.01543), &[Some(BF16)]).passed());
    assert!(!check::compare_with(&one(1.1), &one(1.01543), &[Some(BF16)]).passed());
}
