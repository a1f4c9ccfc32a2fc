//! Reading the compiled artifact (`commlir-translate --emit=artifact`): the container's
//! sections and the JSON manifest, with every field the runner relies on validated up front,
//! so that a truncated or foreign file is a diagnostic and never a crash inside the loader.
//!
//! The container (written by `codegen/src/artifact.rs`): 8 magic bytes `CMLIRART`, u32 LE
//! format version (1), u32 LE section count N, then N entries of 24 bytes (4-byte tag, u32
//! reserved, u64 LE offset, u64 LE size). Sections: `MANI` (manifest), `PTX\0` (PTX text,
//! NUL-terminated), `HOST` (x86-64 ELF shared object exporting `commlir_main`), `RTIR` (the
//! `rt` program as text, for diagnostics).

use crate::tensor::{ElemType, TensorType};
use commlir_ir::Signedness;
use serde::Deserialize;

/// The magic bytes that open every artifact.
pub const MAGIC: &[u8; 8] = b"CMLIRART";
/// The one container format version this runner reads.
pub const FORMAT_VERSION: u32 = 1;

/// One `coll.group` of the program, as the manifest lists it (index = position).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct GroupInfo {
    pub name: String,
    pub size: i64,
    /// `ranks` as written in the source (`[0, 1]`, `[[0, 1], [2, 3]]`, `array<i64: 0, 1>`),
    /// or empty for consecutive subgroups.
    #[serde(default)]
    pub ranks: String,
    #[serde(default)]
    pub symm_mem: bool,
}

/// One compiled function: its name, exported symbol, argument and result types as text.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct FunctionInfo {
    pub name: String,
    pub symbol: String,
    pub args: Vec<String>,
    pub results: Vec<String>,
    /// The function's pools in `pool_alloc` order (newer compilers; empty otherwise).
    #[serde(default)]
    pub pools: Vec<PoolInfo>,
    /// Arguments the caller may place in a pool slot (the program then skips its copy).
    #[serde(default)]
    pub arg_slots: Vec<SlotInfo>,
    /// Results the caller may take in a pool slot (`results[j]` = the slot's address on
    /// entry; the program then skips the allocation and the copy).
    #[serde(default)]
    pub result_slots: Vec<SlotInfo>,
    /// Per argument, the index in `groups` of the group its `coll.replicated` attribute
    /// names (`null`: the argument may differ per rank). Empty from older compilers: every
    /// argument then gets its own per-rank input.
    #[serde(default)]
    pub arg_replicated: Vec<Option<usize>>,
}

/// A pool a function allocates (docs/codegen.md, "Slots").
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct PoolInfo {
    pub kind: String,
    pub group: u32,
    pub size: u64,
    pub alignment: u64,
}

/// An argument or result slot: `index` of the argument/result, pool ordinal, byte offset.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct SlotInfo {
    pub index: usize,
    pub pool: usize,
    pub offset: u64,
    pub bytes: u64,
}

/// The manifest (`MANI`), the fields docs/codegen.md lists; unknown fields are ignored so
/// that a newer compiler's additions do not break an older runner.
#[derive(Clone, Debug, Deserialize)]
pub struct Manifest {
    pub abi_version: u32,
    pub entry: String,
    pub entry_symbol: String,
    #[serde(default)]
    pub kernels: Vec<String>,
    #[serde(default)]
    pub num_events: u32,
    #[serde(default)]
    pub groups: Vec<GroupInfo>,
    pub functions: Vec<FunctionInfo>,
    /// The program's source text before lowering, when the compiler embeds it (used by
    /// `--check` to run the sim backend on the same program).
    #[serde(default)]
    pub source: Option<String>,
}

impl Manifest {
    /// The entry function's description.
    pub fn entry_function(&self) -> Result<&FunctionInfo, String> {
        self.functions
            .iter()
            .find(|f| f.name == self.entry)
            .ok_or_else(|| {
                format!(
                    "the manifest names entry @{} but lists no such function",
                    self.entry
                )
            })
    }
}

