//! Peer-mapped symmetric memory: `symm_mem` pools that every rank of the group can load from
//! and store to directly over NVLink, each with a signal pad for the barriers of the
//! compiler-generated collective kernels (docs/runtime.md, *Symmetric memory*).
//!
//! A pool is one CUDA virtual-memory allocation (`cuMemCreate`, exportable as a POSIX file
//! descriptor) holding the pool's bytes, then the signal pad
//! (`u32[SYMM_MAX_BLOCKS][SYMM_MAX_PEERS]`), the control words and the LL area of the
//! low-latency one-shot all-reduce (`symm_pad_bytes`), all zeroed before any peer can
//! signal. Every rank of
//! the group maps every peer's allocation:
//! - ranks that are threads of one process share one address space: the owner grants the
//!   group's devices access to its mapping (`cuMemSetAccess`) and publishes the address on an
//!   in-process board;
//! - one process per GPU: each rank exports its allocation as a file descriptor and sends it to
//!   every peer over an abstract Unix socket (`SCM_RIGHTS`); the peer imports it
//!   (`cuMemImportFromShareableHandle`) and maps it into its own address space.
//!
//! VMM export/import was chosen over CUDA IPC (`cuIpcGetMemHandle` does not accept VMM memory,
//! and plain `cuMemAlloc` memory cannot be NCCL-registered as cheaply) and over NCCL 2.28's
//! symmetric windows (their peer pointers are only available in device code through NCCL's
//! C++ device API, which generated PTX cannot call). The same allocation is also
//! `ncclCommRegister`ed, so NCCL collectives on a symm_mem pool stay zero-copy. Multicast
//! objects are never created.
//!
//! Mapping is all or nothing per pool: after the exchange the group votes (an NCCL min
//! all-reduce of one flag), and if any rank failed (no P2P between the devices, no VMM
//! export) every rank unmaps and the pool takes the NCCL path with a `note:`. The kernels
//! find the peers through a device-resident descriptor (`commlir_symm_desc` of
//! `codegen/include/commlir_rt.h`) that `symm_pool_desc` returns.
//!
//! Faults: a barrier that waits longer than the descriptor's timeout makes the kernel write a
//! code into this rank's host-mapped fault word of the pool and leave; `check_faults` turns
//! it into an error naming the kernel (hence the op) and the pool.

