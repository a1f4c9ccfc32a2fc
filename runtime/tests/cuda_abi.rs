//! The C ABI (`commlir_dialects::rt::abi`, shared by the runner and the code generator)
//! against the header the host program is compiled for (`codegen/include/commlir_rt.h`): field names and order, offsets,
//! size, and the dtype / reduction / stream / pool codes. Needs no GPU.

use commlir_runtime::cuda::abi::{self, CommlirRtApi};
use std::mem::{offset_of, size_of};

fn header() -> String {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../codegen/include/commlir_rt.h"
    );
    std::fs::read_to_string(p).expect("codegen/include/commlir_rt.h")
}

/// The function-pointer field names of `struct commlir_rt_api`, in order: every `(*name)`.
fn header_fields(h: &str) -> Vec<String> {
    let start = h.find("typedef struct commlir_rt_api").expect("struct");
    let body = &h[start..h[start..].find("} commlir_rt_api;").expect("end") + start];
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find("(*") {
        let tail = &rest[i + 2..];
        let end = tail.find(')').expect(")");
        out.push(tail[..end].trim().to_string());
        rest = &tail[end..];
    }
    out
}

/// The value of `NAME = V` in the header's enums.
fn header_enum(h: &str, name: &str) -> u32 {
    let i = h
        .find(&format!("{name} ="))
        .unwrap_or_else(|| panic!("{name}"));
    let v: String = h[i + name.len() + 2..]
        .trim_start()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    v.parse().unwrap()
}

#[test]
fn fields_match_the_header_in_order() {
    let h = header();
    let fields = header_fields(&h);
    assert_eq!(
        fields,
        abi::API_FIELDS,
        "field order differs from the header"
    );
    assert!(h.contains(&format!(
        "({} in version {})",
        abi::API_FIELDS.len(),
        abi::ABI_VERSION
    )));
}

#[test]
fn layout_is_two_u32_then_pointers() {
    // x86-64 C layout: two uint32_t, then 8-byte function pointers, no padding.
    assert_eq!(offset_of!(CommlirRtApi, abi_version), 0);
    assert_eq!(offset_of!(CommlirRtApi, num_fns), 4);
    let offsets = [
        offset_of!(CommlirRtApi, alloc),
        offset_of!(CommlirRtApi, free),
        offset_of!(CommlirRtApi, pool_alloc),
        offset_of!(CommlirRtApi, pool_free),
        offset_of!(CommlirRtApi, launch),
        offset_of!(CommlirRtApi, gemm),
        offset_of!(CommlirRtApi, all_reduce),
        offset_of!(CommlirRtApi, all_gather),
        offset_of!(CommlirRtApi, reduce_scatter),
        offset_of!(CommlirRtApi, all_to_all),
        offset_of!(CommlirRtApi, broadcast),
        offset_of!(CommlirRtApi, group_start),
        offset_of!(CommlirRtApi, group_end),
        offset_of!(CommlirRtApi, symm_fallback),
        offset_of!(CommlirRtApi, event_record),
        offset_of!(CommlirRtApi, stream_wait),
        offset_of!(CommlirRtApi, symm_pool_desc),
        offset_of!(CommlirRtApi, launch_on),
        offset_of!(CommlirRtApi, group_rank),
        offset_of!(CommlirRtApi, symm_peer_copy),
        offset_of!(CommlirRtApi, copy_on),
        offset_of!(CommlirRtApi, symm_peer_put),
        offset_of!(CommlirRtApi, attention),
        offset_of!(CommlirRtApi, attention_backward),
    ];
    assert_eq!(offsets.len(), abi::API_FIELDS.len());
    for (i, o) in offsets.iter().enumerate() {
        assert_eq!(*o, 8 + 8 * i, "field {}", abi::API_FIELDS[i]);
    }
    assert_eq!(size_of::<CommlirRtApi>(), 8 + 8 * abi::API_FIELDS.len());
    // The runner's table says what it implements.
    let api = &commlir_runtime::cuda::rank::API;
    assert_eq!(api.abi_version, abi::ABI_VERSION);
    assert_eq!(api.num_fns as usize, abi::API_FIELDS.len());
}

