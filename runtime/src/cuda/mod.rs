//! The `cuda` backend: runs a compiled artifact (`commlir-translate --emit=artifact`) on real
//! GPUs through the CUDA driver, cuBLAS and NCCL, all loaded at run time through cudarc, so
//! that nothing CUDA is needed to build and a machine without a GPU gets a diagnostic.
//!
//! Loading protocol (docs/codegen.md, docs/runtime.md): parse the container ([`artifact`]),
//! write the host shared object to a temporary file and `dlopen` it, then per rank: retain the
//! device's primary context, create a compute and a comm stream, the program's events, a
//! cuBLAS handle on the compute stream, load the PTX (`cuModuleLoadData`), bring up the world
//! communicator (`ncclCommInitRank`) and split one communicator per manifest group
//! (`ncclCommSplit`), generate the arguments exactly as the sim backend does
//! ([`crate::inputs`]) or read them from `--inputs` files ([`crate::tensor_file`]), upload
//! them, call `commlir_main(&API, state, args, results)`, synchronize and download the
//! results.
//!
//! Ranks are threads of one process (`--ranks N`, GPUs 0..N, world communicators from one
//! `ncclCommInitAll`), or one process per GPU when
//! `WORLD_SIZE`/`RANK` are set ([`rdzv`] says how the NCCL id travels). A watchdog aborts
//! every communicator (`ncclCommAbort`) when the run outlives its timeout.
//!
//! Modules: [`abi`] (the C ABI mirror), [`artifact`] (container and manifest), [`check`]
//! (tolerance comparison with the sim), [`ffi`] (checked library calls), [`rank`] (one rank's
//! state and the API table), [`rdzv`] (multi-process rendezvous), [`profile`] (the opt-in
//! host-time breakdown of the timed loops, `COMMLIR_HOST_PROFILE=1`).

pub mod abi;
pub mod affinity;
pub mod artifact;
pub mod baseline;
pub mod calibrate;
pub mod check;
pub mod crash;
pub mod cudnn;
pub mod ffi;
pub mod graph;
pub mod op_profile;
pub mod order;
pub mod profile;
pub mod rank;
pub mod rdzv;
pub mod symm;
pub mod trace;

use crate::inputs;
use crate::numeric;
use crate::output::RankResults;
use crate::tensor::{Data, ElemType, Tensor, TensorType};
use cudarc::driver::sys as cu;
use cudarc::nccl::sys as nccl;
use ffi::{cu_check, nccl_check};
use profile::Driver;
use rank::RankState;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What the user asked for.
#[derive(Clone, Debug)]
pub struct CudaOptions {
    /// Ranks (= GPUs) in single-process mode; ignored when `WORLD_SIZE` is set.
    pub ranks: usize,
    /// Function to run (default: the manifest's entry, i.e. `commlir_main`).
    pub entry: Option<String>,
    pub seed: u64,
    /// Abort the communicators after this long.
    pub timeout: Duration,
    /// Timed calls of the program after the checked one (0: no timing).
    pub bench_iters: usize,
    /// Untimed calls before the timed ones.
    pub warmup: usize,
    /// Use the artifact's argument/result slots (arguments uploaded straight into their
    /// comm-pool slots, results taken from them: no copy in or out); false: the program
    /// copies, as with a runner that ignores slots.
    pub slots: bool,
    /// Capture one call as a CUDA graph after the warm-up calls and replay it: the returned
    /// results come from one replay (arguments uploaded again before it), the timed calls are
    /// replays (`graph.rs`); the per-op pass stays on ordinary calls.
    pub cuda_graph: bool,
    /// With `cuda_graph`: calls captured back to back in the timed graph (one replay counts as
    /// this many calls), so that per-call device time excludes graph-launch gaps, as a
    /// benchmark that captures 100 calls in one graph measures it.
    pub graph_calls: usize,
    /// Arguments read from safetensors files instead of generated (`--inputs`).
    pub inputs: Option<crate::tensor_file::InputFiles>,
    /// The entry's argument names, for matching the files' tensors (`arg{i}` always works).
    pub arg_names: Vec<Option<String>>,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            ranks: 2,
            entry: None,
            seed: 0,
            timeout: Duration::from_secs(60),
            bench_iters: 0,
            warmup: 0,
            slots: true,
            cuda_graph: false,
            graph_calls: 1,
            inputs: None,
            arg_names: Vec::new(),
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug, Default)]
pub struct CudaRun {
    /// Results of the ranks this process ran, ascending.
    pub results: Vec<RankResults>,
    /// All ranks in the job (`WORLD_SIZE` or `--ranks`).
    pub world: usize,
    /// Mean seconds per call over the timed calls, the slowest rank of this process.
    pub seconds_per_call: Option<f64>,
    /// The same calls timed on the GPU: CUDA events on the compute stream around the whole
    /// loop of back-to-back calls (both streams joined at the end), per call, mean over this
    /// process's ranks (nccl-tests' default).
    pub event_seconds_per_call: Option<f64>,
    /// Host time per call spent enqueueing the timed calls (the loop without its final
    /// synchronization), mean over this process's ranks: at or above the event time the GPU
    /// waits on the host.
    pub enqueue_seconds_per_call: Option<f64>,
    /// With `COMMLIR_HOST_PROFILE=1` and `bench_iters`: where the timed loop's host time went
    /// (`profile.rs`), added up over this process's ranks (its per-call figures are means).
    pub host_profile: Option<profile::HostProfile>,
    /// Slots used: (arguments placed in pool slots, results taken from pool slots).
    pub slots_used: (usize, usize),
    /// Work items one call enqueues on (compute, comm) streams: kernel launches, library
    /// calls (GEMMs, attention), copies and collectives, on the rank of this process that
    /// issues the most.
    pub work_per_call: Option<[u64; 2]>,
    /// With `bench_iters` (not with graphs): the device memory of the rank of this process
    /// that used the most, as (stream-ordered peak, held for the run) bytes; their sum is the
    /// program's device memory peak, comparable with PyTorch's `max_memory_allocated` (neither
    /// counts the CUDA context, NCCL's internal buffers or cuBLAS's workspace).
    pub device_memory: Option<(u64, u64)>,
    /// Per-op mean device times (with `bench_iters`: a second pass of as many calls, events
    /// around every op, streams synchronized after each call), averaged over this process's
    /// ranks (nccl-tests' default), in program order.
    pub op_times: Vec<rank::OpTime>,
    /// The same per rank of this process, ascending (with start offsets: the measured
    /// timeline, `trace::chrome_trace`).
    pub op_times_by_rank: Vec<(usize, Vec<rank::OpTime>)>,
    /// Notes to show the user (fallbacks taken).
    pub notes: Vec<String>,
    /// Library versions and devices, for the log.
    pub info: String,
}

/// The process layout: which global ranks this process runs, on which devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub world: usize,
    /// (global rank, device ordinal)
    pub local: Vec<(usize, i32)>,
    pub rendezvous: Option<rdzv::Rendezvous>,
}

