//! The artifact `commlir-translate --emit=artifact -o prog.commlir` writes and
//! `commlir-run --backend=cuda` loads: one file, a fixed header, a section table, sections.
//!
//! ```text
//! offset 0   8 bytes  magic "CMLIRART"
//!            u32 LE   format version (1)
//!            u32 LE   number of sections N
//! offset 16  N × 24 bytes: tag (4 ASCII bytes), u32 LE reserved (0), u64 LE offset, u64 LE size
//! then       the sections' bytes (each section starts 16-byte aligned)
//! ```
//!
//! Sections: `MANI` (JSON manifest), `PTX\0` (PTX text, NUL-terminated), `HOST` (x86-64 ELF
//! shared object with `commlir_main`), `RTIR` (the `rt` program, text, for diagnostics).
//! docs/codegen.md gives the manifest's fields and the loading protocol.

/// The magic bytes.
pub const MAGIC: &[u8; 8] = b"CMLIRART";
/// The container format version.
pub const FORMAT_VERSION: u32 = 1;

/// A section tag.
pub type Tag = [u8; 4];
pub const MANIFEST: Tag = *b"MANI";
pub const PTX: Tag = *b"PTX\0";
pub const HOST: Tag = *b"HOST";
pub const RT_IR: Tag = *b"RTIR";

/// Serializes sections into the container.
pub fn write(sections: &[(Tag, &[u8])]) -> Vec<u8> {
    let align = |n: usize| n.div_ceil(16) * 16;
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    let mut offset = align(16 + 24 * sections.len());
    for (tag, data) in sections {
        out.extend_from_slice(tag);
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(offset as u64).to_le_bytes());
        out.extend_from_slice(&(data.len() as u64).to_le_bytes());
        offset = align(offset + data.len());
    }
    for (_, data) in sections {
        out.resize(align(out.len()), 0);
        out.extend_from_slice(data);
    }
    out
}

/// Reads the container back: the sections by tag (what a loader does; used by the tests).
pub fn read(bytes: &[u8]) -> Result<Vec<(Tag, &[u8])>, String> {
    let u32_at = |o: usize| -> Result<u32, String> {
        bytes
            .get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| "truncated header".to_string())
    };
    let u64_at = |o: usize| -> Result<u64, String> {
        let b = bytes.get(o..o + 8).ok_or("truncated section table")?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    };
    if bytes.get(..8) != Some(MAGIC.as_slice()) {
        return Err("not a commlir artifact (bad magic)".into());
    }
    if u32_at(8)? != FORMAT_VERSION {
        return Err(format!(
            "unsupported artifact format version {}",
            u32_at(8)?
        ));
    }
    let n = u32_at(12)? as usize;
    let mut out = Vec::with_capacity(n.min(64));
    for i in 0..n {
        let e = 16 + 24 * i;
        let tag: Tag = bytes
            .get(e..e + 4)
            .ok_or("truncated section table")?
            .try_into()
            .map_err(|_| "bad tag")?;
        let off = u64_at(e + 8)? as usize;
        let size = u64_at(e + 16)? as usize;
        let data = off
            .checked_add(size)
            .and_then(|end| bytes.get(off..end))
            .ok_or("section out of bounds")?;
        out.push((tag, data));
    }
    Ok(out)
}
