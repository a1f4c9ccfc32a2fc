//! `--calibrate=FILE`: runs the calibration (`commlir_runtime::cuda::calibrate`), writes the
//! machine file, reads it back through the cost model's parser and prints what the model now
//! predicts against what was measured.

use commlir_passes::analysis::cost::CollKind;
use commlir_passes::analysis::machine;
use commlir_runtime::cuda::calibrate;

/// The whole calibration's bound: it takes tens of seconds; a rank stuck longer has failed.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Calibrates on `ranks` GPUs and writes `path`; the returned text is the summary.
pub fn run(ranks: usize, path: &str) -> Result<String, String> {
    fn progress(s: &str) {
        eprintln!("{s}");
    }
    let cal = calibrate::run(ranks, progress, TIMEOUT)?;
    let text = calibrate::machine_json(&cal, machine::DEFAULT);
    std::fs::write(path, &text)
        .map_err(|e| format!("error: cannot write the machine file '{path}': {e}\n"))?;
    // The file must read back: a calibration the passes cannot use is an error.
    let m = machine::parse(path, &text, &mut |b| machine::load(b)).map_err(|e| {
        format!("{e}error: the calibrated machine file '{path}' does not read back\n")
    })?;
    let mut out = format!("wrote {path}: machine '{}' ({})\n", m.name, m.source);
    let n = cal.world as u64;
    for c in &cal.colls {
        let kind = match c.op.as_str() {
            "all_reduce" => CollKind::AllReduce,
            "all_gather" => CollKind::AllGather,
            _ => CollKind::ReduceScatter,
        };
        let model = m.collective(kind, c.bytes, n).ns / 1e3;
        let us = c.seconds * 1e6;
        out.push_str(&format!(
            "  {} {} B: measured {us:.2} us, model {model:.2} us ({:+.1}%)\n",
            c.op,
            c.bytes,
            (model - us) / us * 100.0
        ));
    }
    out.push_str(&format!(
        "  matmul bf16 {:.0} TFLOP/s, f32 {:.0} TFLOP/s, memory {:.2} TB/s, launch {:.2} us, overlap slowdown compute {:.3} comm {:.3}\n",
        m.matmul_flops_bf16 / 1e12,
        m.matmul_flops_f32 / 1e12,
        m.mem_bw / 1e12,
        m.launch_ns / 1e3,
        m.overlap_compute_slowdown,
        m.overlap_comm_slowdown
    ));
    Ok(out)
}