use super::abi::{symm_pad_bytes, SymmDesc, SYMM_MAX_PEERS};
use super::ffi::{cu_check, nccl_check};
use cudarc::driver::sys as cu;
use cudarc::nccl::sys as nccl;
use std::collections::HashMap;
use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Whether symm_mem pools are peer-mapped (`--symm-kernels`, process-wide).
static PEER_MAP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Turns peer mapping of symm_mem pools (and so commlir's symm kernels) on (the default) or
/// off (symm ops run as NCCL collectives, on pools registered per `--symm-windows`).
pub fn set_peer_map(on: bool) {
    PEER_MAP.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// See [`set_peer_map`].
pub fn peer_map_enabled() -> bool {
    PEER_MAP.load(std::sync::atomic::Ordering::Relaxed)
}

/// Fault words per rank (one per symm pool, by creation order modulo this).
const FAULT_WORDS: usize = 256;

/// Whether a kernel of the artifact's table is a symm kernel (`s<N>_<what>`, as the code
/// generator names every kernel that takes a symm descriptor: the collectives, their fused
/// epilogues and the fused matmul pipelines' data movement; other kernels are `k<N>_…`).
pub fn is_symm_kernel(name: &str) -> bool {
    name.strip_prefix('s')
        .and_then(|r| r.split_once('_'))
        .is_some_and(|(n, what)| {
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !what.is_empty()
        })
}

/// How a fault word reads: `0x8000_0000 | peer << 24 | site`.
pub fn decode_fault(word: u32) -> Option<(u32, u32)> {
    (word & 0x8000_0000 != 0).then_some(((word >> 24) & 0x7f, word & 0x00ff_ffff))
}

/// How peers learn each other's allocations.
#[derive(Clone, Debug)]
pub enum Exchange {
    /// Ranks are threads of this process: `devices[global rank]` is its device.
    InProcess { job: u64, devices: Vec<i32> },
    /// One process per GPU on this host: abstract Unix sockets named after the job.
    Sockets { job: u64 },
}

/// A group as this rank sees it: members (global ranks, in group-rank order) and its index.
#[derive(Clone, Debug)]
pub struct Membership {
    pub members: Vec<usize>,
    pub me: usize,
}

/// One peer-mapped pool.
#[derive(Debug)]
pub struct SymmPool {
    /// Bytes of the mapping (pool bytes, padded, plus the signal pad, rounded to granularity).
    map_bytes: usize,
    /// Offset of the signal pad in every mapping.
    pad_offset: usize,
    /// This rank's allocation and mapping.
    handle: cu::CUmemGenericAllocationHandle,
    pub base: u64,
    /// Peers' mappings in this process (sockets mode): (address, imported handle).
    imported: Vec<(u64, cu::CUmemGenericAllocationHandle)>,
    /// The descriptor in device memory.
    pub desc: u64,
    /// Every group rank's pool base as mapped in this process (the descriptor's `base`, on
    /// the host: where `symm_peer_copy` reads).
    pub peers: Vec<u64>,
    pub fault_word: usize,
    pub group: u32,
    pub bytes: u64,
}

/// Per rank: how to exchange, the groups, the fault words and the peer-mapped pools.
pub struct SymmState {
    pub enabled: bool,
    pub exchange: Option<Exchange>,
    /// Per manifest group: this rank's membership, when it is a member.
    pub groups: Vec<Option<Membership>>,
    /// Group names, for messages.
    pub group_names: Vec<String>,
    pub timeout: Duration,
    /// Host-mapped fault words (host pointer, device pointer).
    faults: Option<(*mut u32, u64)>,
    /// Symm pools created per group (the exchange's sequence number).
    seq: HashMap<u32, u64>,
    pub pools: HashMap<u64, SymmPool>,
    listener: Option<UnixListener>,
    /// Descriptors received ahead of their pool: (group, seq, from group rank) → fd or none.
    stash: HashMap<(u32, u64, usize), Option<OwnedFd>>,
    /// A one-time injected fault: the next symm kernel launch is skipped.
    pub skip_next: bool,
    /// The artifact's kernel names (fault messages name the kernel).
    pub kernel_names: std::sync::Arc<Vec<String>>,
    /// This rank (global), for messages.
    pub rank: usize,
}

impl Default for SymmState {
    fn default() -> Self {
        SymmState {
            enabled: true,
            exchange: None,
            groups: Vec::new(),
            group_names: Vec::new(),
            timeout: Duration::from_secs(30),
            faults: None,
            seq: HashMap::new(),
            pools: HashMap::new(),
            listener: None,
            stash: HashMap::new(),
            skip_next: false,
            kernel_names: Default::default(),
            rank: 0,
        }
    }
}

/// What the watchdog (the launcher's thread, [`poll_faults`]) reads: per peer-mapped pool of
/// every rank of this process, its host-mapped fault word and how to name it. Entries are
/// removed before the words are freed ([`SymmState::release`]), under the same lock.
struct Watch {
    rank: usize,
    /// Host address of the fault word.
    word: usize,
    /// "the symm_mem pool of group @tp (N bytes at 0x…)".
    pool: String,
    kernels: std::sync::Arc<Vec<String>>,
    timeout_s: u64,
}

fn watches() -> &'static Mutex<Vec<Watch>> {
    static W: OnceLock<Mutex<Vec<Watch>>> = OnceLock::new();
    W.get_or_init(|| Mutex::new(Vec::new()))
}

/// The error of a fault word's value, if it holds a fault.
fn fault_message(
    rank: Option<usize>,
    w: u32,
    pool: &str,
    kernels: &[String],
    timeout_s: u64,
) -> Option<String> {
    let (peer, site) = decode_fault(w)?;
    let kernel = kernels
        .get(site as usize)
        .map(|k| format!("kernel `{k}`"))
        .unwrap_or_else(|| format!("kernel #{site}"));
    let who = rank.map(|r| format!("rank {r}: ")).unwrap_or_default();
    Some(format!(
        "{who}symm_mem barrier timed out: {kernel} on {pool} waited more than {timeout_s} s for group rank {peer}, which never arrived (a rank skipped or failed the collective)"
    ))
}

/// The first fault any rank of this process has reported so far (the watchdog polls this
/// while the ranks run, so a stuck barrier is reported when its kernel gives up rather than
/// when the run's timeout expires).
pub fn poll_faults() -> Option<String> {
    let w = watches().lock().ok()?;
    w.iter().find_map(|x| {
        // SAFETY: the word is live while its entry is registered (see `Watch`).
        let v = unsafe { std::ptr::read_volatile(x.word as *const u32) };
        fault_message(Some(x.rank), v, &x.pool, &x.kernels, x.timeout_s)
    })
}

/// The board of the in-process exchange: (job, group, seq) → per group rank, the published
/// address (0: that rank failed).
type BoardMap = HashMap<(u64, u32, u64), Vec<Option<u64>>>;

fn board() -> &'static (Mutex<BoardMap>, Condvar) {
    static B: OnceLock<(Mutex<BoardMap>, Condvar)> = OnceLock::new();
    B.get_or_init(|| (Mutex::new(HashMap::new()), Condvar::new()))
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

fn location(dev: i32) -> cu::CUmemLocation {
    cu::CUmemLocation {
        type_: cu::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: dev,
    }
}

fn alloc_prop(dev: i32) -> cu::CUmemAllocationProp {
    // SAFETY: a plain C struct; all-zero is its documented default.
    let mut prop: cu::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = cu::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes =
        cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location = location(dev);
    prop
}

/// Grants `devices` read/write access to `[va, va + bytes)`.
unsafe fn set_access(va: u64, bytes: usize, devices: &[i32]) -> Result<(), String> {
    let descs: Vec<cu::CUmemAccessDesc> = devices
        .iter()
        .map(|&d| cu::CUmemAccessDesc {
            location: location(d),
            flags: cu::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        })
        .collect();
    cu_check(
        "cuMemSetAccess",
        cu::cuMemSetAccess(va, bytes, descs.as_ptr(), descs.len()),
    )
}

/// Maps `handle` at a fresh address, accessible from `devices`.
unsafe fn map(
    handle: cu::CUmemGenericAllocationHandle,
    bytes: usize,
    align: usize,
    devices: &[i32],
) -> Result<u64, String> {
    let mut va: cu::CUdeviceptr = 0;
    cu_check(
        "cuMemAddressReserve",
        cu::cuMemAddressReserve(&mut va, bytes, align, 0, 0),
    )?;
    if let Err(e) = cu_check("cuMemMap", cu::cuMemMap(va, bytes, 0, handle, 0)) {
        cu::cuMemAddressFree(va, bytes);
        return Err(e);
    }
    if let Err(e) = set_access(va, bytes, devices) {
        cu::cuMemUnmap(va, bytes);
        cu::cuMemAddressFree(va, bytes);
        return Err(e);
    }
    Ok(va)
}

unsafe fn unmap(va: u64, bytes: usize) {
    cu::cuMemUnmap(va, bytes);
    cu::cuMemAddressFree(va, bytes);
}

impl SymmState {
    /// The abstract socket name of a rank of the job.
    fn sock_name(job: u64, rank: usize) -> String {
        format!("commlir-symm-{job:016x}-{rank}")
    }

    /// The host-mapped fault words, created on first use.
    fn fault_words(&mut self) -> Result<(*mut u32, u64), String> {
        if let Some(f) = self.faults {
            return Ok(f);
        }
        let mut host: *mut c_void = std::ptr::null_mut();
        let bytes = FAULT_WORDS * 4;
        // SAFETY: allocates pinned host memory mapped into the device's address space.
        unsafe {
            cu_check(
                "cuMemHostAlloc",
                cu::cuMemHostAlloc(
                    &mut host,
                    bytes,
                    cu::CU_MEMHOSTALLOC_DEVICEMAP | cu::CU_MEMHOSTALLOC_PORTABLE,
                ),
            )?;
            std::ptr::write_bytes(host as *mut u8, 0, bytes);
            let mut dev: cu::CUdeviceptr = 0;
            cu_check(
                "cuMemHostGetDevicePointer",
                cu::cuMemHostGetDevicePointer_v2(&mut dev, host, 0),
            )?;
            self.faults = Some((host as *mut u32, dev));
        }
        Ok(self.faults.unwrap_or((std::ptr::null_mut(), 0)))
    }

    /// Creates a peer-mapped pool of `bytes` for `group` on device `dev` (collective over the
    /// group: every member calls it in the same order). `Ok(None)`: not mappable here, with
    /// the reason (every member agrees, through `comm`); the caller takes the NCCL path.
    ///
    /// # Safety
    /// The rank's context is current; `comm` is this rank's communicator of `group`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn create(
        &mut self,
        group: u32,
        bytes: u64,
        alignment: u64,
        dev: i32,
        rank: usize,
        comm: nccl::ncclComm_t,
        stream: cu::CUstream,
    ) -> Result<Result<u64, String>, String> {
        let Some(m) = self.groups.get(group as usize).cloned().flatten() else {
            return Ok(Err("this rank is not a member of the group".into()));
        };
        let Some(exchange) = self.exchange.clone() else {
            return Ok(Err("no peer exchange in this launch mode".into()));
        };
        let g = m.members.len();
        if g > SYMM_MAX_PEERS {
            return Ok(Err(format!(
                "the group has {g} ranks; peer mapping covers at most {SYMM_MAX_PEERS}"
            )));
        }
        let seq = {
            let s = self.seq.entry(group).or_insert(0);
            *s += 1;
            *s
        };
        // 1. This rank's allocation: pool bytes, then the signal pad, the control words and
        //    the LL area.
        let prop = alloc_prop(dev);
        let mut gran = 0usize;
        let local =
            (|| -> Result<(cu::CUmemGenericAllocationHandle, usize, usize, u64), String> {
                cu_check(
                    "cuMemGetAllocationGranularity",
                    cu::cuMemGetAllocationGranularity(
                        &mut gran,
                        &prop,
                        cu::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                    ),
                )?;
                let gran = gran.max(alignment as usize).max(4096);
                let pad_offset = round_up(bytes.max(1) as usize, 256);
                let map_bytes = round_up(pad_offset + symm_pad_bytes(g), gran);
                let mut h: cu::CUmemGenericAllocationHandle = 0;
                cu_check("cuMemCreate", cu::cuMemCreate(&mut h, map_bytes, &prop, 0))?;
                let devices: Vec<i32> = match &exchange {
                    Exchange::InProcess { devices, .. } => m
                        .members
                        .iter()
                        .map(|&r| devices.get(r).copied().unwrap_or(dev))
                        .collect(),
                    Exchange::Sockets { .. } => vec![dev],
                };
                for &d in &devices {
                    if d != dev {
                        let mut ok = 0;
                        cu_check(
                            "cuDeviceCanAccessPeer",
                            cu::cuDeviceCanAccessPeer(&mut ok, dev, d),
                        )?;
                        if ok == 0 {
                            cu::cuMemRelease(h);
                            return Err(format!("device {dev} cannot access device {d} (no P2P)"));
                        }
                    }
                }
                let va = match map(h, map_bytes, gran, &devices) {
                    Ok(va) => va,
                    Err(e) => {
                        cu::cuMemRelease(h);
                        return Err(e);
                    }
                };
                // Zero everything (the pad must read 0 before any peer signals: the exchange
                // below happens after this completes).
                cu_check("cuMemsetD8", cu::cuMemsetD8_v2(va, 0, map_bytes))?;
                cu_check("cuCtxSynchronize", cu::cuCtxSynchronize())?;
                Ok((h, map_bytes, pad_offset, va))
            })();
        // 2. Exchange (always, also after a local failure, so that no peer waits forever).
        let mut why: Option<String> = None;
        let mut peers = vec![0u64; g];
        let mut imported = Vec::new();
        match &local {
            Ok((_, _, _, va)) => peers[m.me] = *va,
            Err(e) => why = Some(e.clone()),
        }
        match &exchange {
            Exchange::InProcess { job, .. } => {
                let key = (*job, group, seq);
                let (lock, cv) = board();
                let mut b = lock.lock().map_err(|_| "symm board poisoned")?;
                b.entry(key).or_insert_with(|| vec![None; g])[m.me] =
                    Some(local.as_ref().map(|l| l.3).unwrap_or(0));
                cv.notify_all();
                let deadline = Instant::now() + self.timeout;
                loop {
                    let entry = b.get(&key).cloned().unwrap_or_default();
                    if entry.iter().all(Option::is_some) {
                        for (p, a) in entry.iter().enumerate() {
                            peers[p] = a.unwrap_or(0);
                        }
                        break;
                    }
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(format!(
                            "symm_mem pool of {bytes} bytes (group {}): peers did not publish their mappings within {} s",
                            self.group_name(group),
                            self.timeout.as_secs()
                        ));
                    }
                    b = cv
                        .wait_timeout(b, left)
                        .map_err(|_| "symm board poisoned")?
                        .0;
                }
                if peers.contains(&0) && why.is_none() {
                    why = Some("a peer could not map its pool".into());
                }
            }
            Exchange::Sockets { job } => {
                let fd = match &local {
                    Ok((h, ..)) => {
                        let mut fd: RawFd = -1;
                        let r = cu::cuMemExportToShareableHandle(
                            &mut fd as *mut RawFd as *mut c_void,
                            *h,
                            cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                            0,
                        );
                        match cu_check("cuMemExportToShareableHandle", r) {
                            Ok(()) => Some(OwnedFd::from_raw_fd(fd)),
                            Err(e) => {
                                why.get_or_insert(e);
                                None
                            }
                        }
                    }
                    Err(_) => None,
                };
                let got = self.exchange_fds(*job, group, seq, &m, rank, fd.as_ref())?;
                if let Ok((_, map_bytes, _, _)) = &local {
                    for (p, f) in got.into_iter().enumerate() {
                        if p == m.me {
                            continue;
                        }
                        let Some(f) = f else {
                            why.get_or_insert("a peer could not export its pool".into());
                            continue;
                        };
                        if why.is_some() {
                            continue;
                        }
                        let mut h: cu::CUmemGenericAllocationHandle = 0;
                        let r = cu::cuMemImportFromShareableHandle(
                            &mut h,
                            f.as_raw_fd() as isize as *mut c_void,
                            cu::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                        );
                        if let Err(e) = cu_check("cuMemImportFromShareableHandle", r) {
                            why = Some(e);
                            continue;
                        }
                        match map(h, *map_bytes, gran.max(4096), &[dev]) {
                            Ok(va) => {
                                peers[p] = va;
                                imported.push((va, h));
                            }
                            Err(e) => {
                                cu::cuMemRelease(h);
                                why = Some(e);
                            }
                        }
                    }
                }
            }
        }
        // 3. Vote: all or nothing.
        let ok = vote(comm, stream, why.is_none())?;
        let (h, map_bytes, pad_offset, va) = match (ok, local) {
            (true, Ok(l)) => l,
            (_, local) => {
                for (va, h) in imported {
                    unmap(va, local.as_ref().map(|l| l.1).unwrap_or(0));
                    cu::cuMemRelease(h);
                }
                if let Ok((h, map_bytes, _, va)) = local {
                    unmap(va, map_bytes);
                    cu::cuMemRelease(h);
                }
                return Ok(Err(
                    why.unwrap_or_else(|| "a peer could not map its pool".into())
                ));
            }
        };
        // 4. The descriptor.
        let (_, fault_dev) = self.fault_words()?;
        let fault_word = self.pools.len() % FAULT_WORDS;
        let mut d = SymmDesc {
            status: fault_dev + 4 * fault_word as u64,
            timeout_ns: self.timeout.as_nanos().min(u128::from(u64::MAX)) as u64,
            rank: m.me as u32,
            world: g as u32,
            ..SymmDesc::default()
        };
        for (p, &a) in peers.iter().enumerate() {
            d.base[p] = a;
            d.signal[p] = a + pad_offset as u64;
        }
        let mut desc: cu::CUdeviceptr = 0;
        cu_check(
            "cuMemAlloc",
            cu::cuMemAlloc_v2(&mut desc, std::mem::size_of::<SymmDesc>()),
        )?;
        cu_check(
            "cuMemcpyHtoD",
            cu::cuMemcpyHtoD_v2(
                desc,
                &d as *const SymmDesc as *const c_void,
                std::mem::size_of::<SymmDesc>(),
            ),
        )?;
        let (fault_host, _) = self.fault_words()?;
        if let Ok(mut w) = watches().lock() {
            w.push(Watch {
                rank: self.rank,
                word: fault_host.wrapping_add(fault_word) as usize,
                pool: self.pool_name(group, bytes, va),
                kernels: self.kernel_names.clone(),
                timeout_s: self.timeout.as_secs(),
            });
        }
        self.pools.insert(
            va,
            SymmPool {
                map_bytes,
                pad_offset,
                handle: h,
                base: va,
                imported,
                desc,
                peers: peers.to_vec(),
                fault_word,
                group,
                bytes,
            },
        );
        Ok(Ok(va))
    }

    fn group_name(&self, group: u32) -> String {
        self.group_names
            .get(group as usize)
            .map(|n| format!("@{n}"))
            .unwrap_or_else(|| format!("#{group}"))
    }

    /// Sends this rank's fd (or "none") to every peer of the group and receives theirs;
    /// indexed by group rank (this rank's entry is None).
    fn exchange_fds(
        &mut self,
        job: u64,
        group: u32,
        seq: u64,
        m: &Membership,
        rank: usize,
        fd: Option<&OwnedFd>,
    ) -> Result<Vec<Option<OwnedFd>>, String> {
        let deadline = Instant::now() + self.timeout;
        if self.listener.is_none() {
            let addr = SocketAddr::from_abstract_name(Self::sock_name(job, rank).as_bytes())
                .map_err(|e| format!("symm exchange: {e}"))?;
            let l = UnixListener::bind_addr(&addr)
                .map_err(|e| format!("symm exchange: cannot listen: {e}"))?;
            l.set_nonblocking(true)
                .map_err(|e| format!("symm exchange: {e}"))?;
            self.listener = Some(l);
        }
        // Send: the message is [group u32, seq u64, from u32] and at most one fd. A small
        // message to a listening socket completes without the peer accepting it.
        for (p, &peer) in m.members.iter().enumerate() {
            if p == m.me {
                continue;
            }
            let addr = SocketAddr::from_abstract_name(Self::sock_name(job, peer).as_bytes())
                .map_err(|e| format!("symm exchange: {e}"))?;
            let s = loop {
                match UnixStream::connect_addr(&addr) {
                    Ok(s) => break s,
                    Err(e) => {
                        if Instant::now() > deadline {
                            return Err(format!(
                                "symm exchange: rank {peer} does not listen ({e}) after {} s",
                                self.timeout.as_secs()
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(2));
                    }
                }
            };
            let mut msg = [0u8; 16];
            msg[..4].copy_from_slice(&group.to_le_bytes());
            msg[4..12].copy_from_slice(&seq.to_le_bytes());
            msg[12..].copy_from_slice(&(m.me as u32).to_le_bytes());
            send_fd(&s, &msg, fd.map(AsRawFd::as_raw_fd))
                .map_err(|e| format!("symm exchange: send to rank {peer}: {e}"))?;
        }
        let mut out: Vec<Option<OwnedFd>> = (0..m.members.len()).map(|_| None).collect();
        let mut have = vec![false; m.members.len()];
        have[m.me] = true;
        for (p, h) in have.iter_mut().enumerate() {
            if let Some(f) = self.stash.remove(&(group, seq, p)) {
                out[p] = f;
                *h = true;
            }
        }
        while !have.iter().all(|&h| h) {
            let l = self.listener.as_ref().ok_or("symm exchange: no listener")?;
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)
                        .map_err(|e| format!("symm exchange: {e}"))?;
                    let _ = s.set_read_timeout(Some(self.timeout));
                    let (msg, f) = recv_fd(&s).map_err(|e| format!("symm exchange: {e}"))?;
                    let g = u32::from_le_bytes([msg[0], msg[1], msg[2], msg[3]]);
                    let sq = u64::from_le_bytes(msg[4..12].try_into().unwrap_or([0; 8]));
                    let from = u32::from_le_bytes([msg[12], msg[13], msg[14], msg[15]]) as usize;
                    if g == group && sq == seq && from < have.len() {
                        out[from] = f;
                        have[from] = true;
                    } else {
                        self.stash.insert((g, sq, from), f);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        let missing: Vec<usize> = have
                            .iter()
                            .enumerate()
                            .filter(|(_, h)| !**h)
                            .map(|(p, _)| m.members[p])
                            .collect();
                        return Err(format!(
                            "symm exchange: no mapping from rank(s) {missing:?} of group {} within {} s",
                            self.group_name(group),
                            self.timeout.as_secs()
                        ));
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) => return Err(format!("symm exchange: accept: {e}")),
            }
        }
        Ok(out)
    }

    /// The descriptor of the pool at `base`, or 0 when it is not peer-mapped.
    pub fn desc(&self, base: u64) -> u64 {
        self.pools.get(&base).map_or(0, |p| p.desc)
    }

    /// Group rank `peer`'s mapping of the peer-mapped pool at `base` in this process, and the
    /// pool's byte size.
    pub fn peer_base(&self, base: u64, peer: u32) -> Result<(u64, u64), String> {
        let p = self
            .pools
            .get(&base)
            .ok_or_else(|| format!("symm_peer_copy: no peer-mapped pool at {base:#x}"))?;
        let at = p.peers.get(peer as usize).copied().ok_or_else(|| {
            format!(
                "symm_peer_copy: group rank {peer} is outside the pool's group of {}",
                p.peers.len()
            )
        })?;
        Ok((at, p.bytes))
    }

    /// The first fault a symm kernel reported since the last check, as an error naming the
    /// kernel and the pool (and clears it).
    pub fn check_faults(&mut self) -> Result<(), String> {
        let Some((host, _)) = self.faults else {
            return Ok(());
        };
        let mut pools: Vec<&SymmPool> = self.pools.values().collect();
        pools.sort_by_key(|p| p.fault_word);
        for p in pools {
            // SAFETY: `host` holds FAULT_WORDS words of pinned memory the device may write.
            let w = unsafe { std::ptr::read_volatile(host.add(p.fault_word)) };
            let pool = self.pool_name(p.group, p.bytes, p.base);
            // (The caller prefixes the rank.)
            if let Some(m) =
                fault_message(None, w, &pool, &self.kernel_names, self.timeout.as_secs())
            {
                return Err(m);
            }
        }
        Ok(())
    }

    fn pool_name(&self, group: u32, bytes: u64, base: u64) -> String {
        format!(
            "the symm_mem pool of group {} ({bytes} bytes at {base:#x})",
            self.group_name(group)
        )
    }

    /// Whether `base` is a peer-mapped pool (its memory is released by [`Self::release`]).
    pub fn owns(&self, base: u64) -> bool {
        self.pools.contains_key(&base)
    }

    /// Unmaps every pool (after the group's peers are done with them: the caller synchronizes
    /// the streams and passes a barrier first).
    ///
    /// # Safety
    /// The rank's context is current; no work using the pools is in flight.
    pub unsafe fn release(&mut self) {
        if let Ok(mut w) = watches().lock() {
            let me = self.rank;
            w.retain(|x| x.rank != me);
        }
        for (_, p) in self.pools.drain() {
            for (va, h) in p.imported {
                unmap(va, p.map_bytes);
                cu::cuMemRelease(h);
            }
            let _ = p.pad_offset;
            unmap(p.base, p.map_bytes);
            cu::cuMemRelease(p.handle);
            cu::cuMemFree_v2(p.desc);
        }
        if let Some((host, _)) = self.faults.take() {
            cu::cuMemFreeHost(host as *mut c_void);
        }
    }
}