/// A loaded artifact: the manifest and the raw sections the runner needs.
#[derive(Clone, Debug)]
pub struct Artifact {
    pub manifest: Manifest,
    /// PTX text including its terminating NUL (what `cuModuleLoadData` reads).
    pub ptx: Vec<u8>,
    /// The host shared object.
    pub host: Vec<u8>,
    /// The `rt` program text (empty when absent).
    pub rt_ir: String,
}

/// One section: its tag and bytes.
pub type Section<'a> = ([u8; 4], &'a [u8]);

/// The sections of a container, by tag, in file order.
pub fn sections(bytes: &[u8]) -> Result<Vec<Section<'_>>, String> {
    let word = |o: usize, n: usize| -> Result<&[u8], String> {
        bytes
            .get(o..o + n)
            .ok_or_else(|| "truncated artifact header".to_string())
    };
    if bytes.get(..8) != Some(MAGIC.as_slice()) {
        return Err("not a commlir artifact (bad magic; compile with `commlir-translate --emit=artifact -o FILE`)".into());
    }
    let u32_at = |o: usize| -> Result<u32, String> {
        let b = word(o, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| -> Result<u64, String> {
        let mut a = [0u8; 8];
        a.copy_from_slice(word(o, 8)?);
        Ok(u64::from_le_bytes(a))
    };
    let version = u32_at(8)?;
    if version != FORMAT_VERSION {
        return Err(format!(
            "artifact format version {version} is not supported (this runner reads {FORMAT_VERSION})"
        ));
    }
    let n = u32_at(12)? as usize;
    // The table must fit in the file: this bounds `n` before anything is allocated.
    if n.saturating_mul(24).saturating_add(16) > bytes.len() {
        return Err("truncated artifact section table".into());
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let e = 16 + 24 * i;
        let mut tag = [0u8; 4];
        tag.copy_from_slice(word(e, 4)?);
        let off = usize::try_from(u64_at(e + 8)?).map_err(|_| "section offset too large")?;
        let size = usize::try_from(u64_at(e + 16)?).map_err(|_| "section size too large")?;
        let data = off
            .checked_add(size)
            .and_then(|end| bytes.get(off..end))
            .ok_or_else(|| {
                format!(
                    "section '{}' lies outside the file",
                    String::from_utf8_lossy(&tag).trim_end_matches('\0')
                )
            })?;
        out.push((tag, data));
    }
    Ok(out)
}

/// Parses and validates a whole artifact.
pub fn parse(bytes: &[u8]) -> Result<Artifact, String> {
    let secs = sections(bytes)?;
    let get = |tag: &[u8; 4]| secs.iter().find(|(t, _)| t == tag).map(|(_, d)| *d);
    let mani = get(b"MANI").ok_or("the artifact has no manifest (MANI section)")?;
    let manifest: Manifest = serde_json::from_slice(mani)
        .map_err(|e| format!("the artifact's manifest is not valid: {e}"))?;
    if manifest.abi_version != super::abi::ABI_VERSION {
        return Err(format!(
            "the artifact was compiled for runtime ABI version {}, this runner implements version {}",
            manifest.abi_version,
            super::abi::ABI_VERSION
        ));
    }
    manifest.entry_function()?;
    let mut ptx = get(b"PTX\0").unwrap_or_default().to_vec();
    if ptx.last() != Some(&0) {
        ptx.push(0);
    }
    let host = get(b"HOST")
        .ok_or("the artifact has no host program (HOST section)")?
        .to_vec();
    if host.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err("the artifact's host program is not an ELF shared object".into());
    }
    let rt_ir = String::from_utf8_lossy(get(b"RTIR").unwrap_or_default()).into_owned();
    Ok(Artifact {
        manifest,
        ptx,
        host,
        rt_ir,
    })
}

