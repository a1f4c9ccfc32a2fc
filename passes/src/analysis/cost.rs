//! The cost model: an analytical estimate of each op's runtime, like NCCL's own tuning model
//! for collectives (the best of {ring, tree} × {LL, LL128, Simple}, each with a latency and a
//! bandwidth) and a roofline for compute (max(flops / peak, bytes / bandwidth) by element
//! type). A `cost_ns` attribute on an op overrides the estimate everywhere.
//!
//! The `symm` ops' kernels (blocking, over peer-mapped memory) cost a launch, two barriers
//! and their NVLink traffic ([`Machine::symm`]).
//!
//! The constants are a [`Machine`], data read from a machine file ([`super::machine`]: the
//! built-in entries and the format). The default, `h200x2-nvlink`, is fitted to measurements
//! on 2×H200 (NVLink, NCCL 2.28.9, CUDA 13.0) and equals [`H200_NVLINK`];
//! `docs/cost-model.md` lists every constant with the error at each measurement and says
//! which are placeholders still to be measured.

use commlir_dialects::coll::group_of;
use commlir_dialects::shape::{tensor_bytes, tensor_info};
use commlir_ir::{AttrKind, Context, FloatKind, OpId, TypeKind};
use std::borrow::Cow;

/// NCCL's protocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    LL,
    LL128,
    Simple,
}

/// NCCL's algorithms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Ring,
    Tree,
}

/// Latency (µs) and bus bandwidth (GB/s) of one protocol for one collective family.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProtoParams {
    pub protocol: Protocol,
    /// Fixed latency per launch, µs.
    pub base_us: f64,
    /// Extra latency per ring/tree step beyond the first, µs.
    pub step_us: f64,
    /// Bus bandwidth, GB/s (10⁹ bytes/s).
    pub bus_gbps: f64,
}

/// The machine description: every constant of the model in one table.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// The name selections use (`machine=NAME`, `commlir.machine = "NAME"`).
    pub name: Cow<'static, str>,
    /// Where the numbers come from (datasheets, published benchmarks, a calibration run).
    pub source: Cow<'static, str>,
    /// Nodes of the machine; a group whose ranks lie on more than one of them uses
    /// [`Machine::inter_node`] (on one node every group is modelled on the intra-node tables,
    /// whatever its size).
    pub nodes: u64,
    /// GPUs per node: rank `r` lives on node `r / gpus_per_node`.
    pub gpus_per_node: u64,
    /// Protocols of a collective whose group spans nodes, for every collective kind: the base
    /// latency, the latency of each step that crosses nodes, and the bus bandwidth through
    /// the network (the ring's bottleneck). `None` on a machine of one node.
    pub inter_node: Option<[ProtoParams; 3]>,
    /// While a collective runs concurrently with a kernel on the same GPU, the kernel takes
    /// this many times longer (SMs and memory bandwidth shared with the NCCL kernel); 1.0:
    /// no interference.
    pub overlap_compute_slowdown: f64,
    /// While a kernel runs concurrently with a collective, the collective takes this many
    /// times longer; 1.0: no interference.
    pub overlap_comm_slowdown: f64,
    /// All-reduce protocols (ring); tree uses the same with `tree_bw_factor`.
    pub all_reduce: [ProtoParams; 3],
    /// All-gather / all-to-all / broadcast protocols (ring).
    pub all_gather: [ProtoParams; 3],
    /// Reduce-scatter protocols (ring): the all-gather's ring plus a reduction per step,
    /// which costs bandwidth at large sizes (about 30 % on 2×H100, NCCL 2.28.9).
    pub reduce_scatter: [ProtoParams; 3],
    /// Tree bandwidth relative to ring (NVLink single node: trees gain only latency).
    pub tree_bw_factor: f64,
    /// Dense matmul peak by element type, FLOP/s.
    pub matmul_flops_bf16: f64,
    pub matmul_flops_f32: f64,
    pub matmul_flops_f64: f64,
    /// Elementwise (non-tensor-core) throughput, FLOP/s.
    pub vector_flops: f64,
    /// Device memory bandwidth, bytes/s, counting reads plus writes.
    pub mem_bw: f64,
    /// Fixed cost of a kernel launch, ns.
    pub launch_ns: f64,
    /// Symmetric-memory kernels (`symm` ops): launch of one kernel on the compute stream, µs.
    pub symm_launch_us: f64,
    /// One barrier across the group on the signal pad (a release put to every peer and an
    /// acquire wait on each), µs; every symm kernel has two (start and end).
    pub symm_barrier_us: f64,
    /// Two-shot's second phase (storing the reduced chunk into every peer before the end
    /// barrier), fixed part, µs.
    pub symm_push_us: f64,
    /// NVLink bandwidth of one rank reading its peers' memory, GB/s (10⁹ bytes/s).
    pub symm_read_gbps: f64,
    /// NVLink bandwidth of one rank reading and writing its peers' memory (two-shot), GB/s.
    pub symm_rw_gbps: f64,
    /// The LL one-shot all-reduce (messages of at most `SYMM_LL_MAX_BYTES`, no barrier):
    /// launch plus one NVLink write and the flag poll, µs.
    pub symm_ll_us: f64,
    /// The LL one-shot's payload rate into each peer, GB/s (its lines carry 8 data bytes in
    /// 16, so about half the link's write bandwidth).
    pub symm_ll_gbps: f64,
    /// GEMM efficiency against rows `m` is modelled as `m / (m + chunk_half_rows)` (Hockney's
    /// n½ on the chunked dimension): a fused op's chunk has 1/G of the rows, fewer tiles per
    /// wave and the ramp-up and tail paid G times, so it runs below the whole GEMM's rate.
    pub chunk_half_rows: f64,
    /// The least rate a chunk keeps relative to the whole GEMM: below about a thousand rows
    /// per chunk the loss is launch- and step-bound, which `chunk_step_ns` already counts.
    pub chunk_min_efficiency: f64,
    /// Fixed cost of one pipeline step of a fused op, ns: the chunk's GEMM launch, the
    /// cross-rank signal that orders the chunk's transfer with its GEMM, and the transfer's
    /// start.
    pub chunk_step_ns: f64,
    /// While a fused all-gather-matmul moves its next shard, the chunk's GEMM takes this many
    /// times longer (the shard's copy into local memory shares HBM bandwidth and SMs with it).
    pub chunk_gather_slowdown: f64,
    /// The same for a fused matmul-reduce-scatter, whose steps store partial products into
    /// the peers while the next chunk's GEMM runs.
    pub chunk_scatter_slowdown: f64,
    /// The same for a two-rank reduce-scatter pipeline that accumulates in row blocks
    /// (`rt::accumulate_parts`): a copy engine delivers each block of the peer's partial into
    /// the result while the next block's GEMM runs, and the own GEMMs add onto it, so no
    /// reduction follows the last GEMM.
    pub chunk_accumulate_slowdown: f64,
}

