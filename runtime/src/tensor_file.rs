//! Arguments read from, and results written to, safetensors files (`commlir-run --inputs` /
//! `--outputs`), so that the tensors a PyTorch program uses go through commlir unchanged.
//!
//! A file name is a *pattern*: `{rank}` stands for the rank (`in_{rank}.safetensors` is
//! `in_0.safetensors`, `in_1.safetensors`, …); a pattern without it is one file every rank
//! reads. The tensors of a file are matched to the entry function's arguments by name: the
//! argument's SSA name in the source (`%x` → `x`, see [`entry_arg_names`]), with `arg{i}`
//! always accepted for argument `i`. Element type and shape must match the argument exactly;
//! nothing is converted, so every bit pattern (bf16 included) goes in and comes out as is.
//!
//! | element type | safetensors dtype |
//! |---|---|
//! | `f16`, `bf16`, `f32`, `f64` | `F16`, `BF16`, `F32`, `F64` |
//! | `i1` | `BOOL` (one byte, 0 or 1) |
//! | `i8`…`i64`, `si8`…`si64` | `I8`…`I64` |
//! | `ui8`…`ui64` | `U8`…`U64` |
//! | `index` | `I64` |
//!
//! Results are written as `result{i}`, one file per rank, with the header's metadata entry
//! `commlir` naming the entry function, the rank and the world size
//! (`{"entry":"main","rank":0,"world_size":2}`).

use crate::cuda::{tensor_bytes, tensor_from_bytes};
use crate::output::RankResults;
use crate::tensor::{ElemType, Tensor, TensorType};
use commlir_ir::{Context, LocKind, OpId, Signedness};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Where the arguments come from when they are not generated: `--inputs PATTERN`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InputFiles {
    /// The file name, `{rank}` standing for the rank.
    pub pattern: String,
    /// Whether an argument without a tensor in the file falls back to its generated input
    /// (`--inputs-partial`) instead of being an error.
    pub partial: bool,
}

/// Why the inputs could not be read: `arg` is the argument the problem is about, if any, so
/// that the sim can report it at the entry function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    pub arg: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// `pattern` with every `{rank}` replaced by `rank`.
pub fn rank_path(pattern: &str, rank: usize) -> String {
    pattern.replace("{rank}", &rank.to_string())
}

/// Whether `pattern` names one file per rank.
pub fn is_per_rank(pattern: &str) -> bool {
    pattern.contains("{rank}")
}

/// The safetensors dtype holding elements of `e` bit for bit.
pub fn dtype_of(e: ElemType) -> Dtype {
    match e {
        ElemType::F16 => Dtype::F16,
        ElemType::BF16 => Dtype::BF16,
        ElemType::F32 => Dtype::F32,
        ElemType::F64 => Dtype::F64,
        ElemType::Index => Dtype::I64,
        ElemType::Int { width: 1, .. } => Dtype::BOOL,
        ElemType::Int {
            width,
            signedness: Signedness::Unsigned,
        } => match width {
            0..=8 => Dtype::U8,
            9..=16 => Dtype::U16,
            17..=32 => Dtype::U32,
            _ => Dtype::U64,
        },
        ElemType::Int { width, .. } => match width {
            0..=8 => Dtype::I8,
            9..=16 => Dtype::I16,
            17..=32 => Dtype::I32,
            _ => Dtype::I64,
        },
    }
}

/// The MLIR spelling of a safetensors dtype's elements (what an argument of that type would
/// be written as), for diagnostics.
fn dtype_mlir(d: Dtype) -> String {
    match d {
        Dtype::BOOL => "i1".into(),
        Dtype::U8 => "ui8".into(),
        Dtype::I8 => "i8".into(),
        Dtype::U16 => "ui16".into(),
        Dtype::I16 => "i16".into(),
        Dtype::U32 => "ui32".into(),
        Dtype::I32 => "i32".into(),
        Dtype::U64 => "ui64".into(),
        Dtype::I64 => "i64".into(),
        Dtype::F16 => "f16".into(),
        Dtype::BF16 => "bf16".into(),
        Dtype::F32 => "f32".into(),
        Dtype::F64 => "f64".into(),
        Dtype::F8_E4M3 => "f8E4M3FN".into(),
        Dtype::F8_E5M2 => "f8E5M2".into(),
        Dtype::F8_E4M3FNUZ => "f8E4M3FNUZ".into(),
        Dtype::F8_E5M2FNUZ => "f8E5M2FNUZ".into(),
        Dtype::F8_E8M0 => "f8E8M0FNU".into(),
        Dtype::C64 => "complex<f32>".into(),
        other => format!("{other:?}"),
    }
}