impl Layout {
    /// From the environment (`WORLD_SIZE`, `RANK`, `LOCAL_RANK`) or, without it, `ranks`
    /// threads on devices `0..ranks`.
    pub fn from_env(ranks: usize) -> Result<Layout, String> {
        let var = |n: &str| -> Result<Option<usize>, String> {
            match std::env::var(n) {
                Ok(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("{n}={v} is not a number")),
                Err(_) => Ok(None),
            }
        };
        match var("WORLD_SIZE")? {
            Some(world) => {
                let rank = var("RANK")?.ok_or("WORLD_SIZE is set but RANK is not")?;
                if rank >= world || world == 0 {
                    return Err(format!("RANK={rank} is not below WORLD_SIZE={world}"));
                }
                let local = var("LOCAL_RANK")?.unwrap_or(rank);
                let rendezvous = rdzv::Rendezvous::from_env()?;
                if rendezvous.is_none() && world > 1 {
                    return Err("WORLD_SIZE > 1 needs a rendezvous: set COMMLIR_RDZV_FILE (a path every rank sees) or MASTER_ADDR and MASTER_PORT".into());
                }
                Ok(Layout {
                    world,
                    local: vec![(rank, local as i32)],
                    rendezvous,
                })
            }
            None => {
                if ranks == 0 {
                    return Err("the number of ranks must be at least 1".into());
                }
                Ok(Layout {
                    world: ranks,
                    local: (0..ranks).map(|r| (r, r as i32)).collect(),
                    rendezvous: None,
                })
            }
        }
    }
}

/// The diagnostic for a machine without the CUDA driver (CI; tests check the wording).
pub const NO_DRIVER: &str = "error: no CUDA driver found (libcuda.so could not be loaded): the cuda backend needs an NVIDIA GPU and its driver; use --backend sim to run on the CPU";

/// The little-endian bytes of a tensor in its element type (what the device buffer holds).
pub fn tensor_bytes(t: &Tensor) -> Vec<u8> {
    let w = t.ty.elem.byte_width();
    let mut out = Vec::with_capacity(t.numel() * w);
    match (&t.data, t.ty.elem) {
        (Data::F32(v), ElemType::BF16) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&numeric::bf16_bits(f64::from(*x)).to_le_bytes())),
        (Data::F32(v), ElemType::F16) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&numeric::f16_bits(f64::from(*x)).to_le_bytes())),
        (Data::F32(v), _) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        (Data::F64(v), _) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        (Data::Int(v), _) => v
            .iter()
            .for_each(|x| out.extend_from_slice(&x.to_le_bytes()[..w])),
    }
    out
}