/// The all-gather ring of [`H200_NVLINK`]; its reduce-scatter uses the same (fitted on both).
const H200_RING: [ProtoParams; 3] = [
    ProtoParams {
        protocol: Protocol::LL,
        base_us: 6.0,
        step_us: 0.6,
        bus_gbps: 40.0,
    },
    ProtoParams {
        protocol: Protocol::LL128,
        base_us: 9.0,
        step_us: 1.0,
        bus_gbps: 180.0,
    },
    ProtoParams {
        protocol: Protocol::Simple,
        base_us: 21.0,
        step_us: 2.0,
        bus_gbps: 254.2,
    },
];

/// Calibrated on 2×H200 with NVLink (DESIGN §5). How each value was obtained is in
/// docs/cost-model.md: the all-reduce LL128 line passes through the 1 MiB and 16 MiB points,
/// the Simple line through 256 MiB and 1 GiB; all-gather Simple through its two points.
pub const H200_NVLINK: Machine = Machine {
    name: Cow::Borrowed("h200x2-nvlink"),
    source: Cow::Borrowed(
        "measured on 2xH200 (NVLink, NCCL 2.28.9, CUDA 13.0); docs/cost-model.md",
    ),
    nodes: 1,
    gpus_per_node: 2,
    inter_node: None,
    overlap_compute_slowdown: 1.0,
    overlap_comm_slowdown: 1.0,
    all_reduce: [
        ProtoParams {
            protocol: Protocol::LL,
            base_us: 6.0,
            step_us: 0.6,
            bus_gbps: 40.0,
        },
        ProtoParams {
            protocol: Protocol::LL128,
            base_us: 9.12,
            step_us: 1.0,
            bus_gbps: 257.4,
        },
        ProtoParams {
            protocol: Protocol::Simple,
            base_us: 125.6,
            step_us: 2.0,
            bus_gbps: 341.8,
        },
    ],
    all_gather: H200_RING,
    reduce_scatter: H200_RING,
    tree_bw_factor: 0.8,
    matmul_flops_bf16: 788e12,
    matmul_flops_f32: 51e12,
    matmul_flops_f64: 60e12,
    vector_flops: 60e12,
    mem_bw: 4.2e12,
    launch_ns: 2000.0,
    // Fitted to the bf16 all-reduce latencies of the symm kernels on 2xH200
    // (bench/gpu/fit_symm_costs.py, docs/cost-model.md).
    symm_launch_us: 2.5,
    symm_barrier_us: 1.36,
    symm_push_us: 0.0,
    symm_read_gbps: 392.7,
    symm_rw_gbps: 492.6,
    symm_ll_us: 1.22,
    symm_ll_gbps: 161.2,
    chunk_half_rows: 96.0,
    chunk_min_efficiency: 0.9,
    chunk_step_ns: 4_000.0,
    // Fitted to commlir's fused pipelines on two H100s (docs/cost-model.md).
    chunk_gather_slowdown: 1.04,
    chunk_scatter_slowdown: 1.10,
    chunk_accumulate_slowdown: 1.01,
};

/// The algorithms of the `symm` ops (blocking kernels over peer-mapped memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SymmAlgo {
    /// `symm.one_shot_all_reduce`: every rank reads every peer's whole buffer.
    OneShotAllReduce,
    /// `symm.two_shot_all_reduce`: reduce-scatter then all-gather through peer memory.
    TwoShotAllReduce,
    /// `symm.all_gather`.
    AllGather,
    /// `symm.reduce_scatter`.
    ReduceScatter,
}

/// The symm algorithm of an op name.
pub fn symm_algo(name: &str) -> Option<SymmAlgo> {
    Some(match name {
        "symm.one_shot_all_reduce" => SymmAlgo::OneShotAllReduce,
        "symm.two_shot_all_reduce" => SymmAlgo::TwoShotAllReduce,
        "symm.all_gather" => SymmAlgo::AllGather,
        "symm.reduce_scatter" => SymmAlgo::ReduceScatter,
        _ => return None,
    })
}

/// Kinds of collective the model distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
}

/// The estimate for one collective: time and the chosen algorithm and protocol.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollEstimate {
    pub ns: f64,
    pub algorithm: Algorithm,
    pub protocol: Protocol,
}

impl Machine {
    /// Time of a collective of kind `kind` moving `bytes` (the larger of input and output
    /// buffer per rank) on `n` ranks.
    pub fn collective(&self, kind: CollKind, bytes: u64, n: u64) -> CollEstimate {
        self.collective_on(kind, bytes, n, 1)
    }