/// `tensor<AxBxT>` for a tensor of the file.
fn file_type(d: Dtype, shape: &[usize]) -> String {
    let mut s = String::from("tensor<");
    for n in shape {
        let _ = write!(s, "{n}x");
    }
    s.push_str(&dtype_mlir(d));
    s.push('>');
    s
}

/// The name each argument of `entry` has in `source`, the program's text: the SSA name the
/// argument is written with (`%x: tensor<…>` → `x`, found at the argument's location), or
/// the name of a `loc("name")` attached to it. `None` where neither is known (a program
/// printed by the tools names its arguments `%arg0`, `%arg1`, …, which are the `arg{i}`
/// aliases every argument has anyway).
pub fn entry_arg_names(ctx: &Context, entry: OpId, source: Option<&str>) -> Vec<Option<String>> {
    let Some(&region) = ctx.op_regions(entry).first() else {
        return Vec::new();
    };
    let Some(&block) = ctx.region_blocks(region).first() else {
        return Vec::new();
    };
    let lines: Vec<&str> = source.map(|s| s.lines().collect()).unwrap_or_default();
    ctx.block_args(block)
        .iter()
        .map(|&v| {
            let loc = ctx.value_loc(v)?;
            match ctx.loc_kind(loc) {
                LocKind::FileLineCol { line, col, .. } => {
                    let text = lines.get((*line as usize).checked_sub(1)?)?;
                    let rest = text.get((*col as usize).checked_sub(1)?..)?;
                    ssa_name(rest)
                }
                LocKind::Name { name, .. } => Some(ctx.ident_str(*name).to_string()),
                _ => None,
            }
        })
        .collect()
}

/// The name of the SSA value `text` starts with (`%x_1: …` → `x_1`).
fn ssa_name(text: &str) -> Option<String> {
    let rest = text.strip_prefix('%')?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || "_$.-".contains(c)))
        .unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_string())
}

/// How argument `i` named `name` is shown in messages: `argument #0 (%x)`.
fn describe_arg(i: usize, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("argument #{i} (%{n})"),
        None => format!("argument #{i}"),
    }
}

/// The arguments of `rank` from its file: for argument `i` (of type `types[i]`, named
/// `names[i]`), the tensor named so, else `arg{i}`; `None` for an argument the file lacks
/// when `files.partial` (the caller generates it). Corrupt files, missing tensors and
/// tensors of another element type or shape are errors naming the tensor and both types.
pub fn read_inputs(
    files: &InputFiles,
    rank: usize,
    names: &[Option<String>],
    types: &[TensorType],
) -> Result<Vec<Option<Tensor>>, InputError> {
    let path = rank_path(&files.pattern, rank);
    let bytes = std::fs::read(&path).map_err(|e| InputError {
        arg: None,
        message: if is_per_rank(&files.pattern) {
            format!("cannot read '{path}', the inputs of rank {rank}: {e}")
        } else {
            format!("cannot read the inputs '{path}': {e}")
        },
    })?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| InputError {
        arg: None,
        message: format!("'{path}' is not a valid safetensors file: {e}"),
    })?;
    types
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            let name = names.get(i).and_then(|n| n.as_deref());
            let alias = format!("arg{i}");
            let key = name
                .filter(|n| st.tensor(n).is_ok())
                .map(str::to_string)
                .or_else(|| st.tensor(&alias).is_ok().then(|| alias.clone()));
            let Some(key) = key else {
                if files.partial {
                    return Ok(None);
                }
                let wanted = match name {
                    Some(n) if n != alias => format!("'{n}' (or '{alias}')"),
                    _ => format!("'{alias}'"),
                };
                let mut held = st.names();
                held.sort_unstable();
                let held = if held.is_empty() {
                    "none".to_string()
                } else {
                    held.join(", ")
                };
                return Err(InputError {
                    arg: Some(i),
                    message: format!(
                        "{}: '{path}' has no tensor {wanted}; it holds: {held}",
                        describe_arg(i, name)
                    ),
                });
            };
            let view = st.tensor(&key).map_err(|e| InputError {
                arg: Some(i),
                message: format!("tensor '{key}' in '{path}' cannot be read: {e}"),
            })?;
            tensor_from_view(&view, ty)
                .map(Some)
                .map_err(|found| InputError {
                    arg: Some(i),
                    message: format!(
                        "{}: tensor '{key}' in '{path}' {found}, expected {ty}",
                        describe_arg(i, name)
                    ),
                })
        })
        .collect()
}

