//! The comm-buffer tensor encoding `#comm.buffer<KIND, @group>` and the `!comm.work` type.

use commlir_ir::{AttrKind, CommBufferKind, Context, Type, TypeKind};

/// A decoded `#comm.buffer<KIND, @group>` encoding.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BufferEncoding {
    pub kind: CommBufferKind,
    pub group: String,
}

impl BufferEncoding {
    /// The kind's spelling (`nccl`, `symm_mem`).
    pub fn kind_str(&self) -> &'static str {
        kind_str(self.kind)
    }
}

/// The spelling of a buffer kind.
pub fn kind_str(k: CommBufferKind) -> &'static str {
    match k {
        CommBufferKind::Nccl => "nccl",
        CommBufferKind::SymmMem => "symm_mem",
    }
}

/// A decoded `#comm.buffer<KIND, @group>` encoding whose group name is borrowed from the
/// interned attribute: what the verifiers read, with no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BufferEncodingRef<'a> {
    pub kind: CommBufferKind,
    pub group: &'a str,
}

impl BufferEncodingRef<'_> {
    /// An owned copy.
    pub fn to_owned_encoding(&self) -> BufferEncoding {
        BufferEncoding {
            kind: self.kind,
            group: self.group.to_string(),
        }
    }
}

/// The comm-buffer encoding of a tensor type, if it has one.
pub fn buffer_encoding(ctx: &Context, t: Type) -> Option<BufferEncoding> {
    buffer_encoding_ref(ctx, t).map(|e| e.to_owned_encoding())
}

/// The comm-buffer encoding of a tensor type, if it has one, borrowed.
pub fn buffer_encoding_ref(ctx: &Context, t: Type) -> Option<BufferEncodingRef<'_>> {
    let TypeKind::Tensor {
        encoding: Some(enc),
        ..
    } = ctx.type_kind(t)
    else {
        return None;
    };
    let AttrKind::Dialect { text, .. } = ctx.attr_kind(*enc) else {
        return None;
    };
    let body = text.strip_prefix("comm.buffer<")?.strip_suffix('>')?;
    let (kind, group) = decode_body(body)?;
    Some(BufferEncodingRef { kind, group })
}

/// Decodes `KIND, @group` (the text between `comm.buffer<` and `>`).
fn decode_body(body: &str) -> Option<(CommBufferKind, &str)> {
    // The spelling `buffer_type` writes, with a bare group name, decodes without the general
    // path's trimming (to the same result); anything else takes that path.
    for (spelling, kind) in [
        ("nccl, @", CommBufferKind::Nccl),
        ("symm_mem, @", CommBufferKind::SymmMem),
    ] {
        if let Some(group) = body.strip_prefix(spelling) {
            if !group.is_empty() && group.bytes().all(is_bare_symbol_byte) {
                return Some((kind, group));
            }
        }
    }
    decode_body_general(body)
}

/// [`decode_body`] for any spelling: spaces around the kind and the group, a quoted group.
fn decode_body_general(body: &str) -> Option<(CommBufferKind, &str)> {
    let (kind, group) = body.split_once(',')?;
    let kind = match kind.trim() {
        "nccl" => CommBufferKind::Nccl,
        "symm_mem" => CommBufferKind::SymmMem,
        _ => return None,
    };
    let group = group.trim().strip_prefix('@')?;
    let group = group.trim_matches('"');
    if group.is_empty() {
        return None;
    }
    Some((kind, group))
}

/// Whether `b` may appear in a symbol name printed without quotes (`@tp`, `@dp.1`).
fn is_bare_symbol_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'$' | b'-')
}

/// Whether `t` is a comm buffer.
pub fn is_comm_buffer(ctx: &Context, t: Type) -> bool {
    buffer_encoding_ref(ctx, t).is_some()
}

/// `t` (a ranked tensor) with the encoding `#comm.buffer<kind, @group>`.
pub fn buffer_type(ctx: &mut Context, t: Type, kind: CommBufferKind, group: &str) -> Type {
    let TypeKind::Tensor { shape, elem, .. } = ctx.type_kind(t).clone() else {
        return t;
    };
    let dialect = ctx.ident("comm");
    let text = if group.bytes().all(is_bare_symbol_byte) {
        format!("comm.buffer<{}, @{group}>", kind_str(kind))
    } else {
        format!("comm.buffer<{}, @\"{group}\">", kind_str(kind))
    };
    let enc = ctx.attr(AttrKind::Dialect { dialect, text });
    ctx.ty(TypeKind::Tensor {
        shape,
        elem,
        encoding: Some(enc),
    })
}

/// The `!comm.work` handle type.
pub fn work_type(ctx: &mut Context) -> Type {
    let dialect = ctx.ident("comm");
    ctx.ty(TypeKind::Dialect {
        dialect,
        text: "comm.work".into(),
    })
}

/// Whether `t` is `!comm.work`.
pub fn is_work_type(ctx: &Context, t: Type) -> bool {
    matches!(ctx.type_kind(t), TypeKind::Dialect { text, .. } if text == "comm.work")
}

#[cfg(test)]
mod tests {
    use super::{decode_body, decode_body_general};

    /// The fast path decodes exactly what the general one does, on spellings near the one
    /// `buffer_type` writes (every combination of a few pieces).
    #[test]
    fn fast_decoding_matches_general() {
        let kinds = ["nccl", "symm_mem", " nccl", "nccl ", "NCCL", "", "symm"];
        let seps = [",", ", ", ",  ", ", @", ",@", " ,", ""];
        let groups = [
            "@tp", "tp", "@\"tp\"", "@\"a b\"", "@", "@\"\"", "@tp ", "@ tp", "@dp.1", "@a-b$c_d",
            "@t,p", "@t\u{e9}", "@\"", "@tp\"", "\"tp\"", "@tp>",
        ];
        let mut n = 0;
        for k in kinds {
            for s in seps {
                for g in groups {
                    let body = format!("{k}{s}{g}");
                    assert_eq!(decode_body(&body), decode_body_general(&body), "{body:?}");
                    n += 1;
                }
            }
        }
        assert_eq!(n, kinds.len() * seps.len() * groups.len());
        assert!(decode_body("nccl, @tp").is_some());
    }
}