    /// [`Machine::collective`] for a group whose ranks lie on `nodes` nodes (see
    /// [`Machine::group_nodes`]). Across nodes the ring (or tree) crosses the network: the
    /// bandwidth is the inter-node protocol's (the network link is the bottleneck), the
    /// steps that cross nodes pay the inter-node step latency and the others the NVLink one,
    /// as NCCL's tuning model splits a ring's latency into intra- and inter-node steps.
    pub fn collective_on(&self, kind: CollKind, bytes: u64, n: u64, nodes: u64) -> CollEstimate {
        let n = n.max(1);
        if n == 1 || bytes == 0 {
            return CollEstimate {
                ns: 0.0,
                algorithm: Algorithm::Ring,
                protocol: Protocol::Simple,
            };
        }
        let nf = n as f64;
        let s = bytes as f64;
        // Bus factor (data each rank moves relative to the buffer) and number of steps.
        let (params, factor, steps) = match kind {
            CollKind::AllReduce => (&self.all_reduce, 2.0 * (nf - 1.0) / nf, 2 * (n - 1)),
            CollKind::AllGather => (&self.all_gather, (nf - 1.0) / nf, n - 1),
            CollKind::ReduceScatter => (&self.reduce_scatter, (nf - 1.0) / nf, n - 1),
            CollKind::AllToAll => (&self.all_gather, (nf - 1.0) / nf, 1),
            CollKind::Broadcast => (&self.all_gather, 1.0, n - 1),
        };
        let inter = self.inter_node.as_ref().filter(|_| nodes > 1);
        // Steps of the ring that cross nodes: each node boundary is crossed once per pass.
        let inter_steps = match kind {
            CollKind::AllReduce => 2 * (nodes.saturating_sub(1)),
            CollKind::AllToAll => 1,
            _ => nodes.saturating_sub(1),
        }
        .min(steps);
        let depth = (nf.log2().ceil()) as u64;
        let node_depth = ((nodes.max(1) as f64).log2().ceil()) as u64;
        let mut best = CollEstimate {
            ns: f64::INFINITY,
            algorithm: Algorithm::Ring,
            protocol: Protocol::Simple,
        };
        for (i, p) in params.iter().enumerate() {
            // (latency of the ring, latency of the tree, bus bandwidth), µs and GB/s.
            let (ring_lat, tree_lat, bw) = match inter {
                None => (
                    p.base_us + p.step_us * (steps.saturating_sub(1)) as f64,
                    p.base_us + p.step_us * (2 * depth).saturating_sub(1) as f64,
                    p.bus_gbps,
                ),
                Some(t) => {
                    let q = &t[i];
                    (
                        q.base_us
                            + q.step_us * inter_steps as f64
                            + p.step_us * (steps - inter_steps).saturating_sub(1) as f64,
                        q.base_us
                            + q.step_us * (2 * node_depth) as f64
                            + p.step_us
                                * (2 * (depth - node_depth.min(depth))).saturating_sub(1) as f64,
                        q.bus_gbps,
                    )
                }
            };
            // algbw-normalised: NCCL's busbw = algbw × factor, so time = factor × S / busbw.
            let ring = ring_lat + factor * s / (bw * 1e3);
            if ring < best.ns / 1e3 {
                best = CollEstimate {
                    ns: ring * 1e3,
                    algorithm: Algorithm::Ring,
                    protocol: p.protocol,
                };
            }
            if kind == CollKind::AllReduce && n > 2 {
                let tree = tree_lat + 2.0 * (nf - 1.0) / nf * s / (bw * self.tree_bw_factor * 1e3);
                if tree < best.ns / 1e3 {
                    best = CollEstimate {
                        ns: tree * 1e3,
                        algorithm: Algorithm::Tree,
                        protocol: p.protocol,
                    };
                }
            }
        }
        best
    }

    /// Time in ns of a symm kernel on `n` ranks; `bytes` is the larger of its input and
    /// output buffers per rank (the all-reduces: the buffer; all-gather: its output;
    /// reduce-scatter: its input). Like [`Machine::collective`], free on one rank.
    pub fn symm(&self, algo: SymmAlgo, bytes: u64, n: u64) -> f64 {
        if n <= 1 || bytes == 0 {
            return 0.0;
        }
        let (nf, s) = (n as f64, bytes as f64);
        let fixed = self.symm_launch_us + 2.0 * self.symm_barrier_us;
        // µs: bytes / (GB/s · 10³).
        let us = match algo {
            // LL: each rank pushes its buffer, as flagged lines, into every peer; no barrier.
            SymmAlgo::OneShotAllReduce if commlir_dialects::rt::abi::symm_one_shot_is_ll(bytes) => {
                self.symm_ll_us + (nf - 1.0) * s / (self.symm_ll_gbps * 1e3)
            }
            // Each rank reads the whole buffer of every peer.
            SymmAlgo::OneShotAllReduce => fixed + (nf - 1.0) * s / (self.symm_read_gbps * 1e3),
            // Each rank reads its chunk from every peer, then writes it to every peer.
            SymmAlgo::TwoShotAllReduce => {
                fixed + self.symm_push_us + 2.0 * (nf - 1.0) / nf * s / (self.symm_rw_gbps * 1e3)
            }
            // Each rank reads (G-1)/G of the large buffer from its peers.
            SymmAlgo::AllGather | SymmAlgo::ReduceScatter => {
                fixed + (nf - 1.0) / nf * s / (self.symm_read_gbps * 1e3)
            }
        };
        us * 1e3
    }

    /// Time in ns of copying `bytes` on the device (a `compute.clone`, as [`op_cost`]
    /// estimates it): memory-bound, reading and writing each byte.
    pub fn copy(&self, bytes: u64) -> f64 {
        self.roofline(0.0, self.vector_flops, 2.0 * bytes as f64)
    }

    /// How many nodes of this machine a group of `size` ranks spans, with the explicit rank
    /// lists `ranks` (each member of a family of equal subgroups; empty: ranks `0..size`,
    /// packed onto as few nodes as the launcher's rank order puts them): the most over its
    /// members. Always 1 on a machine of one node.
    pub fn group_nodes(&self, size: u64, ranks: &[Vec<i64>]) -> u64 {
        if self.nodes <= 1 || self.gpus_per_node == 0 || self.inter_node.is_none() {
            return 1;
        }
        let per = self.gpus_per_node as i64;
        if ranks.is_empty() {
            return size.div_ceil(self.gpus_per_node).max(1);
        }
        ranks
            .iter()
            .map(|member| {
                let mut nodes: Vec<i64> = member.iter().map(|r| r.div_euclid(per)).collect();
                nodes.sort_unstable();
                nodes.dedup();
                nodes.len().max(1) as u64
            })
            .max()
            .unwrap_or(1)
    }