/// An NCCL min all-reduce of one flag over `comm`: true when every rank voted true. Also a
/// barrier of the group.
///
/// # Safety
/// The rank's context is current; `comm` is a live communicator; collective over it.
pub unsafe fn vote(comm: nccl::ncclComm_t, stream: cu::CUstream, ok: bool) -> Result<bool, String> {
    let mut d: cu::CUdeviceptr = 0;
    cu_check("cuMemAlloc", cu::cuMemAlloc_v2(&mut d, 4))?;
    let v: i32 = i32::from(ok);
    let r = (|| {
        cu_check(
            "cuMemcpyHtoD",
            cu::cuMemcpyHtoD_v2(d, &v as *const i32 as *const c_void, 4),
        )?;
        nccl_check(
            "ncclAllReduce",
            nccl::ncclAllReduce(
                d as *const c_void,
                d as *mut c_void,
                1,
                nccl::ncclDataType_t::ncclInt32,
                nccl::ncclRedOp_t::ncclMin,
                comm,
                stream as _,
            ),
            comm,
        )?;
        cu_check("cuStreamSynchronize", cu::cuStreamSynchronize(stream))?;
        let mut out: i32 = 0;
        cu_check(
            "cuMemcpyDtoH",
            cu::cuMemcpyDtoH_v2(&mut out as *mut i32 as *mut c_void, d, 4),
        )?;
        Ok(out == 1)
    })();
    cu::cuMemFree_v2(d);
    r
}

