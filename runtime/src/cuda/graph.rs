//! CUDA-graph replay of whole calls (`commlir-run --cuda-graph`).
//!
//! One call of the program is captured on the rank's compute stream (thread-local stream
//! capture, so a non-capturable driver call made by this thread fails the capture instead of
//! slipping through; other rank threads are not affected). The comm stream is forked into the
//! capture by an event recorded on the compute stream and waited on by the comm stream, and
//! joined back at the end by an event recorded on the comm stream and waited on by the compute
//! stream, so that both streams' work is in the graph and the graph's end orders all of it. The
//! graph is instantiated once (`cuGraphInstantiateWithFlags`) and replayed with
//! `cuGraphLaunch` on the compute stream; consecutive replays on one stream are ordered whole,
//! so no join between calls is needed.
//!
//! What a captured call may do (docs/runtime.md, *CUDA-graph replay*): enqueue kernels, GEMMs,
//! NCCL calls (NCCL >= 2.9 supports capture), event records and waits, and stream-ordered
//! allocations (`cuMemAllocAsync`/`cuMemFreeAsync` become graph memory nodes with a fixed
//! address). It may not allocate a new comm pool (`ncclMemAlloc`/`cuMemAlloc`: the pools are
//! allocated by the calls before the capture and reused from the pool cache), synchronize with
//! the host or read results: the runtime refuses the first while [`RankState::capturing`] is
//! set, the driver refuses the others (`CUDA_ERROR_STREAM_CAPTURE_*`), and either ends the
//! capture with an error that starts with `--cuda-graph:`.

use super::abi;
use super::ffi::cu_check;
use super::order::StreamOrder;
use super::rank::RankState;
use cudarc::driver::sys as cu;

/// The prefix of every error of the graph path.
pub const ERR: &str = "--cuda-graph";

/// An instantiated graph of one call (destroyed on drop; the rank's context must be current
/// on the dropping thread, which is the rank thread).
pub struct CallGraph {
    graph: cu::CUgraph,
    exec: cu::CUgraphExec,
}

impl CallGraph {
    /// Enqueues one replay on `stream`.
    ///
    /// # Safety
    /// The rank's context is current; `stream` is one of its streams.
    pub unsafe fn launch(&self, stream: cu::CUstream) -> Result<(), String> {
        cu_check("cuGraphLaunch", cu::cuGraphLaunch(self.exec, stream))
            .map_err(|e| format!("{ERR}: {e}"))
    }
}

impl Drop for CallGraph {
    fn drop(&mut self) {
        // SAFETY: both handles were created once by `capture` and are destroyed once here; an
        // executable graph still in flight is freed by the driver when it completes.
        unsafe {
            if !self.exec.is_null() {
                cu::cuGraphExecDestroy(self.exec);
            }
            if !self.graph.is_null() {
                cu::cuGraphDestroy(self.graph);
            }
        }
    }
}