    /// Matmul peak for an element type.
    pub fn matmul_peak(&self, ctx: &Context, elem: commlir_ir::Type) -> f64 {
        match ctx.type_kind(elem) {
            TypeKind::Float(FloatKind::BF16 | FloatKind::F16) => self.matmul_flops_bf16,
            TypeKind::Float(FloatKind::F64) => self.matmul_flops_f64,
            _ => self.matmul_flops_f32,
        }
    }

    /// Roofline time in ns for `flops` at `peak` and `bytes` of memory traffic.
    pub fn roofline(&self, flops: f64, peak: f64, bytes: f64) -> f64 {
        self.launch_ns + (flops / peak).max(bytes / self.mem_bw) * 1e9
    }
}

/// What an op costs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OpCost {
    /// Runs on the compute stream for this long (ns).
    Compute(f64),
    /// A collective on the comm stream for this long (ns).
    Collective(f64),
    /// Free (waits, allocations, structure).
    Free,
    /// A fused collective-matmul (blocking, on the compute stream) for `ns`, of which
    /// `exposed_ns` is communication its matmul does not hide.
    Fused { ns: f64, exposed_ns: f64 },
}

impl OpCost {
    /// The time in ns, whatever the stream.
    pub fn ns(self) -> f64 {
        match self {
            OpCost::Compute(t) | OpCost::Collective(t) | OpCost::Fused { ns: t, .. } => t,
            OpCost::Free => 0.0,
        }
    }
}

/// The collective kind of an op name, at any level (`coll`, `comm`).
pub fn coll_kind(name: &str) -> Option<CollKind> {
    Some(match name {
        "coll.all_reduce"
        | "coll.all_reduce_coalesced"
        | "comm.all_reduce"
        | "comm.all_reduce_coalesced" => CollKind::AllReduce,
        "coll.all_gather_into_tensor"
        | "coll.all_gather_into_tensor_coalesced"
        | "comm.all_gather" => CollKind::AllGather,
        "coll.reduce_scatter_tensor"
        | "coll.reduce_scatter_tensor_coalesced"
        | "comm.reduce_scatter" => CollKind::ReduceScatter,
        "coll.all_to_all_single"
        | "comm.all_to_all"
        | "coll.shard_dim_alltoall"
        | "comm.shard_dim_alltoall" => CollKind::AllToAll,
        "coll.broadcast" | "comm.broadcast" => CollKind::Broadcast,
        _ => return None,
    })
}

/// Bytes a collective moves per rank: the larger of what it reads and writes, summed over
/// coalesced members.
pub fn collective_bytes(ctx: &Context, op: OpId) -> u64 {
    let name = ctx.op_name(op);
    let read: u64 = match name {
        "comm.all_gather"
        | "comm.reduce_scatter"
        | "comm.all_to_all"
        | "comm.shard_dim_alltoall" => {
            let n = ctx.operands(op).len() / 2;
            ctx.operands(op)[..n]
                .iter()
                .filter_map(|v| tensor_bytes(ctx, ctx.value_type(*v)))
                .sum()
        }
        _ => ctx
            .operands(op)
            .iter()
            .filter_map(|v| tensor_bytes(ctx, ctx.value_type(*v)))
            .sum(),
    };
    let written: u64 = match name {
        "comm.all_gather"
        | "comm.reduce_scatter"
        | "comm.all_to_all"
        | "comm.shard_dim_alltoall" => {
            let n = ctx.operands(op).len() / 2;
            ctx.operands(op)[n..]
                .iter()
                .filter_map(|v| tensor_bytes(ctx, ctx.value_type(*v)))
                .sum()
        }
        _ => ctx
            .results(op)
            .iter()
            .filter_map(|v| tensor_bytes(ctx, ctx.value_type(*v)))
            .sum(),
    };
    read.max(written)
}

/// The size of `op`'s group and how many nodes of `machine` its ranks span (size 1 on one
/// node when the op names no valid group).
pub fn group_extent(ctx: &Context, machine: &Machine, op: OpId) -> (u64, u64) {
    let Ok(g) = group_of(ctx, op) else {
        return (1, 1);
    };
    let n = g.size.max(1) as u64;
    // Only a machine of several nodes reads the rank lists.
    if machine.nodes <= 1 {
        return (n, 1);
    }
    let ranks = group_rank_lists(ctx, g.op);
    (n, machine.group_nodes(n, &ranks))
}

/// The `ranks` of a `coll.group`: one list, or one per member of a family; empty when absent.
fn group_rank_lists(ctx: &Context, group: OpId) -> Vec<Vec<i64>> {
    let Some(a) = ctx.inherent_attr(group, "ranks") else {
        return Vec::new();
    };
    if let Some(flat) = ctx.attr_as_i64_array(a) {
        return vec![flat];
    }
    match ctx.attr_kind(a) {
        AttrKind::Array(items) => items
            .iter()
            .filter_map(|x| ctx.attr_as_i64_array(*x))
            .collect(),
        _ => Vec::new(),
    }
}