/// The tensor `view` holds, if it is exactly of type `ty`; else what is wrong with it.
fn tensor_from_view(view: &TensorView<'_>, ty: &TensorType) -> Result<Tensor, String> {
    let (d, shape) = (view.dtype(), view.shape());
    if d != dtype_of(ty.elem) || shape != ty.shape.as_slice() {
        return Err(format!("has type {}", file_type(d, shape)));
    }
    let data = view.data();
    // `deserialize` checked the length against dtype and shape; checked again here because a
    // short buffer would make the conversion drop elements silently.
    if data.len() != ty.numel() * ty.elem.byte_width() {
        return Err(format!(
            "holds {} bytes for {} elements",
            data.len(),
            ty.numel()
        ));
    }
    if matches!(ty.elem, ElemType::Int { width: 1, .. }) {
        if let Some(pos) = data.iter().position(|b| *b > 1) {
            return Err(format!(
                "holds {} at element {pos}, which is not a bool (0 or 1)",
                data[pos]
            ));
        }
    }
    // Narrow integers (`i4` in a byte) must fit their width, or the run would see a value
    // its type cannot hold.
    if let ElemType::Int { width, .. } = ty.elem {
        if width > 1 && width % 8 != 0 {
            let t = tensor_from_bytes(ty, data);
            if tensor_bytes(&t) != data {
                return Err(format!("holds values that do not fit {}", ty.elem));
            }
            return Ok(t);
        }
    }
    Ok(tensor_from_bytes(ty, data))
}

/// The element type whose elements a safetensors dtype holds bit for bit (`BOOL` is `i1`,
/// `I8`…`I64` signless, `U8`…`U64` unsigned); `None` for the dtypes commlir has no element
/// type for (fp8, fp4, complex).
pub fn elem_of(d: Dtype) -> Option<ElemType> {
    let int = |width, signedness| Some(ElemType::Int { width, signedness });
    match d {
        Dtype::BOOL => int(1, Signedness::Signless),
        Dtype::I8 => int(8, Signedness::Signless),
        Dtype::I16 => int(16, Signedness::Signless),
        Dtype::I32 => int(32, Signedness::Signless),
        Dtype::I64 => int(64, Signedness::Signless),
        Dtype::U8 => int(8, Signedness::Unsigned),
        Dtype::U16 => int(16, Signedness::Unsigned),
        Dtype::U32 => int(32, Signedness::Unsigned),
        Dtype::U64 => int(64, Signedness::Unsigned),
        Dtype::F16 => Some(ElemType::F16),
        Dtype::BF16 => Some(ElemType::BF16),
        Dtype::F32 => Some(ElemType::F32),
        Dtype::F64 => Some(ElemType::F64),
        _ => None,
    }
}

/// The contents of a safetensors file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TensorFile {
    /// The tensors, sorted by name.
    pub tensors: Vec<(String, Tensor)>,
    /// The header's `__metadata__`.
    pub metadata: HashMap<String, String>,
}

/// Every tensor of the safetensors file at `path`, sorted by name, each in the element type
/// its dtype holds ([`elem_of`]); the file's metadata, if any. For tools and tests that read
/// what `--outputs` wrote.
pub fn read_tensors(path: &str) -> Result<TensorFile, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read '{path}': {e}"))?;
    let st = SafeTensors::deserialize(&bytes)
        .map_err(|e| format!("'{path}' is not a valid safetensors file: {e}"))?;
    let (_, meta) = SafeTensors::read_metadata(&bytes)
        .map_err(|e| format!("'{path}' is not a valid safetensors file: {e}"))?;
    let meta = meta
        .metadata()
        .as_ref()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    let mut out = st
        .iter()
        .map(|(name, view)| {
            let elem = elem_of(view.dtype()).ok_or_else(|| {
                format!(
                    "tensor '{name}' in '{path}' has type {}, which commlir cannot represent",
                    file_type(view.dtype(), view.shape())
                )
            })?;
            let ty = TensorType {
                elem,
                shape: view.shape().to_vec(),
            };
            tensor_from_view(&view, &ty)
                .map(|t| (name.to_string(), t))
                .map_err(|e| format!("tensor '{name}' in '{path}' {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(TensorFile {
        tensors: out,
        metadata: meta,
    })
}

/// The safetensors bytes of `tensors` (name, tensor), with `metadata` in the header.
pub fn tensors_bytes(
    tensors: &[(&str, &Tensor)],
    metadata: &[(&str, &str)],
) -> Result<Vec<u8>, String> {
    let bytes: Vec<Vec<u8>> = tensors.iter().map(|(_, t)| tensor_bytes(t)).collect();
    let views = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, t), data)| {
            TensorView::new(dtype_of(t.ty.elem), t.ty.shape.clone(), data)
                .map(|v| (name.to_string(), v))
                .map_err(|e| format!("cannot store tensor '{name}': {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let meta = (!metadata.is_empty()).then(|| {
        metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    });
    safetensors::serialize(views, meta).map_err(|e| format!("cannot serialize the tensors: {e}"))
}

