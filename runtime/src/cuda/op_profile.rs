//! The measured per-op times of a run as profile entries (`commlir-run --backend cuda
//! --bench-iters N --profile=FILE`): each timed runtime call of the per-op pass, its mean time
//! over the ranks, and the kind of IR op it realizes, read from its label (a cuBLAS GEMM is a
//! `matmul`, an NCCL call or a symm kernel its collective, an NCCL group of a coalesced op the
//! collective of its members). Generated elementwise kernels may fuse several ops and are
//! reused across them, so they are kept as kind `kernel` (reported, never matched to an op).
//!
//! A pure function over the op times, so that it is tested without a GPU; the keys and the
//! file format are `commlir_passes::analysis::profile`'s (the tool writes the file).

use super::rank::OpTime;
use commlir_dialects::rt::abi;

/// One timed call, averaged over the ranks.
#[derive(Clone, Debug, PartialEq)]
pub struct MeasuredOp {
    /// The kind of IR op it realizes (`matmul`, `all_reduce`, ..., `kernel`).
    pub kind: String,
    /// The call's label (`gemm bf16 ...`, `all_reduce bf16 ...`).
    pub label: String,
    /// Mean seconds per call, over the timed calls and the ranks.
    pub seconds: f64,
}

/// The collective kinds NCCL labels start with.
const COLLECTIVES: &[&str] = &[
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
];

/// The kind of IR op a call with this label realizes.
pub fn kind_of_label(label: &str) -> String {
    let first = label.split_whitespace().next().unwrap_or("");
    if first == "gemm" {
        return "matmul".to_string();
    }
    if COLLECTIVES.contains(&first) {
        return first.to_string();
    }
    // The symm collectives (through NCCL or commlir's kernels) name what they realize.
    let symm = |s: &str| {
        abi::SYMM_COLLS
            .iter()
            .find(|(n, _)| s.contains(n))
            .map(|(n, _)| {
                if n.ends_with("all_reduce") {
                    "all_reduce".to_string()
                } else {
                    n.to_string()
                }
            })
    };
    if let Some(k) = symm(first) {
        return k;
    }
    if first == "nccl" {
        // `nccl group [all_gather ..., all_gather ...]`: a coalesced collective.
        if let Some(inner) = label.split_once('[').map(|(_, r)| r) {
            return kind_of_label(inner);
        }
    }
    if first == "kernel" {
        let name = label.split_whitespace().nth(1).unwrap_or("");
        if let Some(k) = symm(name) {
            return k;
        }
        return "kernel".to_string();
    }
    first.to_string()
}

/// The ops of every rank (`(rank, ops in program order)`, as the per-op pass records them),
/// averaged position by position over the ranks that recorded that position with the same
/// label (SPMD: every rank runs the same calls).
pub fn measured_ops(ranks: &[(usize, Vec<OpTime>)]) -> Vec<MeasuredOp> {
    let Some((_, first)) = ranks.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let same: Vec<f64> = ranks
                .iter()
                .filter_map(|(_, ops)| ops.get(i))
                .filter(|x| x.label == o.label)
                .map(|x| x.seconds)
                .collect();
            MeasuredOp {
                kind: kind_of_label(&o.label),
                label: o.label.clone(),
                seconds: same.iter().sum::<f64>() / same.len().max(1) as f64,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(label: &str, seconds: f64) -> OpTime {
        OpTime {
            label: label.into(),
            stream: 0,
            bytes: 0,
            bus_factor: 0.0,
            seconds,
            start_seconds: None,
        }
    }

    #[test]
    fn labels_to_kinds() {
        assert_eq!(kind_of_label("gemm bf16 8x16x32 batch 1"), "matmul");
        assert_eq!(
            kind_of_label("all_reduce bf16 4096 B (group of 2)"),
            "all_reduce"
        );
        assert_eq!(
            kind_of_label("one_shot_all_reduce bf16 4096 B (group of 2)"),
            "all_reduce"
        );
        assert_eq!(
            kind_of_label("reduce_scatter f32 64 B (group of 2)"),
            "reduce_scatter"
        );
        assert_eq!(
            kind_of_label(
                "nccl group [all_gather bf16 8 B (group of 2), all_gather bf16 8 B (group of 2)]"
            ),
            "all_gather"
        );
        assert_eq!(kind_of_label("kernel k3_exp_div <<<4, 256>>>"), "kernel");
    }

    #[test]
    fn averages_over_ranks() {
        let ranks = vec![
            (0, vec![op("gemm a", 2e-6), op("all_reduce x", 10e-6)]),
            (1, vec![op("gemm a", 4e-6), op("all_reduce x", 12e-6)]),
        ];
        let m = measured_ops(&ranks);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].kind, "matmul");
        assert!((m[0].seconds - 3e-6).abs() < 1e-15);
        assert!((m[1].seconds - 11e-6).abs() < 1e-15);
        assert!(measured_ops(&[]).is_empty());
    }
}