/// The cost of `op` on `machine`: the `cost_ns` override if present, else the cost hook of
/// the op's definition if it has one, else the model.
pub fn op_cost(ctx: &Context, machine: &Machine, op: OpId) -> OpCost {
    let name = ctx.op_name(op);
    let symm = symm_algo(name);
    let is_coll = coll_kind(name).is_some() || symm.is_some();
    let fused = fused_cost(ctx, machine, op);
    if let Some(c) = ctx
        .inherent_attr(op, "cost_ns")
        .and_then(|a| ctx.attr_as_f64(a))
    {
        // An override of a fused op keeps the model's share of exposed communication.
        if let Some(f) = fused {
            return OpCost::Fused {
                ns: c,
                exposed_ns: if f.total_ns > 0.0 {
                    c * f.exposed_ns() / f.total_ns
                } else {
                    0.0
                },
            };
        }
        return if is_coll {
            OpCost::Collective(c)
        } else if c == 0.0 {
            OpCost::Free
        } else {
            OpCost::Compute(c)
        };
    }
    // An op defined outside commlir brings its own estimate (Inductor's
    // `estimate_op_runtime` hook), read like `cost_ns`.
    if let Some(c) = ctx
        .op_def(op)
        .and_then(|d| d.cost)
        .and_then(|hook| hook(ctx, op))
        .filter(|c| c.is_finite() && *c >= 0.0)
    {
        return if is_coll {
            OpCost::Collective(c)
        } else if c == 0.0 {
            OpCost::Free
        } else {
            OpCost::Compute(c)
        };
    }
    if let Some(f) = fused {
        return OpCost::Fused {
            ns: f.total_ns,
            exposed_ns: f.exposed_ns(),
        };
    }
    if let Some(kind) = coll_kind(name) {
        let (n, nodes) = group_extent(ctx, machine, op);
        return OpCost::Collective(
            machine
                .collective_on(kind, collective_bytes(ctx, op), n, nodes)
                .ns,
        );
    }
    if let Some(algo) = symm {
        let n = group_of(ctx, op).map(|g| g.size.max(1) as u64).unwrap_or(1);
        // Blocking kernels: they occupy the compute stream.
        return OpCost::Compute(machine.symm(algo, collective_bytes(ctx, op), n));
    }
    if !name.starts_with("compute.") {
        return OpCost::Free;
    }
    let in_bytes: f64 = ctx
        .operands(op)
        .iter()
        .filter_map(|v| tensor_bytes(ctx, ctx.value_type(*v)))
        .sum::<u64>() as f64;
    let out_bytes: f64 = ctx
        .results(op)
        .iter()
        .filter_map(|v| tensor_bytes(ctx, ctx.value_type(*v)))
        .sum::<u64>() as f64;
    let bytes = in_bytes + out_bytes;
    let out_elems: f64 = ctx
        .results(op)
        .iter()
        .filter_map(|v| tensor_info(ctx, ctx.value_type(*v)))
        .map(|t| t.numel() as f64)
        .sum();
    if name == "compute.matmul" {
        let a = tensor_info(ctx, ctx.value_type(ctx.operand(op, 0)));
        let k = a
            .as_ref()
            .and_then(|t| t.shape.last().copied())
            .unwrap_or(1) as f64;
        let flops = 2.0 * out_elems * k;
        let peak = a
            .map(|t| machine.matmul_peak(ctx, t.elem))
            .unwrap_or(machine.matmul_flops_f32);
        return OpCost::Compute(machine.roofline(flops, peak, bytes));
    }
    if name == "compute.attention" || name == "compute.attention_backward" {
        // The backward recomputes the scores and takes four products where the forward
        // takes two, and its score-sized intermediates (dP, dS) double the softmax pass:
        // about 2.5× the forward's work, the ratio flash attention's backward shows.
        let work = if name == "compute.attention" {
            1.0
        } else {
            2.5
        };
        if let Some(ns) = attention_ns(ctx, machine, op, bytes, work) {
            return OpCost::Compute(ns);
        }
    }
    let per_elem = match name {
        "compute.gelu" | "compute.silu" | "compute.tanh" | "compute.exp" | "compute.softmax"
        | "compute.sigmoid" | "compute.sin" | "compute.cos" | "compute.log" => 8.0,
        _ => 1.0,
    };
    OpCost::Compute(machine.roofline(
        per_elem * out_elems.max(in_bytes / 4.0),
        machine.vector_flops,
        bytes,
    ))
}