/// Sends `msg` and at most one descriptor over `s` (`SCM_RIGHTS`).
fn send_fd(s: &UnixStream, msg: &[u8; 16], fd: Option<RawFd>) -> std::io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr() as *mut c_void,
        iov_len: msg.len(),
    };
    // Room for one fd's control message, 8-byte aligned.
    let mut cbuf = [0u64; 4];
    // SAFETY: msghdr is a plain C struct; the pointers below outlive the call.
    unsafe {
        let mut hdr: libc::msghdr = std::mem::zeroed();
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        if let Some(fd) = fd {
            let space = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as usize;
            hdr.msg_control = cbuf.as_mut_ptr() as *mut c_void;
            hdr.msg_controllen = space;
            let c = libc::CMSG_FIRSTHDR(&hdr);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut RawFd, fd);
        }
        if libc::sendmsg(s.as_raw_fd(), &hdr, 0) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Receives a 16-byte message and the descriptor that came with it, if any.
fn recv_fd(s: &UnixStream) -> std::io::Result<([u8; 16], Option<OwnedFd>)> {
    let mut msg = [0u8; 16];
    let mut iov = libc::iovec {
        iov_base: msg.as_mut_ptr() as *mut c_void,
        iov_len: msg.len(),
    };
    let mut cbuf = [0u64; 4];
    // SAFETY: as in `send_fd`; a received fd is owned by us from here on.
    unsafe {
        let mut hdr: libc::msghdr = std::mem::zeroed();
        hdr.msg_iov = &mut iov;
        hdr.msg_iovlen = 1;
        hdr.msg_control = cbuf.as_mut_ptr() as *mut c_void;
        hdr.msg_controllen = std::mem::size_of_val(&cbuf);
        let n = libc::recvmsg(s.as_raw_fd(), &mut hdr, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if n as usize != msg.len() {
            return Err(std::io::Error::other("short message"));
        }
        let c = libc::CMSG_FIRSTHDR(&hdr);
        let fd = if !c.is_null()
            && (*c).cmsg_level == libc::SOL_SOCKET
            && (*c).cmsg_type == libc::SCM_RIGHTS
        {
            Some(OwnedFd::from_raw_fd(std::ptr::read_unaligned(
                libc::CMSG_DATA(c) as *const RawFd,
            )))
        } else {
            None
        };
        Ok((msg, fd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symm_kernels_are_told_apart_by_name() {
        assert!(is_symm_kernel("s0_one_shot_all_reduce"));
        assert!(is_symm_kernel("s12_reduce_scatter"));
        assert!(is_symm_kernel("s4_one_shot_all_reduce_add"));
        assert!(is_symm_kernel("s7_fused_all_gather_matmul_copy"));
        assert!(!is_symm_kernel("k3_fused"));
        assert!(!is_symm_kernel("s_all_gather"));
        assert!(!is_symm_kernel("sx_all_gather"));
    }

    #[test]
    fn fault_words_decode() {
        assert_eq!(decode_fault(0), None);
        assert_eq!(
            decode_fault(super::super::abi::symm_fault_code(3, 17)),
            Some((3, 17))
        );
    }

    #[test]
    fn descriptors_travel_over_abstract_sockets() {
        // Two "ranks" of one job in threads: each sends a pipe end to the other.
        let job = 0x5eed_0000 ^ u64::from(std::process::id());
        let run = |me: usize| {
            move || {
                let mut st = SymmState {
                    timeout: Duration::from_secs(10),
                    ..SymmState::default()
                };
                let m = Membership {
                    members: vec![0, 1],
                    me,
                };
                let mut fds = [0 as RawFd; 2];
                // SAFETY: creates a pipe.
                assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
                let (r, w) =
                    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
                // Two pools in a row: the second exchange may find the first one's messages.
                let a = st.exchange_fds(job, 0, 1, &m, me, Some(&w)).unwrap();
                let b = st.exchange_fds(job, 0, 2, &m, me, None).unwrap();
                drop(r);
                (a[1 - me].is_some(), b[1 - me].is_none())
            }
        };
        let t0 = std::thread::spawn(run(0));
        let t1 = std::thread::spawn(run(1));
        assert_eq!(t0.join().unwrap(), (true, true));
        assert_eq!(t1.join().unwrap(), (true, true));
    }
}
