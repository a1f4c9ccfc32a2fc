//! `commlir-run --backend cuda` on a machine without a GPU (CI): a clear diagnostic and exit
//! code 1, never a loader panic. Skipped where a CUDA driver is installed.

use std::process::Command;

/// The runner's own probe (the same library candidates it tries).
fn driver_present() -> bool {
    commlir_runtime::cuda::ffi::driver_present()
}

#[test]
fn without_a_driver_the_cuda_backend_fails_clearly() {
    if driver_present() {
        eprintln!("skipped: a CUDA driver is present");
        return;
    }
    // A minimal artifact: the runner reads it before it looks for the driver.
    let manifest = format!(
        r#"{{"abi_version": {}, "entry": "main", "entry_symbol": "commlir_main",
        "functions": [{{"name": "main", "symbol": "commlir_fn_main", "args": [], "results": []}}]}}"#,
        commlir_runtime::cuda::abi::ABI_VERSION
    );
    let manifest = manifest.as_bytes();
    let mut art = b"CMLIRART".to_vec();
    art.extend_from_slice(&1u32.to_le_bytes());
    art.extend_from_slice(&2u32.to_le_bytes());
    let host = b"\x7fELF";
    let off_m = 16 + 48;
    let off_h = off_m + manifest.len();
    for (tag, off, len) in [
        (b"MANI", off_m, manifest.len()),
        (b"HOST", off_h, host.len()),
    ] {
        art.extend_from_slice(tag);
        art.extend_from_slice(&0u32.to_le_bytes());
        art.extend_from_slice(&(off as u64).to_le_bytes());
        art.extend_from_slice(&(len as u64).to_le_bytes());
    }
    art.extend_from_slice(manifest);
    art.extend_from_slice(host);
    let path =
        std::env::temp_dir().join(format!("commlir-nodriver-{}.commlir", std::process::id()));
    std::fs::write(&path, &art).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_commlir-run"))
        .arg(&path)
        .args(["--backend", "cuda", "--ranks", "2"])
        .output()
        .expect("runs commlir-run");
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("no CUDA driver found"), "stderr: {err}");
    assert!(o.stdout.is_empty());
}