/// `compute.attention` as `comm-to-rt` lowers it: f16/bf16 with head dims cuDNN takes at
/// cuDNN's measured rate ([`CUDNN_FWD_OF_PEAK`], [`CUDNN_BWD_OF_PEAK`]), the causal half only;
/// bf16 of the sizes commlir's tensor-core kernel takes at that kernel's measured rate ([`peak_flash`]), the causal half only, plus the
/// values' transpose; otherwise two batched GEMMs (`q·kᵀ` into f32 scores, `p·v`) at the
/// matmul peak, and between them one softmax pass that reads the scores (f32, 8 vector flops
/// an element) and writes the probabilities in the element type, which the second GEMM reads
/// back; there masked keys are computed too (the GEMMs are dense). The score count is that
/// of the query heads (grouped kv heads are read once per query head). `work` scales the
/// products and the score traffic: 1 for the forward, 2.5 for `compute.attention_backward`
/// (operands 0–2 are q, k, v in both; `io_bytes` is the op's own operands and results).
fn attention_ns(
    ctx: &Context,
    machine: &Machine,
    op: OpId,
    io_bytes: f64,
    work: f64,
) -> Option<f64> {
    let q = tensor_info(ctx, ctx.value_type(ctx.operand(op, 0)))?;
    let k = tensor_info(ctx, ctx.value_type(ctx.operand(op, 1)))?;
    let v = tensor_info(ctx, ctx.value_type(ctx.operand(op, 2)))?;
    let r = q.shape.len();
    if r < 2 || k.shape.len() != r || v.shape.len() != r {
        return None;
    }
    let nb: f64 = q.shape[..r - 2].iter().map(|&x| x as f64).product();
    let (lq, d) = (q.shape[r - 2] as f64, q.shape[r - 1] as f64);
    let (lk, dv) = (k.shape[r - 2] as f64, v.shape[r - 1] as f64);
    let scores = nb * lq * lk;
    let elem =
        tensor_bytes(ctx, ctx.value_type(ctx.operand(op, 0)))? as f64 / (nb * lq * d).max(1.0);
    let half = matches!(
        ctx.type_kind(q.elem),
        TypeKind::Float(FloatKind::BF16 | FloatKind::F16)
    );
    if half && commlir_dialects::compute::cudnn_attention_supported(d as i64, dv as i64) {
        // cuDNN's fused flash attention (the default lowering): the visible products at the
        // fraction of the GEMM peak its kernels reached (the scores never leave the chip).
        let causal = ctx.inherent_attr(op, "causal").is_some();
        let part = if causal { 0.5 } else { 1.0 };
        let flops = work * 2.0 * part * scores * (d + dv);
        let of_peak = if work > 1.0 {
            CUDNN_BWD_OF_PEAK
        } else {
            CUDNN_FWD_OF_PEAK
        };
        let peak = machine.matmul_peak(ctx, q.elem) * of_peak;
        return Some(machine.roofline(flops, peak, io_bytes) + machine.launch_ns);
    }
    let bf16 = matches!(ctx.type_kind(q.elem), TypeKind::Float(FloatKind::BF16));
    let sizes = [
        q.shape[r - 2],
        k.shape[r - 2],
        q.shape[r - 1],
        v.shape[r - 1],
    ];
    if bf16
        && commlir_dialects::compute::flash_attention_supported(
            sizes[0], sizes[1], sizes[2], sizes[3],
        )
    {
        // One tensor-core kernel: the products at a fraction of the GEMM peak (the scores
        // never leave registers; a causal one skips the tiles past each row block), after a
        // transpose of the values.
        let causal = ctx.inherent_attr(op, "causal").is_some();
        let part = if causal {
            0.5 + 32.0 / lq.max(64.0)
        } else {
            1.0
        };
        let flops = work * 2.0 * part * scores * (d + dv);
        // The values as they are (a grouped kv head is transposed once, not per query head).
        let v_bytes = tensor_bytes(ctx, ctx.value_type(ctx.operand(op, 2)))? as f64;
        return Some(
            machine.roofline(flops, peak_flash(machine, ctx, q.elem), io_bytes)
                + machine.roofline(0.0, machine.vector_flops, 2.0 * v_bytes),
        );
    }
    let acc = if elem > 4.0 { 8.0 } else { 4.0 };
    let peak = machine.matmul_peak(ctx, q.elem);
    let gemms = machine.roofline(
        work * 2.0 * scores * (d + dv),
        peak,
        io_bytes + work * scores * (acc + elem),
    );
    let softmax = machine.roofline(
        work * 8.0 * scores,
        machine.vector_flops,
        work * scores * (acc + elem),
    );
    Some(gemms + softmax + machine.launch_ns)
}

/// The rate of cuDNN's attention products as a fraction of the matmul peak, measured on one
/// H200 (docs/benchmarks.md, *attention*: 32 query heads of 128, causal, bf16, 4096 and
/// 8192 positions): the forward at 524–612 TFLOP/s, the backward's 2.5× work at 437–506,
/// against 788 for a bf16 GEMM.
const CUDNN_FWD_OF_PEAK: f64 = 0.72;
const CUDNN_BWD_OF_PEAK: f64 = 0.60;

/// The rate of `rt.flash_attention`'s products: a fixed fraction of the matmul peak,
/// measured on an H100 (940 µs for the 32 heads × 4096² causal attention of the Llama
/// block, 146 TFLOP/s against cuBLAS's 892: `mma.sync` from shared memory, no pipelining).
fn peak_flash(machine: &Machine, ctx: &Context, elem: commlir_ir::Type) -> f64 {
    const FLASH_OF_PEAK: f64 = 0.16;
    machine.matmul_peak(ctx, elem) * FLASH_OF_PEAK
}

/// The model of a fused collective-matmul (`symm.fused_all_gather_matmul`,
/// `symm.fused_matmul_reduce_scatter`): its parts and its pipelined time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FusedCost {
    /// All its matmuls, unchunked.
    pub matmul_ns: f64,
    /// Its collective, unfused (all-gather of `a`, or reduce-scatter of the product).
    pub comm_ns: f64,
    /// The pipeline: G chunks, each step's transfer overlapping the previous chunk's matmul.
    pub total_ns: f64,
}

impl FusedCost {
    /// The time beyond its matmuls: communication the pipeline leaves exposed.
    pub fn exposed_ns(&self) -> f64 {
        (self.total_ns - self.matmul_ns).max(0.0)
    }

    /// What the unfused sequence costs when nothing else hides the collective.
    pub fn unfused_ns(&self) -> f64 {
        self.matmul_ns + self.comm_ns
    }
}

/// The cost of a matmul of `m×k` by `k×n` of element type `elem` (`bytes`: operands + result).
fn matmul_ns(
    ctx: &Context,
    machine: &Machine,
    elem: commlir_ir::Type,
    flops: f64,
    bytes: f64,
) -> f64 {
    machine.roofline(flops, machine.matmul_peak(ctx, elem), bytes)
}

/// The time of a fused collective-matmul run as a chunked pipeline over `g` ranks, for a
/// matmul of `rows` rows (the chunked dimension) taking `mm` whole and a collective taking
/// `comm` unfused: the matmul is cut into `g` chunks of `rows / g` rows, each slower than its
/// share of the whole by the ratio of their efficiencies (`chunk_half_rows`), the collective
/// into `g − 1` transfers of one shard each. Step 0 multiplies the local chunk, every later
/// step multiplies the chunk the previous step moved while the next one moves (the longer of
/// the two sets the pace; the GEMM slowed by the transfer beside it,
/// `chunk_gather_slowdown` or `chunk_scatter_slowdown` by the side, `gather`), and each step
/// pays `chunk_step_ns`. Small shapes lose: their transfer is too short to hide more than the
/// steps and the efficiency loss cost. A reduce-scatter whose chunks of `chunk_elems` product
/// elements `comm-to-rt` cuts into `parts` row blocks to accumulate (`rt::accumulate_parts`)
/// runs `G · parts` steps of `rows / (G · parts)` rows, slowed by `chunk_accumulate_slowdown`.
pub fn pipelined_ns(
    machine: &Machine,
    mm: f64,
    comm: f64,
    (g, rows, chunk_elems): (u64, f64, f64),
    gather: bool,
) -> f64 {
    if g < 2 {
        return mm + comm;
    }
    let parts = if gather {
        1.0
    } else {
        commlir_dialects::rt::accumulate_parts(g as i64, chunk_elems as i64) as f64
    };
    let g = g as f64;
    let eff = |m: f64| m / (m + machine.chunk_half_rows);
    let rows = rows.max(g * parts);
    let rel = (eff(rows / g / parts) / eff(rows)).max(machine.chunk_min_efficiency);
    let chunk_mm = mm / g / parts / rel;
    let chunk_comm = comm / (g - 1.0) / parts;
    let slowdown = if gather {
        machine.chunk_gather_slowdown
    } else if parts > 1.0 {
        machine.chunk_accumulate_slowdown
    } else {
        machine.chunk_scatter_slowdown
    };
    parts
        * (chunk_mm + (g - 1.0) * (chunk_mm * slowdown).max(chunk_comm) + g * machine.chunk_step_ns)
}