/// The shape and element type of a manifest type (`memref<8x1024xbf16>`, `tensor<4xf32>`, with
/// or without an encoding or layout after a comma).
pub fn parse_type(text: &str) -> Result<TensorType, String> {
    let bad = || {
        format!("unsupported argument or result type '{text}' (expected a static memref or tensor)")
    };
    let t = text.trim();
    let inner = t
        .strip_prefix("memref<")
        .or_else(|| t.strip_prefix("tensor<"))
        .and_then(|s| s.strip_suffix('>'))
        .ok_or_else(bad)?;
    // Drop an encoding / layout: the first top-level comma ends the shape.
    let inner = inner.split(',').next().unwrap_or("").trim();
    let mut parts: Vec<&str> = inner.split('x').collect();
    let elem = parts.pop().ok_or_else(bad)?;
    // `index` holds an 'x' of its own: put it back together.
    let elem = if elem.is_empty() && parts.last() == Some(&"inde") {
        parts.pop();
        "index"
    } else {
        elem
    };
    let shape = parts
        .iter()
        .map(|d| d.parse::<usize>().map_err(|_| bad()))
        .collect::<Result<Vec<_>, _>>()?;
    let elem = parse_elem(elem).ok_or_else(bad)?;
    Ok(TensorType { elem, shape })
}

/// An element type by its MLIR spelling.
pub fn parse_elem(s: &str) -> Option<ElemType> {
    let int = |rest: &str, signedness| {
        rest.parse::<u32>()
            .ok()
            .filter(|w| (1..=64).contains(w))
            .map(|width| ElemType::Int { width, signedness })
    };
    match s {
        "f16" => Some(ElemType::F16),
        "bf16" => Some(ElemType::BF16),
        "f32" => Some(ElemType::F32),
        "f64" => Some(ElemType::F64),
        "index" => Some(ElemType::Index),
        _ => {
            if let Some(r) = s.strip_prefix("si") {
                int(r, Signedness::Signed)
            } else if let Some(r) = s.strip_prefix("ui") {
                int(r, Signedness::Unsigned)
            } else {
                int(s.strip_prefix('i')?, Signedness::Signless)
            }
        }
    }
}

/// The subgroups of a group over `world` ranks, by the same rules as the sim backend
/// (`runtime/src/sim/groups.rs`): no `ranks` means consecutive subgroups of `size`; a flat
/// list is one subgroup; a list of lists a family of disjoint subgroups.
pub fn subgroups(g: &GroupInfo, world: usize) -> Result<Vec<Vec<usize>>, String> {
    let fail = |p: String| format!("group @{} {p}", g.name);
    let size = usize::try_from(g.size)
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(|| fail("has no valid size".into()))?;
    let text = g.ranks.trim();
    let rows: Vec<Vec<i64>> = if text.is_empty() {
        if !world.is_multiple_of(size) {
            return Err(fail(format!(
                "has size {size}, but {world} ranks run: the number of ranks must be a multiple of the group size"
            )));
        }
        return Ok((0..world / size)
            .map(|i| (i * size..(i + 1) * size).collect())
            .collect());
    } else {
        parse_rank_rows(text).ok_or_else(|| fail(format!("has a malformed 'ranks' ({text})")))?
    };
    let mut seen = vec![false; world];
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        if row.len() != size {
            return Err(fail(format!(
                "lists a subgroup of {} ranks, but its size is {size}",
                row.len()
            )));
        }
        let mut members = Vec::with_capacity(size);
        for r in row {
            let r = usize::try_from(r)
                .ok()
                .filter(|r| *r < world)
                .ok_or_else(|| fail(format!("names rank {r}, but only {world} ranks run")))?;
            if std::mem::replace(&mut seen[r], true) {
                return Err(fail(format!("lists rank {r} more than once")));
            }
            members.push(r);
        }
        out.push(members);
    }
    Ok(out)
}

