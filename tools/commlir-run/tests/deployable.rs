//! `commlir-run` is the binary that is copied to GPU nodes on its own (DESIGN.md §1): under
//! 20 MB, with no LLVM or MLIR linked. Checked here on what is built:
//!
//! - the dependency graph of `commlir-run` holds no crate that links LLVM or MLIR;
//! - the binary that `cargo test` built needs no LLVM/MLIR shared library, defines or imports
//!   no LLVM/MLIR symbol, and what `strip` would keep of it (its loaded sections) is under
//!   20 MB;
//! - the release binary (`make build`, `make dist`) is under 20 MB as a file and passes the same
//!   linkage checks. `make dist` names its output in `COMMLIR_RUN_BINARY`, and then that file
//!   must exist; otherwise `target/release/commlir-run` is checked when it is present and not
//!   older than the workspace's Cargo.toml (whose profiles decide its size).

use std::path::{Path, PathBuf};
use std::process::Command;

const LIMIT_BYTES: u64 = 20 * 1000 * 1000;

/// Crates that link LLVM or MLIR (directly or through a `-sys` crate).
const LLVM_MLIR_CRATES: &[&str] = &[
    "llvm-sys",
    "mlir-sys",
    "inkwell",
    "melior",
    "tblgen",
    "commlir-codegen",
    "commlir-mlir-interop",
];

/// Symbols of LLVM or MLIR: the C++ namespaces, the C APIs, and the Rust crates that wrap them
/// (their names appear, length-prefixed, in Rust-mangled symbols).
fn is_llvm_mlir_symbol(name: &str) -> bool {
    let cxx = ["_ZN4llvm", "_ZNK4llvm", "_ZN4mlir", "_ZNK4mlir"];
    if cxx.iter().any(|p| name.starts_with(p)) {
        return true;
    }
    // C APIs: LLVMContextCreate, mlirContextCreate, ...
    for prefix in ["LLVM", "mlir"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            if rest.chars().next().is_some_and(|c| c.is_ascii_uppercase()) {
                return true;
            }
        }
    }
    [
        "8llvm_sys",
        "8mlir_sys",
        "7inkwell",
        "6melior",
        "15commlir_codegen",
        "20commlir_mlir_interop",
    ]
    .iter()
    .any(|c| name.contains(c))
}

fn is_llvm_mlir_library(needed: &str) -> bool {
    let l = needed.to_ascii_lowercase();
    l.starts_with("libllvm") || l.starts_with("libmlir") || l.starts_with("libclang")
}

/// What the checks read of an ELF64 little-endian file.
struct Elf {
    file_bytes: u64,
    /// Sum of the sizes of the sections loaded at run time (SHF_ALLOC): what `strip` keeps.
    loaded_bytes: u64,
    needed: Vec<String>,
    symbols: Vec<String>,
}

fn u16_at(b: &[u8], o: usize) -> usize {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize
}
fn u32_at(b: &[u8], o: usize) -> usize {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn c_str(b: &[u8], o: usize) -> String {
    let end = b[o..]
        .iter()
        .position(|&c| c == 0)
        .map_or(b.len(), |n| o + n);
    String::from_utf8_lossy(&b[o..end]).into_owned()
}

fn read_elf(path: &Path) -> Elf {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    assert!(
        b.len() > 64 && &b[..4] == b"\x7fELF" && b[4] == 2 && b[5] == 1,
        "{} is not a little-endian ELF64 file",
        path.display()
    );
    let (shoff, shentsize, shnum) = (
        u64_at(&b, 0x28) as usize,
        u16_at(&b, 0x3a),
        u16_at(&b, 0x3c),
    );
    struct Sh {
        ty: usize,
        flags: u64,
        offset: usize,
        size: usize,
        link: usize,
        entsize: usize,
    }
    let sections: Vec<Sh> = (0..shnum)
        .map(|i| {
            let h = shoff + i * shentsize;
            Sh {
                ty: u32_at(&b, h + 4),
                flags: u64_at(&b, h + 8),
                offset: u64_at(&b, h + 24) as usize,
                size: u64_at(&b, h + 32) as usize,
                link: u32_at(&b, h + 40),
                entsize: u64_at(&b, h + 56) as usize,
            }
        })
        .collect();
    const SHT_SYMTAB: usize = 2;
    const SHT_NOBITS: usize = 8;
    const SHT_DYNAMIC: usize = 6;
    const SHT_DYNSYM: usize = 11;
    const SHF_ALLOC: u64 = 2;
    const DT_NEEDED: u64 = 1;
    let mut elf = Elf {
        file_bytes: b.len() as u64,
        loaded_bytes: 0,
        needed: Vec::new(),
        symbols: Vec::new(),
    };
    for s in &sections {
        if s.flags & SHF_ALLOC != 0 && s.ty != SHT_NOBITS {
            elf.loaded_bytes += s.size as u64;
        }
        match s.ty {
            SHT_DYNAMIC => {
                let strtab = sections[s.link].offset;
                for e in (s.offset..s.offset + s.size).step_by(16) {
                    if u64_at(&b, e) == DT_NEEDED {
                        elf.needed
                            .push(c_str(&b, strtab + u64_at(&b, e + 8) as usize));
                    }
                }
            }
            SHT_SYMTAB | SHT_DYNSYM => {
                let strtab = sections[s.link].offset;
                let entsize = s.entsize.max(24);
                for e in (s.offset..s.offset + s.size).step_by(entsize) {
                    let name = u32_at(&b, e);
                    if name != 0 {
                        elf.symbols.push(c_str(&b, strtab + name));
                    }
                }
            }
            _ => {}
        }
    }
    elf
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn check_linkage(path: &Path, elf: &Elf) {
    let libs: Vec<&String> = elf
        .needed
        .iter()
        .filter(|n| is_llvm_mlir_library(n))
        .collect();
    assert!(
        libs.is_empty(),
        "{} needs LLVM/MLIR libraries: {libs:?}",
        path.display()
    );
    let syms: Vec<&String> = elf
        .symbols
        .iter()
        .filter(|s| is_llvm_mlir_symbol(s))
        .take(10)
        .collect();
    assert!(
        syms.is_empty(),
        "{} holds LLVM/MLIR symbols, e.g. {syms:?}",
        path.display()
    );
}

fn debug_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_commlir-run"))
}

#[test]
fn dependency_graph_has_no_llvm_or_mlir() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "tree",
            "-p",
            "commlir-run",
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--offline",
        ])
        .output()
        .expect("runs cargo tree");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        tree.contains("commlir-runtime"),
        "unexpected cargo tree output:\n{tree}"
    );
    for line in tree.lines() {
        let krate = line.split_whitespace().next().unwrap_or("");
        assert!(
            !LLVM_MLIR_CRATES.contains(&krate),
            "commlir-run depends on {krate}, which links LLVM or MLIR:\n{tree}"
        );
    }
}

