//! Pins each rank's host thread to the CPUs local to its GPU (the NUMA node the GPU hangs
//! off), as NCCL pins its own proxy threads.
//!
//! A rank thread enqueues every kernel, NCCL call and event of its GPU. At 1 MiB a collective
//! runs for about 10 µs on an H200 and its enqueue (mostly inside NCCL) takes 7–11 µs, so the
//! GPU waits whenever the host thread is slow; an unpinned thread that the scheduler moves to
//! the other socket reaches NCCL's host structures and the GPU's doorbells across the
//! interconnect; on one host the same NCCL call's host time already moves between 6.9 and
//! 10.8 µs from run to run (docs/benchmarks.md, *GPU: host time per call*). The set is read from sysfs
//! (`/sys/bus/pci/devices/<bus id>/local_cpulist`) and intersected with the CPUs the process
//! may use (a container's cpuset); when either is unknown or the intersection is empty the
//! thread stays as it is. `commlir-run --cpu-affinity none` turns it off.

use cudarc::driver::sys as cu;
use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns pinning on or off for the rank threads started after the call (process-wide, like
/// the environment a launcher sets).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Parses a Linux CPU list (`"0-15,32-47"`, `"3"`, with an optional trailing newline) into
/// ascending, distinct CPU numbers; `None` when malformed or absurdly large.
pub fn parse_cpulist(s: &str) -> Option<Vec<usize>> {
    const MAX_CPU: usize = 1 << 16;
    let mut cpus = Vec::new();
    let s = s.trim();
    if s.is_empty() {
        return Some(cpus);
    }
    for part in s.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let c: usize = part.trim().parse().ok()?;
                (c, c)
            }
        };
        if lo > hi || hi >= MAX_CPU {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// The sysfs name of a PCI bus id as CUDA prints it (`"0000:1B:00.0"` → `"0000:1b:00.0"`).
pub fn sysfs_bus_id(cuda_bus_id: &str) -> String {
    cuda_bus_id
        .trim_end_matches('\0')
        .trim()
        .to_ascii_lowercase()
}

/// The CPUs local to `dev`, from sysfs; `None` when unknown.
///
/// # Safety
/// The CUDA driver is loaded and initialized.
unsafe fn local_cpus(dev: cu::CUdevice) -> Option<(String, Vec<usize>)> {
    let mut buf = [0 as std::ffi::c_char; 32];
    let r = cu::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, dev);
    if r != cu::CUresult::CUDA_SUCCESS {
        return None;
    }
    let id = std::ffi::CStr::from_ptr(buf.as_ptr()).to_str().ok()?;
    let id = sysfs_bus_id(id);
    let list = std::fs::read_to_string(format!("/sys/bus/pci/devices/{id}/local_cpulist")).ok()?;
    Some((id, parse_cpulist(&list)?))
}

/// Pins the calling thread to the CPUs local to `dev` that the process may use. Returns a note
/// for the user when it could not (the run goes on unpinned), `None` when pinned or off.
///
/// # Safety
/// The CUDA driver is loaded and initialized.
pub unsafe fn pin_to_device(dev: cu::CUdevice) -> Option<String> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    let (id, local) = local_cpus(dev)?;
    match pin_current_thread(&local) {
        Ok(()) => None,
        Err(e) => Some(format!(
            "note: host thread not pinned to the CPUs of GPU {id}: {e}"
        )),
    }
}

#[cfg(target_os = "linux")]
fn pin_current_thread(cpus: &[usize]) -> Result<(), String> {
    // SAFETY: `cpu_set_t` is plain data; the libc calls read and write only the set passed,
    // for the calling thread (pid 0).
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if libc::sched_getaffinity(0, size, &mut allowed) != 0 {
            return Err("sched_getaffinity failed".into());
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let mut any = false;
        for &c in cpus {
            if c < 8 * size && libc::CPU_ISSET(c, &allowed) {
                libc::CPU_SET(c, &mut set);
                any = true;
            }
        }
        if !any {
            // The GPU's CPUs are outside this process's cpuset: leave the thread alone.
            return Ok(());
        }
        if libc::sched_setaffinity(0, size, &set) != 0 {
            return Err(std::io::Error::last_os_error().to_string());
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn pin_current_thread(_cpus: &[usize]) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_like_the_kernel_prints_them() {
        assert_eq!(parse_cpulist("0-3,8-9\n"), Some(vec![0, 1, 2, 3, 8, 9]));
        assert_eq!(parse_cpulist("5"), Some(vec![5]));
        assert_eq!(parse_cpulist("2,0-1,1"), Some(vec![0, 1, 2]));
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_cpulist("a-b"), None);
        assert_eq!(parse_cpulist("0-4294967295"), None);
    }

    #[test]
    fn bus_ids_are_lowercased_for_sysfs() {
        assert_eq!(sysfs_bus_id("0000:1B:00.0\0"), "0000:1b:00.0");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn pinning_to_the_allowed_set_keeps_the_thread_runnable() {
        // On a thread of its own: pins to the CPUs the process may use (a no-op set), and
        // to a set outside them (left alone); the thread still runs either way.
        std::thread::spawn(|| {
            // SAFETY: plain data, the calling thread's own mask.
            let allowed: Vec<usize> = unsafe {
                let mut s: libc::cpu_set_t = std::mem::zeroed();
                assert_eq!(
                    libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut s),
                    0
                );
                (0..1024).filter(|&c| libc::CPU_ISSET(c, &s)).collect()
            };
            assert!(pin_current_thread(&allowed).is_ok());
            assert!(pin_current_thread(&[100_000]).is_ok());
        })
        .join()
        .unwrap();
    }
}