/// `[0, 1]` / `array<i64: 0, 1>` → one row; `[[0, 1], [2, 3]]` (either inner spelling) →
/// several rows.
fn parse_rank_rows(text: &str) -> Option<Vec<Vec<i64>>> {
    // Normalize the dense-array spelling to brackets, then read a one- or two-level list.
    let norm = text
        .replace("array<i64:", "[")
        .replace("array<i64>", "[]")
        .replace('>', "]");
    let s = norm.trim();
    let body = s.strip_prefix('[')?.strip_suffix(']')?.trim();
    let nums = |t: &str| -> Option<Vec<i64>> {
        t.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(|x| x.split(':').next().unwrap_or("").trim().parse::<i64>().ok())
            .collect()
    };
    if !body.contains('[') {
        return Some(vec![nums(body)?]);
    }
    let mut rows = Vec::new();
    let mut rest = body;
    while let Some(start) = rest.find('[') {
        let end = rest[start..].find(']')? + start;
        rows.push(nums(&rest[start + 1..end])?);
        rest = &rest[end + 1..];
    }
    Some(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per-argument replication is optional: older manifests load with none, newer ones name
    /// the group of each replicated argument, and both agree with the sim's input rule.
    #[test]
    fn manifest_replication_is_optional() {
        let old = r#"{"abi_version": 1, "entry": "f", "entry_symbol": "commlir_main",
            "functions": [{"name": "f", "symbol": "commlir_fn_f", "args": ["memref<4xf32>"], "results": []}]}"#;
        let m: Manifest = serde_json::from_str(old).unwrap();
        assert!(m.functions[0].arg_replicated.is_empty());
        let new = r#"{"abi_version": 1, "entry": "f", "entry_symbol": "commlir_main",
            "groups": [{"name": "tp", "size": 2}],
            "functions": [{"name": "f", "symbol": "commlir_fn_f", "args": ["memref<4xf32>", "memref<4xf32>"],
                "results": [], "arg_replicated": [0, null]}]}"#;
        let m: Manifest = serde_json::from_str(new).unwrap();
        assert_eq!(m.functions[0].arg_replicated, vec![Some(0), None]);
        let subs = subgroups(&m.groups[0], 4).unwrap();
        let sources: Vec<usize> = (0..4)
            .map(|r| crate::inputs::replicated_input_rank(&subs, r))
            .collect();
        assert_eq!(sources, vec![0, 0, 2, 2]);
    }

    #[test]
    fn types_parse_with_and_without_encodings() {
        let t = parse_type("memref<8x1024xbf16>").unwrap();
        assert_eq!((t.shape, t.elem), (vec![8, 1024], ElemType::BF16));
        let t = parse_type("tensor<4xf32, #comm.buffer<nccl, @tp>>").unwrap();
        assert_eq!((t.shape, t.elem), (vec![4], ElemType::F32));
        let t = parse_type("memref<f32>").unwrap();
        assert!(t.shape.is_empty());
        let t = parse_type("memref<3xindex>").unwrap();
        assert_eq!(t.elem, ElemType::Index);
        assert!(parse_type("memref<?x4xf32>").is_err());
        assert!(parse_type("!rt.pool").is_err());
    }

    #[test]
    fn rank_lists_in_every_spelling() {
        let g = |ranks: &str, size| GroupInfo {
            name: "g".into(),
            size,
            ranks: ranks.into(),
            symm_mem: false,
        };
        assert_eq!(
            subgroups(&g("", 2), 4).unwrap(),
            vec![vec![0, 1], vec![2, 3]]
        );
        assert_eq!(subgroups(&g("[1, 0]", 2), 2).unwrap(), vec![vec![1, 0]]);
        assert_eq!(
            subgroups(&g("array<i64: 0, 2>", 2), 4).unwrap(),
            vec![vec![0, 2]]
        );
        assert_eq!(
            subgroups(&g("[[0, 2], [1, 3]]", 2), 4).unwrap(),
            vec![vec![0, 2], vec![1, 3]]
        );
        assert_eq!(
            subgroups(&g("[array<i64: 0, 2>, array<i64: 1, 3>]", 2), 4).unwrap(),
            vec![vec![0, 2], vec![1, 3]]
        );
        assert!(subgroups(&g("", 3), 4).is_err());
        assert!(subgroups(&g("[0, 0]", 2), 2).is_err());
        assert!(subgroups(&g("[0, 5]", 2), 2).is_err());
    }
}