/// The inverse of [`tensor_bytes`]. An `i1` element is one byte holding 0 or 1; any other
/// byte (a kernel bug) is kept as is rather than reduced to its low bit, so `--check` and
/// the digest see it.
pub fn tensor_from_bytes(ty: &TensorType, bytes: &[u8]) -> Tensor {
    let w = ty.elem.byte_width();
    let chunks = bytes.chunks_exact(w);
    let data = match ty.elem {
        ElemType::BF16 => Data::F32(
            chunks
                .map(|c| numeric::bf16_value(u16::from_le_bytes([c[0], c[1]])) as f32)
                .collect(),
        ),
        ElemType::F16 => Data::F32(
            chunks
                .map(|c| numeric::f16_value(u16::from_le_bytes([c[0], c[1]])) as f32)
                .collect(),
        ),
        ElemType::F32 => Data::F32(
            chunks
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        ElemType::F64 => Data::F64(
            chunks
                .map(|c| {
                    let mut a = [0u8; 8];
                    a.copy_from_slice(c);
                    f64::from_le_bytes(a)
                })
                .collect(),
        ),
        ElemType::Int { width: 1, .. } => Data::Int(chunks.map(|c| i64::from(c[0])).collect()),
        e => Data::Int(
            chunks
                .map(|c| {
                    let mut a = [0u8; 8];
                    a[..w].copy_from_slice(c);
                    e.wrap(i64::from_le_bytes(a))
                })
                .collect(),
        ),
    };
    Tensor {
        ty: ty.clone(),
        data,
    }
}

/// Stack size of a rank thread (see where rank threads start).
const RANK_STACK: usize = 256 << 20;

/// A raw handle shared with the watchdog.
#[derive(Clone, Copy)]
struct CommHandle(nccl::ncclComm_t);
// SAFETY: `ncclCommAbort` may be called from any thread; the watchdog only aborts.
unsafe impl Send for CommHandle {}

/// Everything the rank threads share.
struct Shared {
    art: artifact::Artifact,
    main_fn: abi::CommlirMain,
    arg_types: Vec<TensorType>,
    result_types: Vec<TensorType>,
    func: artifact::FunctionInfo,
    groups: Vec<Vec<Vec<usize>>>,
    opts: CudaOptions,
    world: usize,
    barrier: Barrier,
    comms: Mutex<Vec<CommHandle>>,
    /// Ranks are threads of this process: each rank's device, by global rank (peers map
    /// each other's symm_mem pools directly); empty with one process per GPU.
    in_process_devices: Vec<i32>,
    /// Arguments read from `--inputs`, by global rank (`None`: generate it); empty when
    /// every argument is generated.
    provided: HashMap<usize, Vec<Option<Tensor>>>,
}

/// Runs an artifact (its bytes) on this process's ranks.
pub fn run(bytes: &[u8], opts: &CudaOptions) -> Result<CudaRun, String> {
    let art = artifact::parse(bytes).map_err(|e| format!("error: {e}"))?;
    if !ffi::driver_present() {
        return Err(NO_DRIVER.into());
    }
    ffi::libraries_present().map_err(|e| format!("error: {e}"))?;
    // NVLink multicast (NVLS) stays off on shared hosts (see the device notes).
    if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
        std::env::set_var("NCCL_NVLS_ENABLE", "0");
    }
    let layout = Layout::from_env(opts.ranks).map_err(|e| format!("error: {e}"))?;
    crash::install(layout.local.first().map(|&(r, _)| r));
    // SAFETY: cuInit takes flags 0 and may be called any number of times.
    cu_check("cuInit", unsafe { cu::cuInit(0) }).map_err(|e| format!("error: {e}"))?;
    let mut count = 0;
    // SAFETY: writes one int.
    cu_check("cuDeviceGetCount", unsafe {
        cu::cuDeviceGetCount(&mut count)
    })
    .map_err(|e| format!("error: {e}"))?;
    if let Some((_, d)) = layout.local.iter().find(|(_, d)| *d >= count) {
        return Err(format!(
            "error: device {d} is needed but this machine has {count} GPU(s)"
        ));
    }
    let func = match &opts.entry {
        None => art.manifest.entry_function()?.clone(),
        Some(e) => art
            .manifest
            .functions
            .iter()
            .find(|f| &f.name == e)
            .cloned()
            .ok_or_else(|| format!("error: the artifact has no function @{e}"))?,
    };
    let symbol = if opts.entry.is_none() {
        art.manifest.entry_symbol.clone()
    } else {
        func.symbol.clone()
    };
    let types = |v: &[String]| -> Result<Vec<TensorType>, String> {
        v.iter()
            .map(|t| artifact::parse_type(t).map_err(|e| format!("error: {e}")))
            .collect()
    };
    let arg_types = types(&func.args)?;
    let result_types = types(&func.results)?;
    // Read every local rank's inputs before any device work, so that a bad file costs no
    // NCCL bring-up and reports like the sim backend's.
    // Names from a source whose entry has other arguments than the artifact's would match
    // the wrong tensors: then only the `arg{i}` names apply.
    let names: &[Option<String>] = if opts.arg_names.len() == arg_types.len() {
        &opts.arg_names
    } else {
        &[]
    };
    let provided = match &opts.inputs {
        Some(files) => layout
            .local
            .iter()
            .map(|&(rank, _)| {
                crate::tensor_file::read_inputs(files, rank, names, &arg_types)
                    .map(|t| (rank, t))
                    .map_err(|e| format!("error: @{}: {e}", func.name))
            })
            .collect::<Result<HashMap<_, _>, _>>()?,
        None => HashMap::new(),
    };
    let groups = art
        .manifest
        .groups
        .iter()
        .map(|g| artifact::subgroups(g, layout.world))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("error: {e}"))?;
    // dlopen the host program from a private temporary file.
    let so_path = std::env::temp_dir().join(format!(
        "commlir-host-{}-{}.so",
        std::process::id(),
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::write(&so_path, &art.host)
        .map_err(|e| format!("error: cannot write {}: {e}", so_path.display()))?;
    // SAFETY: the library is the compiled host program; it has no initializers beyond the
    // loader's and calls nothing but the API table.
    let lib = unsafe { libloading::Library::new(&so_path) };
    let _ = std::fs::remove_file(&so_path);
    let lib = lib.map_err(|e| format!("error: cannot load the host program: {e}"))?;
    // SAFETY: the symbol has the `commlir_main` signature (abi.rs).
    let main_fn: abi::CommlirMain = unsafe {
        *lib.get::<abi::CommlirMain>(symbol.as_bytes())
            .map_err(|e| format!("error: the host program has no {symbol}: {e}"))?
    };
    let info = format!(
        "cuda: {} GPU(s) visible, NCCL {}, world {} rank(s), {} in this process",
        count,
        ffi::nccl_version().unwrap_or_else(|e| e),
        layout.world,
        layout.local.len()
    );
    // The world NCCL id: made here (single process) or exchanged (one process per GPU).
    let started = SystemTime::now();
    let id: [u8; rdzv::ID_BYTES] = {
        let me = layout.local[0].0;
        match &layout.rendezvous {
            Some(r) if me != 0 => r
                .fetch(started, opts.timeout)
                .map_err(|e| format!("error: {e}"))?,
            _ => {
                let id = new_unique_id().map_err(|e| format!("error: {e}"))?;
                if let Some(r) = &layout.rendezvous {
                    // TCP serves the peers from a thread, so rank 0 can go on to init.
                    let (r2, world, t) = (r.clone(), layout.world, opts.timeout);
                    std::thread::spawn(move || {
                        if let Err(e) = r2.publish(&id, world, t) {
                            eprintln!("error: {e}");
                        }
                    });
                }
                id
            }
        }
    };
    let shared = Arc::new(Shared {
        art,
        main_fn,
        arg_types,
        result_types,
        func: func.clone(),
        groups,
        opts: opts.clone(),
        world: layout.world,
        barrier: Barrier::new(layout.local.len()),
        comms: Mutex::new(Vec::new()),
        in_process_devices: if layout.rendezvous.is_none() && layout.local.len() == layout.world {
            layout.local.iter().map(|&(_, d)| d).collect()
        } else {
            Vec::new()
        },
        provided,
    });
    // All ranks in this process: their world communicators in one `ncclCommInitAll` (NCCL's
    // single-process initialisation), each handed to its rank's thread; one process per GPU:
    // each rank joins with `ncclCommInitRank` on the exchanged id.
    let mut worlds: Vec<Option<CommHandle>> = vec![None; layout.local.len()];
    if layout.rendezvous.is_none() && layout.local.len() == layout.world {
        let devs: Vec<i32> = layout.local.iter().map(|&(_, d)| d).collect();
        let mut comms = vec![std::ptr::null_mut(); devs.len()];
        // SAFETY: `comms` has room for one handle per device of `devs`.
        ffi::nccl_check(
            "ncclCommInitAll",
            unsafe { nccl::ncclCommInitAll(comms.as_mut_ptr(), devs.len() as i32, devs.as_ptr()) },
            std::ptr::null_mut(),
        )
        .map_err(|e| format!("error: {e}"))?;
        // `layout.local` lists ranks 0..n in order with their devices: comm i is rank i's.
        for (w, c) in worlds.iter_mut().zip(comms) {
            *w = Some(CommHandle(c));
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    for (&(rank, dev), world_comm) in layout.local.iter().zip(worlds) {
        let (sh, tx) = (shared.clone(), tx.clone());
        std::thread::Builder::new()
            .name(format!("rank{rank}"))
            // The compiled program runs on this thread: a chain of up to 10,000 calls (the
            // compiler's limit) is that many native frames. Reserved, committed as touched.
            .stack_size(RANK_STACK)
            .spawn(move || {
                let r = rank_main(&sh, rank, dev, id, world_comm);
                let _ = tx.send((rank, r));
            })
            .map_err(|e| format!("error: cannot start a rank thread: {e}"))?;
    }
    drop(tx);
    // Watchdog: the whole run must finish within the timeout (plus setup slack per call).
    let deadline = Instant::now() + opts.timeout;
    let mut out = CudaRun {
        world: layout.world,
        info,
        ..CudaRun::default()
    };
    let mut errors = Vec::new();
    let mut times = Vec::new();
    let mut ev_times = Vec::new();
    let mut enq_times = Vec::new();
    let mut op_runs: Vec<Vec<rank::OpTime>> = Vec::new();
    let mut done = 0;
    while done < layout.local.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        // A symm kernel that gave up on a peer ends the run at once (its rank would only go on
        // to time out in the next barriers): the watchdog polls the fault words.
        if let Some(fault) = symm::poll_faults() {
            let comms = shared.comms.lock().map(|c| c.clone()).unwrap_or_default();
            crash::abandon();
            for c in &comms {
                // SAFETY: as below, for the timeout.
                unsafe {
                    nccl::ncclCommAbort(c.0);
                }
            }
            std::mem::forget(lib);
            return Err(format!(
                "error: {fault}\nerror: aborted {} NCCL communicator(s)",
                comms.len()
            ));
        }
        match rx.recv_timeout(left.min(Duration::from_millis(20))) {
            Ok((rank, r)) => {
                done += 1;
                if rank == 0 {
                    if let Some(r) = &layout.rendezvous {
                        r.finish();
                    }
                }
                match r {
                    Ok((res, t, notes)) => {
                        out.results.push(res);
                        if let Some((wall, ev, enq)) = t.per_call {
                            times.push(wall);
                            ev_times.push(ev);
                            enq_times.push(enq);
                        }
                        if let Some(m) = t.memory {
                            if out.device_memory.is_none_or(|o| o.0 + o.1 < m.0 + m.1) {
                                out.device_memory = Some(m);
                            }
                        }
                        if let Some(p) = t.profile {
                            out.host_profile
                                .get_or_insert_with(Default::default)
                                .add(&p);
                        }
                        let w = out.work_per_call.get_or_insert([0; 2]);
                        if t.work.iter().sum::<u64>() > w.iter().sum::<u64>() {
                            *w = t.work;
                        }
                        out.op_times_by_rank.push((rank, t.ops.clone()));
                        op_runs.push(t.ops);
                        for n in notes {
                            if !out.notes.contains(&n) {
                                out.notes.push(n);
                            }
                        }
                    }
                    Err(e) => errors.push(format!("error: rank {rank}: {e}")),
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if !left.is_zero() => continue,
            Err(_) => {
                let comms = shared.comms.lock().map(|c| c.clone()).unwrap_or_default();
                crash::abandon();
                for c in &comms {
                    // SAFETY: aborting a live communicator from another thread is what
                    // ncclCommAbort is for; the rank threads are abandoned afterwards.
                    unsafe {
                        nccl::ncclCommAbort(c.0);
                    }
                }
                std::mem::forget(lib);
                // A rank that failed first leaves its peers waiting: say why it failed.
                errors.sort();
                let mut msg = errors.join("\n");
                if !msg.is_empty() {
                    msg.push('\n');
                }
                return Err(format!(
                    "{msg}error: the run did not finish within {} s (--timeout-s): aborted {} NCCL communicator(s); a rank is likely stuck in a collective its peers never joined",
                    opts.timeout.as_secs(),
                    comms.len()
                ));
            }
        }
    }
    // The threads are done with the host program: it may be unloaded now.
    drop(lib);
    if !errors.is_empty() {
        errors.sort();
        return Err(errors.join("\n"));
    }
    out.results.sort_by_key(|r| r.rank);
    out.op_times_by_rank.sort_by_key(|(r, _)| *r);
    out.seconds_per_call = times.into_iter().reduce(f64::max);
    if !ev_times.is_empty() {
        out.event_seconds_per_call = Some(ev_times.iter().sum::<f64>() / ev_times.len() as f64);
        out.enqueue_seconds_per_call = Some(enq_times.iter().sum::<f64>() / enq_times.len() as f64);
    }
    if opts.slots {
        out.slots_used = (shared.func.arg_slots.len(), shared.func.result_slots.len());
    }
    out.op_times = average_ops(&op_runs);
    Ok(out)
}

/// A fresh `ncclUniqueId` as bytes.
fn new_unique_id() -> Result<[u8; rdzv::ID_BYTES], String> {
    let mut id = nccl::ncclUniqueId {
        internal: [0; rdzv::ID_BYTES],
    };
    // SAFETY: writes one id.
    nccl_check(
        "ncclGetUniqueId",
        unsafe { nccl::ncclGetUniqueId(&mut id) },
        std::ptr::null_mut(),
    )?;
    Ok(id.internal.map(|c| c as u8))
}

/// A rank's timings.
#[derive(Debug, Default)]
struct RankTimes {
    /// (wall, events, enqueue) seconds per timed call: host wall time, GPU events around the
    /// loop, the loop's host enqueue time.
    per_call: Option<(f64, f64, f64)>,
    /// Per-op means.
    ops: Vec<rank::OpTime>,
    /// Work items of the checked call per stream ([`CudaRun::work_per_call`]).
    work: [u64; 2],
    /// The timed loop's host-time breakdown (`COMMLIR_HOST_PROFILE`).
    profile: Option<profile::HostProfile>,
    /// Device memory over the timed calls: (high-water mark of the stream-ordered allocator's
    /// pool, bytes held for the whole run: comm pools and arguments). None with graphs.
    memory: Option<(u64, u64)>,
}
type RankOutcome = (RankResults, RankTimes, Vec<String>);

/// Per-op means averaged over ranks (ops matched by position; ranks whose op lists differ in
/// length contribute to the common prefix).
fn average_ops(runs: &[Vec<rank::OpTime>]) -> Vec<rank::OpTime> {
    let Some(n) = runs.iter().map(Vec::len).min() else {
        return Vec::new();
    };
    (0..n)
        .map(|i| rank::OpTime {
            seconds: runs.iter().map(|r| r[i].seconds).sum::<f64>() / runs.len() as f64,
            start_seconds: runs
                .iter()
                .map(|r| r[i].start_seconds)
                .sum::<Option<f64>>()
                .map(|t| t / runs.len() as f64),
            ..runs[0][i].clone()
        })
        .collect()
}

/// The per-op table `commlir-run --bench-iters` prints: one line per op,
/// `op I: STREAM LABEL: T us[, algbw A GB/s, busbw B GB/s]` (nccl-tests' conventions, GB =
/// 1e9 bytes), then one summary line per collective kind.
pub fn format_op_times(ops: &[rank::OpTime]) -> String {
    let mut out = String::new();
    for (i, o) in ops.iter().enumerate() {
        let stream = if o.stream == abi::STREAM_COMM {
            "comm"
        } else {
            "compute"
        };
        out.push_str(&format!(
            "op {i}: {stream} {}: {:.3} us",
            o.label,
            o.seconds * 1e6
        ));
        if o.bus_factor > 0.0 && o.seconds > 0.0 {
            let alg = o.bytes as f64 / o.seconds / 1e9;
            out.push_str(&format!(
                ", algbw {alg:.1} GB/s, busbw {:.1} GB/s",
                alg * o.bus_factor
            ));
        }
        out.push('\n');
    }
    out
}

/// One rank, start to end; the state is torn down whatever happens.
fn rank_main(
    sh: &Shared,
    rank: usize,
    dev: i32,
    id: [u8; rdzv::ID_BYTES],
    world_comm: Option<CommHandle>,
) -> Result<RankOutcome, String> {
    let mut st = Box::new(RankState::new(rank, dev));
    // Owned by the state from here on, so teardown destroys it whatever happens.
    if let Some(CommHandle(c)) = world_comm {
        st.world = c;
    }
    let r = rank_body(sh, &mut st, id);
    let t = st.teardown();
    let (res, times) = r?;
    t?;
    Ok((res, times, std::mem::take(&mut st.notes)))
}

fn rank_body(
    sh: &Shared,
    st: &mut RankState,
    id: [u8; rdzv::ID_BYTES],
) -> Result<(RankResults, RankTimes), String> {
    let rank = st.rank;
    // SAFETY: every call below is on handles this function creates, on this thread, with
    // the rank's context current.
    unsafe {
        let mut dev = 0;
        cu_check("cuDeviceGet", cu::cuDeviceGet(&mut dev, st.device))?;
        // Before anything is enqueued: this thread issues all of the rank's GPU work.
        if let Some(n) = affinity::pin_to_device(dev) {
            st.notes.push(n);
        }
        st.ctx = ffi::primary_context(dev)?;
        for s in &mut st.streams {
            cu_check(
                "cuStreamCreate",
                cu::cuStreamCreate(s, cu::CUstream_flags::CU_STREAM_NON_BLOCKING as u32),
            )?;
        }
        for _ in 0..sh.art.manifest.num_events as usize + 2 {
            let mut e = std::ptr::null_mut();
            cu_check(
                "cuEventCreate",
                cu::cuEventCreate(&mut e, cu::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32),
            )?;
            st.events.push(e);
        }
        st.order = order::StreamOrder::new(st.events.len());
        rank::load_kernels(st, &sh.art.ptx, &sh.art.manifest.kernels)?;
        let cb = &mut st.cublas;
        ffi::cublas_check("cublasCreate", cudarc::cublas::sys::cublasCreate_v2(cb))?;
        ffi::cublas_check(
            "cublasSetStream",
            cudarc::cublas::sys::cublasSetStream_v2(st.cublas, st.streams[0] as _),
        )?;
        // NCCL: the world communicator, then one split per group (every rank takes part in
        // every split, in manifest order; non-members pass NCCL_SPLIT_NOCOLOR). A group that
        // is the whole world in rank order runs on the world communicator itself, as raw NCCL
        // would: a split duplicate is a second set of channels and buffers for the same ranks
        // (measured on 2 x H200: 1-1.5 µs more per call at 1-4 MiB). Sharing is
        // safe: every rank issues the program's collectives and the runner's barriers on it in
        // the same order, all from this thread.
        let uid = nccl::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        if st.world.is_null() {
            nccl_check(
                "ncclCommInitRank",
                nccl::ncclCommInitRank(&mut st.world, sh.world as i32, uid, rank as i32),
                std::ptr::null_mut(),
            )?;
        }
        register_comm(sh, st.world);
        for subs in &sh.groups {
            if is_whole_world(subs, sh.world) {
                st.comms.push(Some(st.world));
                continue;
            }
            let (color, key) = subs
                .iter()
                .enumerate()
                .find_map(|(i, m)| {
                    m.iter()
                        .position(|r| *r == rank)
                        .map(|p| (i as i32, p as i32))
                })
                .unwrap_or((-1, 0)); // NCCL_SPLIT_NOCOLOR
            let mut c = std::ptr::null_mut();
            nccl_check(
                "ncclCommSplit",
                nccl::ncclCommSplit(st.world, color, key, &mut c, std::ptr::null_mut()),
                st.world,
            )?;
            if c.is_null() {
                st.comms.push(None);
            } else {
                register_comm(sh, c);
                st.comms.push(Some(c));
            }
        }
        setup_symm(sh, st, &id);
        // Slots: allocate the function's pools ahead of the first call (they are persistent:
        // the program's `pool_alloc` gets the same buffers back), so arguments can be
        // uploaded straight into their slots and results taken from theirs.
        let mut bases: Vec<u64> = Vec::new();
        if sh.opts.slots && !sh.func.pools.is_empty() {
            for p in &sh.func.pools {
                let kind = if p.kind == "symm_mem" {
                    abi::POOL_SYMM_MEM
                } else {
                    abi::POOL_NCCL
                };
                let mut out: *mut c_void = std::ptr::null_mut();
                st.pool_alloc(kind, p.group, p.size, p.alignment, &mut out)?;
                bases.push(out as u64);
            }
            for &b in &bases {
                st.pool_free(b as *mut c_void)?;
            }
        }
        let slot_addr = |s: &artifact::SlotInfo| -> Result<u64, String> {
            bases
                .get(s.pool)
                .map(|b| b + s.offset)
                .ok_or_else(|| format!("slot names pool {} of {}", s.pool, bases.len()))
        };
        let mut want = vec![std::ptr::null_mut::<c_void>(); sh.result_types.len().max(1)];
        if !bases.is_empty() {
            for s in &sh.func.result_slots {
                if let Some(w) = want.get_mut(s.index) {
                    *w = slot_addr(s)? as *mut c_void;
                }
            }
        }
        // Arguments: from `--inputs`, else generated as the sim backend generates them.
        let mut args: Vec<*mut c_void> = Vec::with_capacity(sh.arg_types.len());
        let mut arg_ptrs = Vec::new();
        // With --cuda-graph the arguments are uploaded again before the checked replay.
        let mut uploads: Vec<(cu::CUdeviceptr, Vec<u8>)> = Vec::new();
        for (i, ty) in sh.arg_types.iter().enumerate() {
            // A replicated argument is the same tensor on every rank of its group.
            let source = match sh.func.arg_replicated.get(i).copied().flatten() {
                Some(g) => {
                    let subs = sh.groups.get(g).ok_or_else(|| {
                        format!("error: argument #{i} is replicated on group {g}, which the manifest does not list")
                    })?;
                    inputs::replicated_input_rank(subs, rank)
                }
                None => rank,
            };
            let given = sh
                .provided
                .get(&rank)
                .and_then(|p| p.get(i).cloned().flatten());
            let t = given.unwrap_or_else(|| inputs::generate(ty, sh.opts.seed, source, i));
            let bytes = tensor_bytes(&t);
            let mut p: cu::CUdeviceptr = 0;
            let in_slot = sh.func.arg_slots.iter().find(|s| s.index == i);
            match in_slot {
                Some(s) if !bases.is_empty() && s.bytes as usize == bytes.len() => {
                    p = slot_addr(s)?;
                }
                _ => {
                    cu_check("cuMemAlloc", cu::cuMemAlloc_v2(&mut p, bytes.len().max(1)))?;
                    arg_ptrs.push(p);
                    st.arg_bytes += bytes.len().max(1) as u64;
                }
            }
            cu_check(
                "cuMemcpyHtoD",
                cu::cuMemcpyHtoD_v2(p, bytes.as_ptr() as *const c_void, bytes.len()),
            )?;
            args.push(p as *mut c_void);
            if sh.opts.cuda_graph {
                uploads.push((p, bytes));
            }
        }
        // The uploads are synchronous copies on the legacy stream, which the two
        // non-blocking streams do not wait for: finish them here, once, so that the calls'
        // stream bookkeeping (`order.rs`) may start from "nothing outstanding".
        cu_check("cuCtxSynchronize", cu::cuCtxSynchronize())?;
        let r = run_calls(sh, st, &args, &want, &uploads);
        for p in arg_ptrs {
            let _ = st.synchronize();
            cu::cuMemFree_v2(p);
        }
        r
    }
}

/// Whether a group's member lists are the single list of every rank in rank order: its
/// collectives can run on the world communicator itself (same ranks, same rank numbers).
fn is_whole_world(subs: &[Vec<usize>], world: usize) -> bool {
    match subs {
        [members] => members.len() == world && members.iter().enumerate().all(|(i, &r)| i == r),
        _ => false,
    }
}

/// How this rank maps symm_mem pools of its groups (`symm.rs`): the exchange (in-process
/// board or Unix sockets keyed by the job's NCCL id), its membership per group, the barrier
/// timeout (half the run's, so that a stuck barrier is reported before the watchdog aborts),
/// and the injected fault `COMMLIR_FAULT_SKIP_SYMM=RANK` (that rank skips its first symm
/// kernel, as a rank that never arrives would).
fn setup_symm(sh: &Shared, st: &mut RankState, id: &[u8; rdzv::ID_BYTES]) {
    // FNV-1a of the NCCL id: the same on every rank of the job, different across jobs.
    let job = id.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let kernels = Arc::new(st.kernel_names.clone());
    let s = &mut st.symm;
    s.kernel_names = kernels;
    s.enabled = symm::peer_map_enabled();
    s.exchange = Some(if sh.in_process_devices.is_empty() {
        symm::Exchange::Sockets { job }
    } else {
        symm::Exchange::InProcess {
            job,
            devices: sh.in_process_devices.clone(),
        }
    });
    s.groups = sh
        .groups
        .iter()
        .map(|subs| {
            subs.iter().find_map(|m| {
                m.iter()
                    .position(|&r| r == st.rank)
                    .map(|me| symm::Membership {
                        members: m.clone(),
                        me,
                    })
            })
        })
        .collect();
    s.group_names = sh
        .art
        .manifest
        .groups
        .iter()
        .map(|g| g.name.clone())
        .collect();
    s.timeout = (sh.opts.timeout / 2).max(Duration::from_secs(1));
    s.rank = st.rank;
    s.skip_next = std::env::var("COMMLIR_FAULT_SKIP_SYMM")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        == Some(st.rank);
}

fn register_comm(sh: &Shared, c: nccl::ncclComm_t) {
    if let Ok(mut v) = sh.comms.lock() {
        v.push(CommHandle(c));
    }
}

/// One checked call (results downloaded), then the warm-up and timed calls. With
/// `--cuda-graph` the first call is not downloaded: after the warm-up calls one call is
/// captured as a CUDA graph and replayed once on freshly uploaded arguments, and the results
/// come from that replay; the timed calls are graph replays.
///
/// # Safety
/// The rank's context is current; `args` are device buffers of the argument types; `uploads`
/// are the arguments' buffers and bytes (with `--cuda-graph`).
/// The start of the runner's single-process modes (`--nccl-baseline`, `--calibrate`, named by
/// `what`): the driver and libraries present, NVLink multicast off unless asked for, one
/// process with a thread per GPU, `cuInit` done. Returns the layout of the ranks.
pub(crate) fn single_process_layout(ranks: usize, what: &str) -> Result<Layout, String> {
    if !ffi::driver_present() {
        return Err(NO_DRIVER.into());
    }
    ffi::libraries_present().map_err(|e| format!("error: {e}"))?;
    if std::env::var_os("NCCL_NVLS_ENABLE").is_none() {
        std::env::set_var("NCCL_NVLS_ENABLE", "0");
    }
    let layout = Layout::from_env(ranks).map_err(|e| format!("error: {e}"))?;
    if layout.rendezvous.is_some() || layout.local.len() != layout.world {
        return Err(format!(
            "error: {what} runs one process with a thread per GPU (unset WORLD_SIZE)"
        ));
    }
    // SAFETY: cuInit takes flags 0.
    cu_check("cuInit", unsafe { cu::cuInit(0) }).map_err(|e| format!("error: {e}"))?;
    Ok(layout)
}

/// The device's current memory pool (the one `cuMemAllocAsync` takes from), with its
/// used-memory high-water mark reset to what is in use now.
unsafe fn mempool_high_reset(device: i32) -> Result<cu::CUmemoryPool, String> {
    let mut d: cu::CUdevice = 0;
    cu_check("cuDeviceGet", cu::cuDeviceGet(&mut d, device))?;
    let mut pool: cu::CUmemoryPool = std::ptr::null_mut();
    cu_check("cuDeviceGetMemPool", cu::cuDeviceGetMemPool(&mut pool, d))?;
    // Only 0 may be written: it resets the mark to the current use.
    let mut zero: u64 = 0;
    cu_check(
        "cuMemPoolSetAttribute",
        cu::cuMemPoolSetAttribute(
            pool,
            cu::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
            (&mut zero as *mut u64).cast(),
        ),
    )?;
    Ok(pool)
}

/// The pool's used-memory high-water mark since [`mempool_high_reset`], bytes.
unsafe fn mempool_high(pool: cu::CUmemoryPool) -> Result<u64, String> {
    let mut v: u64 = 0;
    cu_check(
        "cuMemPoolGetAttribute",
        cu::cuMemPoolGetAttribute(
            pool,
            cu::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
            (&mut v as *mut u64).cast(),
        ),
    )?;
    Ok(v)
}

unsafe fn run_calls(
    sh: &Shared,
    st: &mut RankState,
    args: &[*mut c_void],
    want: &[*mut c_void],
    uploads: &[(cu::CUdeviceptr, Vec<u8>)],
) -> Result<(RankResults, RankTimes), String> {
    // One join per call, before it: the previous call's work on both streams is ordered
    // before this call's (the program itself ends with compute waiting for comm). Only the
    // directions not already ordered are issued (`RankState::join_streams`), and the
    // program's own records and waits go through the same bookkeeping (`order.rs`); nothing
    // in a call synchronizes with the host (the loop below synchronizes once, at its end).
    let mut caller = Caller {
        sh,
        args,
        want,
        slots: want.to_vec(),
        ptrs: Vec::with_capacity(want.len()),
    };
    let graph_mode = sh.opts.cuda_graph;
    let before = st.work_items;
    let ptrs = caller.call(st)?.to_vec();
    let work = [st.work_items[0] - before[0], st.work_items[1] - before[1]];
    st.synchronize()?;
    let mut results = if graph_mode {
        Vec::new()
    } else {
        download(sh, &ptrs)?
    };
    for p in ptrs {
        st.release_result(p)?;
    }
    if sh.opts.bench_iters > 0 {
        for _ in 0..sh.opts.warmup {
            caller.call_and_release(st)?;
        }
        st.synchronize()?;
    }
    let mut replay = None;
    if graph_mode {
        let fork = [st.timing_event()?, st.timing_event()?];
        let r = graph_calls(sh, st, fork, &mut caller, uploads);
        st.recycle_events(&fork);
        let (res, g) = r?;
        results = res;
        replay = g;
    }
    let mut times = RankTimes {
        work,
        ..RankTimes::default()
    };
    if sh.opts.bench_iters > 0 {
        if let Some(g) = &replay {
            // One untimed replay of the graph the loop launches (uploads it to the device and
            // warms NCCL's graph resources; the same on every rank, like the warm-up calls).
            st.flush_waits(abi::STREAM_COMPUTE)?;
            g.launch(st.streams[0])?;
            st.synchronize()?;
        }
        // Line the ranks up: threads by a barrier, processes by a one-element all-reduce.
        sh.barrier.wait();
        barrier_allreduce(st)?;
        let (e0, e1) = (st.timing_event()?, st.timing_event()?);
        // (Nothing is pending after the barrier's synchronization; flushing keeps the start
        // event after everything compute was ordered after, whatever came before.)
        st.flush_waits(abi::STREAM_COMPUTE)?;
        cu_check("cuEventRecord", cu::cuEventRecord(e0, st.streams[0]))?;
        let t0;
        let enqueued;
        // Host-time breakdown of the loop, when asked for (`profile.rs`); off, each library
        // call in it costs one branch more.
        st.prof.start(profile::requested());
        if let Some(g) = &replay {
            // Graph replays: all on the compute stream, each ordered whole after the previous
            // one (the comm stream's captured work is inside the graph).
            let s = st.streams[0];
            t0 = Instant::now();
            for _ in 0..sh.opts.bench_iters {
                st.prof.cuda(Driver::Launch, || g.launch(s))?;
            }
            enqueued = t0.elapsed();
            times.profile = st.prof.stop(sh.opts.bench_iters, enqueued);
        } else {
            // The first call's comm work may no longer wait for the compute stream (nothing
            // on it to wait for): order it after the start event explicitly, once, so the
            // timed interval still contains all of the loop's work. (An extra edge the
            // bookkeeping does not know about only makes it conservative.)
            cu_check(
                "cuStreamWaitEvent",
                cu::cuStreamWaitEvent(st.streams[1], e0, 0),
            )?;
            let pool = mempool_high_reset(st.device)?;
            t0 = Instant::now();
            for _ in 0..sh.opts.bench_iters {
                caller.call_and_release(st)?;
            }
            enqueued = t0.elapsed();
            times.profile = st.prof.stop(sh.opts.bench_iters, enqueued);
            st.join_streams()?;
            st.synchronize()?;
            times.memory = Some((mempool_high(pool)?, st.pool_bytes() + st.arg_bytes));
        }
        // Compute's wait for the loop's collectives is still deferred (`order.rs`, *Lazy
        // waits*): issue it before the end event, so that the timed interval contains all
        // of the loop's work on both streams.
        st.flush_waits(abi::STREAM_COMPUTE)?;
        cu_check("cuEventRecord", cu::cuEventRecord(e1, st.streams[0]))?;
        st.synchronize()?;
        // Calls per timed iteration: a replay holds `graph_calls` calls.
        let per_iter = if replay.is_some() {
            sh.opts.graph_calls.max(1)
        } else {
            1
        };
        let calls = (sh.opts.bench_iters * per_iter) as f64;
        let wall = t0.elapsed().as_secs_f64() / calls;
        let mut ms = 0f32;
        cu_check(
            "cuEventElapsedTime",
            cu::cuEventElapsedTime_v2(&mut ms, e0, e1),
        )?;
        st.recycle_events(&[e0, e1]);
        drop(replay.take());
        times.per_call = Some((
            wall,
            f64::from(ms) * 1e-3 / calls,
            enqueued.as_secs_f64() / calls,
        ));
        // Per-op pass: events around every op, each call alone (ranks lined up by an NCCL
        // barrier, streams synchronized after it), so that no op's time includes another
        // call's work; the end-to-end time above is measured without these events. (Always
        // ordinary calls, also with --cuda-graph.)
        st.time_ops = true;
        for _ in 0..sh.opts.bench_iters {
            barrier_allreduce(st)?;
            // Both streams are idle after the barrier: the call's start, for the op offsets.
            st.begin_timed_call()?;
            caller.call_and_release(st)?;
            st.synchronize()?;
            st.collect_op_times()?;
        }
        st.time_ops = false;
    }
    times.ops = st.op_times();
    Ok((
        RankResults {
            rank: st.rank,
            results,
        },
        times,
    ))
}

/// Calls of the program as the runner makes them, with buffers reused across calls (no
/// allocation per call): the result array the program fills, reset to the wanted placement
/// (slots, else null) before each call, and the result pointers it returned.
struct Caller<'a> {
    sh: &'a Shared,
    args: &'a [*mut c_void],
    want: &'a [*mut c_void],
    slots: Vec<*mut c_void>,
    ptrs: Vec<u64>,
}

impl Caller<'_> {
    /// One call: the streams joined with the previous call's work (only the directions not
    /// already ordered, `RankState::join_streams`), then `commlir_main`; the result pointers,
    /// valid until the next call. Nothing in it synchronizes with the host.
    ///
    /// # Safety
    /// The rank's context is current; `args` are device buffers of the argument types.
    unsafe fn call(&mut self, st: &mut RankState) -> Result<&[u64], String> {
        self.slots.copy_from_slice(self.want);
        st.join_streams()?;
        let stp = st as *mut RankState as *mut c_void;
        let status =
            (self.sh.main_fn)(&rank::API, stp, self.args.as_ptr(), self.slots.as_mut_ptr());
        if status != 0 {
            let why = st
                .last_error
                .take()
                .unwrap_or_else(|| "no runtime error recorded (ABI version mismatch?)".into());
            return Err(format!("commlir_main returned status {status}: {why}"));
        }
        self.ptrs.clear();
        let n = self.sh.result_types.len();
        self.ptrs
            .extend(self.slots.iter().take(n).map(|p| *p as u64));
        Ok(&self.ptrs)
    }

    /// One call whose results are freed at once (the warm-up, timed and per-op calls).
    ///
    /// # Safety
    /// As [`Caller::call`].
    unsafe fn call_and_release(&mut self, st: &mut RankState) -> Result<(), String> {
        self.call(st)?;
        for &p in &self.ptrs {
            st.release_result(p)?;
        }
        Ok(())
    }
}

/// Downloads the results at `ptrs` (the streams are synchronized).
///
/// # Safety
/// The rank's context is current; `ptrs` are device buffers of the result types.
unsafe fn download(sh: &Shared, ptrs: &[u64]) -> Result<Vec<Tensor>, String> {
    let mut results = Vec::with_capacity(ptrs.len());
    for (p, ty) in ptrs.iter().zip(&sh.result_types) {
        let mut host = vec![0u8; ty.numel() * ty.elem.byte_width()];
        if !host.is_empty() {
            cu_check(
                "cuMemcpyDtoH",
                cu::cuMemcpyDtoH_v2(host.as_mut_ptr() as *mut c_void, *p, host.len()),
            )?;
        }
        results.push(tensor_from_bytes(ty, &host));
    }
    Ok(results)
}

/// `--cuda-graph`: uploads the arguments again (a call may have written into an argument's
/// slot), captures one call, replays it once and downloads its results. Returns them and,
/// with `--bench-iters`, the graph the timed loop replays: the same one when the call leaves
/// no stream-ordered allocation behind (slotted results, the usual single-collective case),
/// else a second capture of the call followed by the frees of its results (a graph whose
/// allocations are not freed inside it cannot be launched again, and the ordinary timed
/// loop frees the results after each call as well).
///
/// # Safety
/// The rank's context is current; `fork` are two events of it; `uploads` are device buffers
/// and their contents.
unsafe fn graph_calls(
    sh: &Shared,
    st: &mut RankState,
    fork: [cu::CUevent; 2],
    caller: &mut Caller,
    uploads: &[(cu::CUdeviceptr, Vec<u8>)],
) -> Result<(Vec<Tensor>, Option<graph::CallGraph>), String> {
    st.synchronize()?;
    for (p, bytes) in uploads {
        cu_check(
            "cuMemcpyHtoD",
            cu::cuMemcpyHtoD_v2(*p, bytes.as_ptr() as *const c_void, bytes.len()),
        )?;
    }
    cu_check("cuCtxSynchronize", cu::cuCtxSynchronize())?;
    let before = st.live_allocs();
    let (checked, ptrs) = graph::capture(st, fork, |s| caller.call(s).map(<[u64]>::to_vec))?;
    // Allocations made inside the captured call and not freed in it: graph allocations, whose
    // addresses are fixed, valid after the replay until freed (outside the graph, below).
    let fresh: Vec<u64> = st.live_allocs().difference(&before).copied().collect();
    st.flush_waits(abi::STREAM_COMPUTE)?;
    checked.launch(st.streams[0])?;
    st.synchronize()
        .map_err(|e| format!("{}: the checked replay failed: {e}", graph::ERR))?;
    let results = download(sh, &ptrs)?;
    for p in &fresh {
        st.release_result(*p)?;
    }
    st.synchronize()?;
    if sh.opts.bench_iters == 0 {
        return Ok((results, None));
    }
    if fresh.is_empty() && sh.opts.graph_calls <= 1 {
        return Ok((results, Some(checked)));
    }
    drop(checked);
    let before = st.live_allocs();
    let (timed, ()) = graph::capture(st, fork, |s| {
        for _ in 0..sh.opts.graph_calls.max(1) {
            caller.call(s)?;
            let fresh: Vec<u64> = s.live_allocs().difference(&before).copied().collect();
            for p in fresh {
                s.release_result(p)?;
            }
        }
        Ok(())
    })?;
    Ok((results, Some(timed)))
}

/// A one-element all-reduce on the world communicator, waited for: every rank of the job
/// leaves it after every rank entered it.
///
/// # Safety
/// The rank's context is current.
unsafe fn barrier_allreduce(st: &mut RankState) -> Result<(), String> {
    let mut p: cu::CUdeviceptr = 0;
    cu_check("cuMemAlloc", cu::cuMemAlloc_v2(&mut p, 4))?;
    let r = nccl::ncclAllReduce(
        p as *const c_void,
        p as *mut c_void,
        1,
        nccl::ncclDataType_t::ncclFloat32,
        nccl::ncclRedOp_t::ncclSum,
        st.world,
        st.streams[1] as nccl::cudaStream_t,
    );
    st.order.work(1);
    let r = nccl_check("ncclAllReduce (barrier)", r, st.world).and_then(|_| st.synchronize());
    cu::cuMemFree_v2(p);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_world_in_rank_order_shares_the_world_communicator() {
        assert!(is_whole_world(&[vec![0, 1]], 2));
        assert!(is_whole_world(&[vec![0, 1, 2, 3]], 4));
        // Another rank order needs its own communicator (NCCL ranks are the split keys).
        assert!(!is_whole_world(&[vec![1, 0]], 2));
        // A subset, or several subgroups (color per subgroup), need a split.
        assert!(!is_whole_world(&[vec![0, 1]], 4));
        assert!(!is_whole_world(&[vec![0, 1], vec![2, 3]], 4));
        assert!(!is_whole_world(&[], 2));
    }

    #[test]
    fn bytes_round_trip_in_every_element_type() {
        for elem in [
            ElemType::BF16,
            ElemType::F16,
            ElemType::F32,
            ElemType::F64,
            ElemType::Int {
                width: 8,
                signedness: commlir_ir::Signedness::Signless,
            },
            ElemType::Int {
                width: 32,
                signedness: commlir_ir::Signedness::Unsigned,
            },
            ElemType::Int {
                width: 1,
                signedness: commlir_ir::Signedness::Signless,
            },
            ElemType::Int {
                width: 1,
                signedness: commlir_ir::Signedness::Unsigned,
            },
        ] {
            let ty = TensorType {
                elem,
                shape: vec![3, 5],
            };
            let t = inputs::generate(&ty, 1, 2, 3);
            let b = tensor_bytes(&t);
            assert_eq!(b.len(), 15 * elem.byte_width());
            assert_eq!(tensor_from_bytes(&ty, &b), t, "{elem}");
        }
    }

    #[test]
    fn i1_travels_as_bytes_0_and_1_and_compares_exactly() {
        for signedness in [
            commlir_ir::Signedness::Signless,
            commlir_ir::Signedness::Signed,
            commlir_ir::Signedness::Unsigned,
        ] {
            let ty = TensorType {
                elem: ElemType::Int {
                    width: 1,
                    signedness,
                },
                shape: vec![2, 3],
            };
            // True is 1, not -1 (0xff), for every spelling.
            let t = Tensor::from_f64(ty.clone(), &[1.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
            assert_eq!(t.data, Data::Int(vec![1, 0, 1, 1, 0, 0]));
            let b = tensor_bytes(&t);
            assert_eq!(b, vec![1, 0, 1, 1, 0, 0], "{}", ty.elem);
            let back = tensor_from_bytes(&ty, &b);
            assert_eq!(back, t);
            let one = |x: Tensor| {
                vec![crate::output::RankResults {
                    rank: 0,
                    results: vec![x],
                }]
            };
            assert!(check::compare(&one(back.clone()), &one(t.clone())).passed());
            // One flipped element is a mismatch (integers compare exactly).
            let mut flipped = b.clone();
            flipped[4] = 1;
            let r = check::compare(&one(tensor_from_bytes(&ty, &flipped)), &one(t.clone()));
            assert_eq!((r.compared, r.mismatched), (6, 1));
            assert!(
                r.problems[0].contains("element 4: GPU 1, sim 0"),
                "{:?}",
                r.problems
            );
            // A byte that is neither 0 nor 1 is kept, not masked to its low bit: 2 would read
            // as 0 (false) and pass; kept, it fails.
            let mut bad = b.clone();
            bad[1] = 2;
            let got = tensor_from_bytes(&ty, &bad);
            assert_eq!(got.data, Data::Int(vec![1, 2, 1, 1, 0, 0]));
            assert!(!check::compare(&one(got), &one(t)).passed());
        }
    }

    #[test]
    fn layout_without_environment_is_threads() {
        if std::env::var_os("WORLD_SIZE").is_none() {
            let l = Layout::from_env(3).unwrap();
            assert_eq!(l.world, 3);
            assert_eq!(l.local, vec![(0, 0), (1, 1), (2, 2)]);
        }
    }
}