/// Whether `s` is capturing (or its capture was invalidated and not yet ended).
///
/// # Safety
/// The rank's context is current; `s` is a live stream.
unsafe fn capture_active(s: cu::CUstream) -> Result<bool, String> {
    let mut status = cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    cu_check(
        "cuStreamIsCapturing",
        cu::cuStreamIsCapturing(s, &mut status),
    )?;
    Ok(status != cu::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// A hint for the driver's capture errors.
fn explain(e: String) -> String {
    if e.contains("CUDA_ERROR_STREAM_CAPTURE") || e.contains("CUDA_ERROR_NOT_PERMITTED") {
        format!(
            "{e}: something in the call is not capturable (a host synchronization, a plain cuMemAlloc, a copy to the host, or work on a stream outside the capture)"
        )
    } else {
        e
    }
}

/// Captures what `body` enqueues on the rank's two streams as one graph and instantiates it.
/// `fork` are two events of the rank's context (not the program's) used for the fork and the
/// join. Both streams must be idle: the function synchronizes them first, and starts the
/// stream-order bookkeeping afresh before and after the capture (during it, the bookkeeping
/// describes the graph's own ordering: a replay starts with nothing outstanding, since the
/// previous replay on the compute stream has completed whole; after it, the streams are still
/// idle, since capture enqueues nothing).
///
/// On any failure the capture is ended (the stream is never left capturing), the partial
/// graph destroyed and an error starting with `--cuda-graph:` returned.
///
/// # Safety
/// The rank's context is current on this thread.
pub unsafe fn capture<T>(
    st: &mut RankState,
    fork: [cu::CUevent; 2],
    body: impl FnOnce(&mut RankState) -> Result<T, String>,
) -> Result<(CallGraph, T), String> {
    let [compute, comm] = st.streams;
    st.synchronize().map_err(|e| format!("{ERR}: {e}"))?;
    for s in [compute, comm] {
        if capture_active(s).map_err(|e| format!("{ERR}: {e}"))? {
            return Err(format!(
                "{ERR}: a stream of rank {} is already capturing",
                st.rank
            ));
        }
    }
    let events = st.events.len();
    st.order = StreamOrder::new(events);
    cu_check(
        "cuStreamBeginCapture",
        cu::cuStreamBeginCapture_v2(
            compute,
            cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        ),
    )
    .map_err(|e| format!("{ERR}: {e}"))?;
    st.capturing = true;
    // Fork the comm stream into the capture.
    let mut r =
        cu_check("cuEventRecord (fork)", cu::cuEventRecord(fork[0], compute)).and_then(|_| {
            cu_check(
                "cuStreamWaitEvent (fork)",
                cu::cuStreamWaitEvent(comm, fork[0], 0),
            )
        });
    let mut out = None;
    if r.is_ok() {
        match body(st) {
            Ok(v) => out = Some(v),
            Err(e) => r = Err(e),
        }
    }
    // Join the comm stream back (also on the error path, best effort, so that ending the
    // capture does not fail for an unjoined stream and leave it capturing). Deferred waits
    // (`order.rs`, *Lazy waits*) are issued into the capture first: the bookkeeping is reset
    // below, so nothing may stay pending across the capture's end.
    let flushed = st
        .flush_waits(abi::STREAM_COMPUTE)
        .and_then(|_| st.flush_waits(abi::STREAM_COMM));
    if r.is_ok() {
        r = flushed;
    }
    let joined =
        cu_check("cuEventRecord (join)", cu::cuEventRecord(fork[1], comm)).and_then(|_| {
            cu_check(
                "cuStreamWaitEvent (join)",
                cu::cuStreamWaitEvent(compute, fork[1], 0),
            )
        });
    if r.is_ok() {
        r = joined;
    }
    let mut graph: cu::CUgraph = std::ptr::null_mut();
    let ended = cu_check(
        "cuStreamEndCapture",
        cu::cuStreamEndCapture(compute, &mut graph),
    );
    st.capturing = false;
    st.order = StreamOrder::new(events);
    let mut g = CallGraph {
        graph,
        exec: std::ptr::null_mut(),
    };
    if let Err(e) = r {
        return Err(format!(
            "{ERR}: capturing one call failed on rank {}: {}",
            st.rank,
            explain(e)
        ));
    }
    ended.map_err(|e| {
        format!(
            "{ERR}: capturing one call failed on rank {}: {}",
            st.rank,
            explain(e)
        )
    })?;
    for s in [compute, comm] {
        if capture_active(s).map_err(|e| format!("{ERR}: {e}"))? {
            return Err(format!(
                "{ERR}: a stream of rank {} is still capturing after the capture ended",
                st.rank
            ));
        }
    }
    if g.graph.is_null() {
        return Err(format!(
            "{ERR}: the capture on rank {} produced no graph (invalidated)",
            st.rank
        ));
    }
    cu_check(
        "cuGraphInstantiate",
        cu::cuGraphInstantiateWithFlags(&mut g.exec, g.graph, 0),
    )
    .map_err(|e| format!("{ERR}: {e}"))?;
    let out =
        out.ok_or_else(|| format!("{ERR}: internal error: the captured call returned nothing"))?;
    Ok((g, out))
}