/// The safetensors bytes of `rank`'s results: `result{i}` for result `i`. The header's
/// metadata holds one entry, `commlir`: a JSON object naming the entry function, the rank
/// and the world size. One entry, because the format keeps metadata in a hash map whose
/// order changes from run to run; inside it, serde_json sorts the keys, so equal results
/// give byte-identical files.
pub fn results_bytes(
    results: &[Tensor],
    entry: &str,
    rank: usize,
    world: usize,
) -> Result<Vec<u8>, String> {
    let names: Vec<String> = (0..results.len()).map(|i| format!("result{i}")).collect();
    let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(results).collect();
    let meta = serde_json::json!({"entry": entry, "rank": rank, "world_size": world}).to_string();
    tensors_bytes(&named, &[("commlir", &meta)])
}

/// Writes every rank's results to `pattern` (one file per rank: `{rank}` is required when
/// there is more than one rank in `results`, so that no rank overwrites another's file).
pub fn write_results(
    pattern: &str,
    results: &[RankResults],
    entry: &str,
    world: usize,
) -> Result<(), String> {
    if !is_per_rank(pattern) && world > 1 {
        return Err(format!(
            "--outputs '{pattern}': {world} ranks write one file each: put {{rank}} in the file name (e.g. out_{{rank}}.safetensors)"
        ));
    }
    for rr in results {
        let path = rank_path(pattern, rr.rank);
        let bytes = results_bytes(&rr.results, entry, rr.rank, world)?;
        std::fs::write(&path, bytes).map_err(|e| {
            format!(
                "cannot write the results of rank {} to '{path}': {e}",
                rr.rank
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dtype_bool_elem() -> ElemType {
        ElemType::Int {
            width: 1,
            signedness: Signedness::Signless,
        }
    }

    fn ty(elem: ElemType, shape: &[usize]) -> TensorType {
        TensorType {
            elem,
            shape: shape.to_vec(),
        }
    }

    #[test]
    fn ssa_names_stop_at_the_type() {
        assert_eq!(ssa_name("%x: tensor<4xf32>").as_deref(), Some("x"));
        assert_eq!(ssa_name("%w_in.1 : f32").as_deref(), Some("w_in.1"));
        assert_eq!(ssa_name("x"), None);
        assert_eq!(ssa_name("%:"), None);
    }

    #[test]
    fn every_element_type_round_trips_bit_for_bit() {
        let i = |width, signedness| ElemType::Int { width, signedness };
        let elems = [
            ElemType::BF16,
            ElemType::F16,
            ElemType::F32,
            ElemType::F64,
            i(1, Signedness::Signless),
            i(8, Signedness::Signless),
            i(16, Signedness::Signed),
            i(32, Signedness::Unsigned),
            i(64, Signedness::Unsigned),
            ElemType::Index,
        ];
        for (k, e) in elems.into_iter().enumerate() {
            let t = crate::inputs::generate(&ty(e, &[3, 5]), 7, 1, k);
            let file = results_bytes(std::slice::from_ref(&t), "f", 0, 1).unwrap();
            let dir = std::env::temp_dir().join(format!(
                "commlir-tensor-file-{}-{k}.safetensors",
                std::process::id()
            ));
            std::fs::write(&dir, &file).unwrap();
            let files = InputFiles {
                pattern: dir.to_string_lossy().into_owned(),
                partial: false,
            };
            let back = read_inputs(
                &files,
                0,
                &[Some("result0".into())],
                std::slice::from_ref(&t.ty),
            );
            let _ = std::fs::remove_file(&dir);
            assert_eq!(back.unwrap(), vec![Some(t)], "{e}");
        }
    }

    #[test]
    fn mismatches_name_both_types() {
        let view_bytes = [0u8; 8];
        let v = TensorView::new(Dtype::BF16, vec![4], &view_bytes).unwrap();
        assert_eq!(
            tensor_from_view(&v, &ty(ElemType::F32, &[4])).unwrap_err(),
            "has type tensor<4xbf16>"
        );
        let b = [0u8, 1, 2];
        let v = TensorView::new(Dtype::BOOL, vec![3], &b).unwrap();
        assert!(tensor_from_view(&v, &ty(dtype_bool_elem(), &[3]))
            .unwrap_err()
            .contains("not a bool"));
    }
}
