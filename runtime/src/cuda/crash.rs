//! A last word on a crash: a segmentation fault (or bus error, or abort) in a CUDA run
//! otherwise ends the process without a line, which on a multi-process job leaves no clue
//! which rank, thread or library failed. The handler writes the signal, this process's rank
//! and the faulting thread's name to stderr, then a backtrace, and exits with 128 + the
//! signal, as the default action would report it.
//!
//! The backtrace is not async-signal-safe (it allocates and takes locks); the process is
//! about to die anyway, and the first line, written with `write(2)` alone, comes out first.
//!
//! One fault is expected: once the watchdog has aborted the NCCL communicators to end a run
//! that cannot finish ([`abandon`]), a rank thread still inside NCCL may fault on them. Such a
//! rank thread is parked instead (it was abandoned already), so that the watchdog's error is
//! what the run reports, and `commlir-run` ends with 1 through [`exit_if_abandoned`], not
//! with the signal.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Set once the watchdog has aborted the communicators and abandoned the rank threads.
static ABANDONED: AtomicBool = AtomicBool::new(false);

/// Marks the rank threads abandoned: from now on a fault in one of them parks it.
pub fn abandon() {
    ABANDONED.store(true, Ordering::SeqCst);
}

/// After the rank threads were abandoned, ends the process with `code` at once, without the
/// exit handlers (a parked thread may hold a lock of the CUDA or NCCL library that they
/// would wait for); otherwise returns. Standard output and error are flushed first.
pub fn exit_if_abandoned(code: i32) {
    if ABANDONED.load(Ordering::SeqCst) {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        // SAFETY: _exit(2) ends the process; nothing after it runs.
        unsafe { libc::_exit(code) }
    }
}

/// This process's global rank, for the message (`usize::MAX`: not known yet).
static RANK: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Installs the handler (once per process; later calls only update the rank).
pub fn install(rank: Option<usize>) {
    if let Some(r) = rank {
        RANK.store(r, Ordering::Relaxed);
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in [libc::SIGSEGV, libc::SIGBUS, libc::SIGABRT] {
            // SAFETY: a plain C struct zeroed, then the documented fields set; `on_signal`
            // has the `sa_sigaction` signature that SA_SIGINFO asks for.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    on_signal;
                sa.sa_sigaction = handler as usize;
                sa.sa_flags = libc::SA_SIGINFO;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let rank_thread = std::thread::current()
        .name()
        .is_some_and(|n| n.starts_with("rank"));
    if ABANDONED.load(Ordering::SeqCst) && sig != libc::SIGABRT && rank_thread {
        // An abandoned rank thread faulting on an aborted communicator: park it until the
        // watchdog's thread exits the process with its error.
        loop {
            // SAFETY: pause(2) is async-signal-safe.
            unsafe {
                libc::pause();
            }
        }
    }
    let name = match sig {
        libc::SIGSEGV => "segmentation fault",
        libc::SIGBUS => "bus error",
        _ => "abort",
    };
    // SAFETY: `info` is the kernel's siginfo for this signal.
    let addr = unsafe { info.as_ref().map_or(0, |i| i.si_addr() as usize) };
    let rank = match RANK.load(Ordering::Relaxed) {
        usize::MAX => String::from("?"),
        r => r.to_string(),
    };
    let thread = std::thread::current()
        .name()
        .unwrap_or("<unnamed: a library's thread>")
        .to_string();
    let line = format!(
        "error: process of rank {rank}: {name} at {addr:#x} in thread {thread}; backtrace follows\n"
    );
    // SAFETY: writes a buffer we own to fd 2.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
    }
    let bt = format!("{}\n", std::backtrace::Backtrace::force_capture());
    // SAFETY: as above.
    unsafe {
        libc::write(2, bt.as_ptr().cast(), bt.len());
        libc::_exit(128 + sig);
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// In a child process (this test binary, re-run on one test): a named thread reads
    /// through a null pointer, after `abandon()` when asked.
    fn child(abandoned: bool) {
        super::install(Some(3));
        if abandoned {
            super::abandon();
        }
        let t = std::thread::Builder::new()
            .name("rank3".into())
            .spawn(|| {
                // SAFETY: none: this is the fault under test.
                unsafe { std::ptr::read_volatile(std::ptr::null::<u32>()) }
            })
            .unwrap();
        if abandoned {
            // The parked thread never returns; the main thread exits as the watchdog does.
            std::thread::sleep(std::time::Duration::from_millis(300));
            eprintln!("error: the watchdog's error");
            super::exit_if_abandoned(1);
            unreachable!("exit_if_abandoned exits once the threads are abandoned");
        }
        let _ = t.join();
    }

    fn run(name: &str, abandoned: bool) -> (Option<i32>, String) {
        if std::env::var_os("COMMLIR_CRASH_CHILD").is_some() {
            child(abandoned);
            unreachable!("the child dies or exits");
        }
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env("COMMLIR_CRASH_CHILD", "1")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    #[test]
    fn a_fault_names_the_rank_and_the_thread() {
        let (code, err) = run(
            "cuda::crash::tests::a_fault_names_the_rank_and_the_thread",
            false,
        );
        assert_eq!(code, Some(128 + libc::SIGSEGV), "{err}");
        assert!(
            err.contains("error: process of rank 3: segmentation fault at 0x0 in thread rank3"),
            "{err}"
        );
    }

    #[test]
    fn a_fault_in_an_abandoned_rank_thread_leaves_the_watchdogs_error() {
        let (code, err) = run(
            "cuda::crash::tests::a_fault_in_an_abandoned_rank_thread_leaves_the_watchdogs_error",
            true,
        );
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("error: the watchdog's error"), "{err}");
        assert!(!err.contains("segmentation fault"), "{err}");
    }
}
