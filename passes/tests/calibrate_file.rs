//! The machine file `commlir-run --calibrate` writes (`commlir_runtime::cuda::calibrate::
//! machine_json`, tested here without a GPU on synthetic measurements): it reads back through
//! the cost model's parser, inherits what was not measured from its base, and the model it
//! gives reproduces the measurements it was fitted to.

use commlir_passes::analysis::cost::CollKind;
use commlir_passes::analysis::machine;
use commlir_runtime::cuda::calibrate::{
    machine_json, Calibration, CollPoint, GemmPoint, OverlapPoint, COLLS, COLL_SIZES,
};

/// Measurements as the 2×H200 entry predicts them, with overlap factors 1.2 / 1.1.
fn synthetic(world: usize) -> Calibration {
    let m = machine::default_machine();
    let mut colls = Vec::new();
    if world > 1 {
        for op in COLLS {
            let kind = match *op {
                "all_reduce" => CollKind::AllReduce,
                "all_gather" => CollKind::AllGather,
                _ => CollKind::ReduceScatter,
            };
            for &b in COLL_SIZES {
                colls.push(CollPoint {
                    op: op.to_string(),
                    bytes: b,
                    seconds: m.collective(kind, b, world as u64).ns * 1e-9,
                });
            }
        }
    }
    Calibration {
        device: "NVIDIA H100 80GB HBM3".into(),
        world,
        date: "2026-01-01".into(),
        colls,
        gemms: vec![
            GemmPoint {
                dtype: "bf16".into(),
                m: 8192,
                n: 8192,
                k: 8192,
                seconds: 1.5e-3,
            },
            GemmPoint {
                dtype: "f32".into(),
                m: 4096,
                n: 4096,
                k: 4096,
                seconds: 2.75e-3,
            },
        ],
        copy: Some((1 << 30, 0.75e-3)),
        launch_seconds: Some(3.0e-6),
        overlap: (world > 1).then_some(OverlapPoint {
            gemm_alone: 1e-3,
            ar_alone: 1e-3,
            n_gemm: 10,
            n_ar: 8,
            // Factors 1.2 (compute) and 1.1 (comm): the all-reduces end at 8.8 ms having
            // done 8.8 / 1.2 ms of GEMM work; the rest runs alone.
            gemm_loop: 8.8e-3 + (10e-3 - 8.8e-3 / 1.2),
            ar_loop: 8.8e-3,
        }),
    }
}

#[test]
fn calibrated_file_reads_back_and_fits() {
    let cal = synthetic(2);
    let text = machine_json(&cal, machine::DEFAULT);
    let m = machine::parse("cal.json", &text, &mut |b| machine::load(b))
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(m.name, "calibrated-nvidia-h100-80gb-hbm3-x2");
    assert!(m
        .source
        .contains("measured by commlir-run --calibrate on NVIDIA H100 80GB HBM3 x 2, 2026-01-01"));
    assert_eq!(m.gpus_per_node, 2);
    // Measured keys, rounded to 4 digits.
    assert!(
        (m.matmul_flops_bf16 - 2.0 * 8192f64.powi(3) / 1.5e-3).abs() / m.matmul_flops_bf16 < 1e-3
    );
    assert!((m.mem_bw - 2.0 * (1u64 << 30) as f64 / 0.75e-3).abs() / m.mem_bw < 1e-3);
    assert!((m.launch_ns - 3000.0).abs() < 1.0);
    assert!(
        (m.overlap_compute_slowdown - 1.2).abs() < 1e-3,
        "{}",
        m.overlap_compute_slowdown
    );
    assert!(
        (m.overlap_comm_slowdown - 1.1).abs() < 1e-3,
        "{}",
        m.overlap_comm_slowdown
    );
    // Unmeasured keys come from the base.
    let base = machine::default_machine();
    assert_eq!(m.symm_read_gbps, base.symm_read_gbps);
    assert_eq!(m.chunk_step_ns, base.chunk_step_ns);
    // The fitted lines reproduce the measurements (here: the base model's own predictions)
    // within 10% at every size.
    for c in &cal.colls {
        let kind = match c.op.as_str() {
            "all_reduce" => CollKind::AllReduce,
            "all_gather" => CollKind::AllGather,
            _ => CollKind::ReduceScatter,
        };
        let model = m.collective(kind, c.bytes, 2).ns * 1e-9;
        let err = (model - c.seconds).abs() / c.seconds;
        assert!(
            err < 0.10,
            "{} {} B: model {model} vs measured {}",
            c.op,
            c.bytes,
            c.seconds
        );
    }
    // Deterministic.
    assert_eq!(text, machine_json(&cal, machine::DEFAULT));
}

#[test]
fn one_rank_keeps_the_base_collectives() {
    let cal = synthetic(1);
    let text = machine_json(&cal, machine::DEFAULT);
    assert!(!text.contains("\"all_reduce\""), "{text}");
    assert!(!text.contains("overlap_comm_slowdown\":"), "{text}");
    let m = machine::parse("cal.json", &text, &mut |b| machine::load(b)).unwrap();
    let base = machine::default_machine();
    assert_eq!(m.all_reduce, base.all_reduce);
    assert_eq!(m.all_gather, base.all_gather);
    assert_eq!(m.overlap_comm_slowdown, 1.0);
    assert!(m.source.contains("one rank"), "{}", m.source);
}