#[test]
fn codes_match_the_header() {
    let h = header();
    assert!(h.contains(&format!(
        "#define COMMLIR_RT_ABI_VERSION {}u",
        abi::ABI_VERSION
    )));
    for (name, code) in abi::DTYPES {
        assert_eq!(
            header_enum(&h, &format!("COMMLIR_{}", name.to_uppercase())),
            *code,
            "{name}"
        );
    }
    let red = [
        ("sum", "SUM"),
        ("product", "PROD"),
        ("max", "MAX"),
        ("min", "MIN"),
        ("avg", "AVG"),
    ];
    for (name, c) in red {
        assert_eq!(
            header_enum(&h, &format!("COMMLIR_{c}")),
            abi::code(abi::REDUCE_OPS, name).unwrap()
        );
    }
    assert_eq!(
        header_enum(&h, "COMMLIR_PREMUL_SUM_POW2"),
        abi::PREMUL_SUM_POW2
    );
    for f in [0.5, 0.25, 2.0, -1.0, 1.0 / 65536.0] {
        let c = abi::premul_code(f).unwrap();
        assert_eq!(abi::premul_factor(c), Some(f));
        assert!(abi::REDUCE_OPS.iter().all(|(_, r)| *r != c));
    }
    assert_eq!(abi::premul_code(0.3), None);
    assert_eq!(
        abi::premul_factor(abi::code(abi::REDUCE_OPS, "avg").unwrap()),
        None
    );
    assert_eq!(
        header_enum(&h, "COMMLIR_STREAM_COMPUTE"),
        abi::STREAM_COMPUTE
    );
    assert_eq!(header_enum(&h, "COMMLIR_STREAM_COMM"), abi::STREAM_COMM);
    assert_eq!(header_enum(&h, "COMMLIR_POOL_NCCL"), abi::POOL_NCCL);
    assert_eq!(header_enum(&h, "COMMLIR_POOL_SYMM_MEM"), abi::POOL_SYMM_MEM);
    for (name, code) in abi::SYMM_COLLS {
        assert_eq!(
            header_enum(&h, &format!("COMMLIR_SYMM_{}", name.to_uppercase())),
            *code,
            "{name}"
        );
    }
    assert!(h.contains(&format!(
        "#define COMMLIR_SYMM_MAX_PEERS {}",
        abi::SYMM_MAX_PEERS
    )));
    assert!(h.contains(&format!(
        "#define COMMLIR_SYMM_MAX_BLOCKS {}",
        abi::SYMM_MAX_BLOCKS
    )));
}

#[test]
fn symm_desc_layout_matches_the_header() {
    use commlir_dialects::rt::abi::SymmDesc;
    // 8 + 8 pointers, status, timeout_ns, then two uint32_t: 152 bytes, 8-byte aligned.
    assert_eq!(offset_of!(SymmDesc, base), 0);
    assert_eq!(offset_of!(SymmDesc, signal), 64);
    assert_eq!(offset_of!(SymmDesc, status), 128);
    assert_eq!(offset_of!(SymmDesc, timeout_ns), 136);
    assert_eq!(offset_of!(SymmDesc, rank), 144);
    assert_eq!(offset_of!(SymmDesc, world), 148);
    assert_eq!(size_of::<SymmDesc>(), 152);
    assert_eq!(std::mem::align_of::<SymmDesc>(), 8);
    let h = header();
    let body = &h[h.find("typedef struct commlir_symm_desc").unwrap()..];
    let body = &body[..body.find('}').unwrap()];
    let fields: Vec<&str> = [
        "base[",
        "signal[",
        "status;",
        "timeout_ns;",
        "rank;",
        "world;",
    ]
    .into_iter()
    .filter(|f| body.contains(f))
    .collect();
    assert_eq!(fields.len(), 6, "commlir_symm_desc fields: {body}");
    let order: Vec<usize> = [
        "base[",
        "signal[",
        "status;",
        "timeout_ns;",
        "rank;",
        "world;",
    ]
    .iter()
    .map(|f| body.find(f).unwrap())
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "field order");
}

#[test]
fn the_runner_uses_the_one_definition_the_code_generator_uses() {
    // One definition, in the rt dialect: the runner's path names the same type and table.
    let same: fn(CommlirRtApi) -> commlir_dialects::rt::abi::CommlirRtApi = |x| x;
    let _ = same;
    assert_eq!(abi::API_FIELDS, commlir_dialects::rt::abi::API_FIELDS);
}