#[test]
fn built_binary_links_no_llvm_or_mlir_and_fits() {
    let path = debug_binary();
    let elf = read_elf(&path);
    assert!(
        elf.symbols.iter().any(|s| s == "main"),
        "no symbol table read from {}",
        path.display()
    );
    check_linkage(&path, &elf);
    assert!(
        elf.loaded_bytes < LIMIT_BYTES,
        "{}: its loaded sections alone take {} (limit {})",
        path.display(),
        mb(elf.loaded_bytes),
        mb(LIMIT_BYTES)
    );
}

#[test]
fn release_binary_is_deployable() {
    let (path, required) = match std::env::var_os("COMMLIR_RUN_BINARY") {
        // A relative path is taken from the workspace root.
        Some(p) => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p),
            true,
        ),
        None => {
            let debug = debug_binary();
            let target = debug.parent().and_then(Path::parent).expect("target dir");
            (target.join("release").join("commlir-run"), false)
        }
    };
    if !required {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
        let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        match (modified(&path), modified(&manifest)) {
            (Some(bin), Some(toml)) if bin >= toml => {}
            (None, _) => {
                eprintln!(
                    "{}: not built (make build or make dist checks it)",
                    path.display()
                );
                return;
            }
            _ => {
                eprintln!(
                    "{}: older than Cargo.toml's profiles, not checked (rebuild: make build)",
                    path.display()
                );
                return;
            }
        }
    }
    let elf = read_elf(&path);
    check_linkage(&path, &elf);
    assert!(
        elf.file_bytes < LIMIT_BYTES,
        "{} is {} (limit {}): see Cargo.toml's [profile.release.package.commlir-run]",
        path.display(),
        mb(elf.file_bytes),
        mb(LIMIT_BYTES)
    );
    eprintln!(
        "{}: {}, no LLVM/MLIR linked",
        path.display(),
        mb(elf.file_bytes)
    );
}

#[test]
fn checks_recognize_llvm_and_mlir() {
    for s in [
        "_ZN4mlir11MLIRContextC1Ev",
        "_ZNK4llvm5Value7getTypeEv",
        "LLVMContextCreate",
        "mlirContextCreate",
        "_RNvNtCs1a2b_7inkwell7context7create",
        "_RNvCs1a2b_6melior4init",
    ] {
        assert!(is_llvm_mlir_symbol(s), "{s}");
    }
    for s in [
        "main",
        "_RNvXsK_NtCsgEmfK2I1SDS_4core3fmtNtB5_5ErrorNtB5_5Debug3fmt.llvm.11521998216995431474",
        "ncclAllReduce",
        "mlir",
        "_RNvCs1a2b_15commlir_runtime3run",
    ] {
        assert!(!is_llvm_mlir_symbol(s), "{s}");
    }
    assert!(is_llvm_mlir_library("libLLVM.so.22.1"));
    assert!(is_llvm_mlir_library("libMLIR.so.22.1"));
    assert!(!is_llvm_mlir_library("libc.so.6"));
}