/// The model of a fused collective-matmul, `None` for any other op.
pub fn fused_cost(ctx: &Context, machine: &Machine, op: OpId) -> Option<FusedCost> {
    let gather = match ctx.op_name(op) {
        "symm.fused_all_gather_matmul" => true,
        "symm.fused_matmul_reduce_scatter" => false,
        _ => return None,
    };
    let g = group_of(ctx, op).map(|g| g.size.max(1) as u64).unwrap_or(1);
    let a = tensor_info(ctx, ctx.value_type(*ctx.operands(op).first()?))?;
    let k = *a.shape.last()? as f64;
    let a_bytes = tensor_bytes(ctx, ctx.value_type(ctx.operand(op, 0)))? as f64;
    let return_a = gather && ctx.inherent_attr(op, "return_a").is_some();
    let (mut mm, mut comm_bytes, mut rows) = (0.0, 0.0, 1.0f64);
    // The product elements each rank ends up with (the reduce-scatter's result).
    let chunk_elems = tensor_info(ctx, ctx.value_type(*ctx.results(op).last()?))?.numel() as f64;
    let products = &ctx.results(op)[usize::from(return_a)..];
    for (i, b) in ctx.operands(op)[1..].iter().enumerate() {
        let b_bytes = tensor_bytes(ctx, ctx.value_type(*b))? as f64;
        // The full product: the all-gather side's results, or the reduce-scatter's input.
        let (out_elems, out_bytes, a_full) = if gather {
            let r = products.get(i)?;
            let t = tensor_info(ctx, ctx.value_type(*r))?;
            (
                t.numel() as f64,
                tensor_bytes(ctx, ctx.value_type(*r))? as f64,
                a_bytes * g as f64,
            )
        } else {
            let r = tensor_info(ctx, ctx.value_type(ctx.result(op, 0)))?;
            let bytes = tensor_bytes(ctx, ctx.value_type(ctx.result(op, 0)))? as f64 * g as f64;
            comm_bytes = bytes;
            (r.numel() as f64 * g as f64, bytes, a_bytes)
        };
        // The chunked dimension: the product's rows, whichever dim the chunks cut.
        let n = match products.get(i) {
            Some(r) if gather => tensor_info(ctx, ctx.value_type(*r))?.shape.last().copied(),
            _ => tensor_info(ctx, ctx.value_type(ctx.result(op, 0)))?
                .shape
                .last()
                .copied(),
        };
        rows = rows.max(out_elems / n.unwrap_or(1).max(1) as f64);
        mm += matmul_ns(
            ctx,
            machine,
            a.elem,
            2.0 * out_elems * k,
            a_full + b_bytes + out_bytes,
        );
    }
    let kind = if gather {
        comm_bytes = a_bytes * g as f64;
        CollKind::AllGather
    } else {
        CollKind::ReduceScatter
    };
    let comm = machine.collective(kind, comm_bytes as u64, g).ns;
    Some(FusedCost {
        matmul_ns: mm,
        comm_ns: comm,
        total_ns: pipelined_ns(machine, mm, comm, (g, rows, chunk_elems), gather),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn us(kind: CollKind, bytes: u64) -> f64 {
        H200_NVLINK.collective(kind, bytes, 2).ns / 1e3
    }

    /// The fitted model reproduces the DESIGN §5 measurements on 2×H200.
    #[test]
    fn matches_h200_measurements() {
        let cases = [
            (CollKind::AllReduce, MIB, 14.2),
            (CollKind::AllReduce, 16 * MIB, 75.3),
            (CollKind::AllReduce, 256 * MIB, 913.0),
            (CollKind::AllReduce, 1024 * MIB, 3269.0),
            (CollKind::AllGather, 16 * MIB, 54.0),
            (CollKind::AllGather, 256 * MIB, 549.0),
        ];
        for (k, b, want) in cases {
            let got = us(k, b);
            let err = (got - want).abs() / want;
            assert!(
                err < 0.02,
                "{k:?} {b} bytes: model {got:.1} us vs measured {want} us"
            );
        }
    }

    /// The fused-op model against commlir's own pipelines measured on two H100s (µs; rows,
    /// hidden, matmul alone, the unfused collective's exposed time (unfused − matmul alone of
    /// one call), fused, side) at tokens×hidden×ffn 2048×4096×16384, 8192×4096×16384 and
    /// 8192×8192×28672, copy engines moving the chunks, the all-gathers pushing, the two
    /// larger reduce-scatters accumulating in two row blocks (docs/benchmarks.md, *GPU: async
    /// tensor parallelism*): fusing wins at every shape and side, and the model says so and
    /// stays within 6% of the measured fused time.
    #[test]
    fn pipelined_model_matches_the_measured_fused_ops() {
        let m = H200_NVLINK;
        let measured = [
            (2048.0, 4096.0, 183.8, 53.1, 196.7, true),
            (8192.0, 4096.0, 793.2, 134.0, 835.9, true),
            (8192.0, 8192.0, 2853.3, 308.0, 2920.6, true),
            (2048.0, 4096.0, 173.3, 60.3, 192.7, false),
            (8192.0, 4096.0, 739.2, 160.4, 789.0, false),
            (8192.0, 8192.0, 2749.7, 332.9, 2886.3, false),
        ];
        for (i, (rows, hidden, mm, comm, fused, gather)) in measured.into_iter().enumerate() {
            let chunk = rows / 2.0 * hidden;
            let shape = (2, rows, chunk);
            let t = pipelined_ns(&m, mm * 1e3, comm * 1e3, shape, gather) / 1e3;
            assert!(
                t < mm + comm,
                "case {i}: model {t:.0} µs vs unfused {}",
                mm + comm
            );
            assert!(
                (t - fused).abs() / fused < 0.06,
                "case {i}: model {t:.0} µs vs fused {fused}"
            );
        }
        // A transfer far longer than the chunk's GEMM is not hidden: fusing loses.
        let t = pipelined_ns(&m, 20e3, 200e3, (2, 512.0, 0.0), true);
        assert!(t > 20e3 + 200e3 * 0.9, "{t}");
    }

    #[test]
    fn gemm_roofline_matches() {
        let m = H200_NVLINK;
        let flops = 2.0 * 8192f64.powi(3);
        let bytes = 3.0 * 8192.0 * 8192.0 * 2.0;
        let t = m.roofline(flops, m.matmul_flops_bf16, bytes) / 1e6;
        assert!((t - 1.40).abs() / 1.40 < 0.02, "bf16 gemm {t} ms");
        let t = m.roofline(flops, m.matmul_flops_f32, bytes * 2.0) / 1e6;
        assert!((t - 21.6).abs() / 21.6 < 0.02, "f32 gemm {t} ms");
    }

    /// The fitted symm constants at G = 2 (docs/cost-model.md), and the crossovers they imply:
    /// the LL one-shot below two-shot for small messages, two-shot below one-shot for large
    /// ones.
    #[test]
    fn symm_estimates() {
        let m = H200_NVLINK;
        let one = |b| m.symm(SymmAlgo::OneShotAllReduce, b, 2) / 1e3;
        let two = |b| m.symm(SymmAlgo::TwoShotAllReduce, b, 2) / 1e3;
        assert!((one(0) - 0.0).abs() < 1e-9);
        // LL up to 1 MiB: its fixed cost and payload rate; the barrier one-shot above.
        let ll = m.symm_ll_us + 262_144.0 / (m.symm_ll_gbps * 1e3);
        assert!((one(262_144) - ll).abs() < 1e-9);
        let barrier = m.symm_launch_us + 2.0 * m.symm_barrier_us;
        let big = barrier + 4_194_304.0 / (m.symm_read_gbps * 1e3);
        assert!((one(4 * MIB) - big).abs() < 1e-9);
        // The fitted crossover (docs/cost-model.md): LL one-shot up to 256 KiB, two-shot from
        // 1 MiB on, as measured on 2×H200.
        for b in [4 << 10, 16 << 10, 64 << 10, 256 << 10] {
            assert!(one(b) < two(b), "{b} bytes");
        }
        for b in [MIB, 4 * MIB, 16 * MIB] {
            assert!(two(b) < one(b), "{b} bytes");
        }
        assert_eq!(m.symm(SymmAlgo::AllGather, 1 << 20, 1), 0.0);
        assert!(
            m.symm(SymmAlgo::ReduceScatter, 1 << 20, 4)
                > m.symm(SymmAlgo::ReduceScatter, 1 << 20, 2)
        );
    }

    #[test]
    fn protocols_change_with_size() {
        let small = H200_NVLINK.collective(CollKind::AllReduce, 4096, 2);
        let large = H200_NVLINK.collective(CollKind::AllReduce, 1 << 30, 2);
        assert_eq!(large.protocol, Protocol::Simple);
        assert_ne!(small.protocol, Protocol::Simple);
        assert!(
            H200_NVLINK.collective(CollKind::AllReduce, 1 << 20, 8).ns
                > H200_NVLINK.collective(CollKind::AllReduce, 1 << 20, 2).ns
        );
    }

    /// A group spanning nodes runs at the network's bandwidth, pays the network's latency
    /// only on the steps that cross nodes, and is told apart by its ranks.
    #[test]
    fn inter_node_groups() {
        let ib = crate::analysis::machine::builtin("h100x8x4-ib400").unwrap();
        assert_eq!(ib.group_nodes(8, &[]), 1);
        assert_eq!(ib.group_nodes(16, &[]), 2);
        assert_eq!(ib.group_nodes(32, &[]), 4);
        // A data-parallel group across the four nodes: size 4, four nodes.
        assert_eq!(ib.group_nodes(4, &[vec![0, 8, 16, 24]]), 4);
        assert_eq!(
            ib.group_nodes(4, &[vec![0, 1, 2, 3], vec![8, 9, 10, 11]]),
            1
        );
        let big = 256 * MIB;
        let intra = ib.collective_on(CollKind::AllReduce, big, 8, 1);
        let inter = ib.collective_on(CollKind::AllReduce, big, 8, 2);
        assert!(inter.ns > intra.ns, "{inter:?} vs {intra:?}");
        // Bandwidth-bound: at most the ratio of the two Simple bandwidths (the fitted NVLink
        // Simple line carries a larger fixed part than the network's).
        let ratio = inter.ns / intra.ns;
        assert!(ratio > 1.0 && ratio < 370.0 / 340.0 + 0.01, "{ratio}");
        // Small messages: the network's step latency dominates.
        let small = ib.collective_on(CollKind::AllReduce, 4096, 32, 4).ns;
        assert!(small > 2.0 * ib.collective_on(CollKind::AllReduce, 4096, 32, 1).ns);
        // A machine of one node ignores node counts.
        let one = crate::analysis::machine::default_machine();
        assert_eq!(
            one.collective_on(CollKind::AllGather, big, 8, 4),
            one.collective(CollKind::AllGather, big, 8)
        );
    }
}
