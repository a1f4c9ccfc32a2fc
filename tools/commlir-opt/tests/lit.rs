//! Runs the whole lit suite (`lit -v test/`, configured by the repository's `lit.cfg`) as part
//! of `cargo test`, so that no lit test can be forgotten.
//!
//! The binaries' directory is the one cargo built `commlir-opt` into for this test. The other
//! tools (`commlir-run`, `commlir-translate`, …) live in their own packages, which this
//! package cannot depend on; this test builds each one that exists in the workspace with the
//! same profile and target directory (`cargo build -p TOOL`, a no-op when it is fresh; cargo
//! does not hold the build lock while tests run, so this does not deadlock). Set
//! `COMMLIR_LIT_NO_BUILD=1` to skip those builds.
//!
//! Tools: lit and FileCheck from /usr/lib/llvm-22/bin (`make setup` installs them), or
//! `COMMLIR_LIT=/path/to/lit`. Extra arguments for lit: `COMMLIR_LIT_ARGS="--filter coll"`.

use std::path::{Path, PathBuf};
use std::process::Command;

const LLVM_BIN: &str = "/usr/lib/llvm-22/bin";
/// Tool packages under tools/ besides commlir-opt; each is built if its package exists.
const OTHER_TOOLS: &[&str] = &["commlir-run", "commlir-translate"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn find_lit() -> PathBuf {
    if let Some(p) = std::env::var_os("COMMLIR_LIT") {
        return PathBuf::from(p);
    }
    let llvm = Path::new(LLVM_BIN).join("lit");
    if llvm.is_file() {
        return llvm;
    }
    on_path("lit-22")
        .or_else(|| on_path("lit"))
        .unwrap_or_else(|| {
            panic!(
                "lit not found (looked for {LLVM_BIN}/lit, lit-22 and lit on PATH): \
             run `make setup`, which installs llvm-22-tools (lit, FileCheck, not, count)"
            )
        })
}

/// Builds the other tools into `bin_dir` (same profile, same target directory).
fn build_other_tools(root: &Path, bin_dir: &Path) {
    if std::env::var_os("COMMLIR_LIT_NO_BUILD").is_some() {
        return;
    }
    let profile = bin_dir
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("debug")
        .to_string();
    let target_dir = bin_dir.parent().expect("target directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    for tool in OTHER_TOOLS {
        if !root.join("tools").join(tool).join("Cargo.toml").is_file() {
            continue;
        }
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(root)
            .args(["build", "--quiet", "-p", tool, "--target-dir"])
            .arg(target_dir);
        match profile.as_str() {
            "debug" => {}
            "release" => {
                cmd.arg("--release");
            }
            other => {
                cmd.args(["--profile", other]);
            }
        }
        let status = cmd
            .status()
            .unwrap_or_else(|e| panic!("could not run cargo to build {tool}: {e}"));
        assert!(status.success(), "`cargo build -p {tool}` failed");
        assert!(
            bin_dir.join(tool).is_file(),
            "{tool} was built but is not in {}",
            bin_dir.display()
        );
    }
}

#[test]
fn lit_suite() {
    let root = repo_root();
    let opt = PathBuf::from(env!("CARGO_BIN_EXE_commlir-opt"));
    let bin_dir = opt.parent().expect("binaries' directory").to_path_buf();
    let lit = find_lit();
    for tool in ["FileCheck", "not", "count"] {
        let p = Path::new(LLVM_BIN).join(tool);
        assert!(
            p.is_file(),
            "{} not found: run `make setup`, which installs llvm-22-tools",
            p.display()
        );
    }
    build_other_tools(&root, &bin_dir);

    let mut cmd = Command::new(&lit);
    cmd.current_dir(&root)
        .arg("-v")
        .arg(format!("--param=commlir_bin_dir={}", bin_dir.display()));
    if let Ok(extra) = std::env::var("COMMLIR_LIT_ARGS") {
        cmd.args(extra.split_whitespace());
    }
    cmd.arg(root.join("test"));
    // lit's own output goes straight to the terminal, like a plain `lit -v test/` run.
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("could not run {}: {e}", lit.display()));
    assert!(
        status.success(),
        "lit reported failures (re-run one with: {} -v --param commlir_bin_dir={} test/PATH.mlir)",
        lit.display(),
        bin_dir.display()
    );
}
