//! PR #173513's argument registration as a library API: an op defined outside commlir
//! declares which operands need a comm buffer of which kind, and `coll-to-comm` realizes them
//! with no per-op code.

mod common;

use commlir_ir::{
    register_dialect, register_op, ArgDef, AttrConstraint, AttrDef, CommBufferKind,
    CommBufferOperand, Context, OpDef, Trait, TypeConstraint,
};

register_dialect!(pub EMBED = commlir_ir::opdef::DialectDef {
    name: "embed",
    summary: "An embedder's dialect",
    description: "Defined in a test crate.",
});

register_op!(pub FUSED_AG_MATMUL = OpDef {
    name: "embed.fused_all_gather_matmul",
    summary: "All-gather of `a` fused with a matmul, reading peers' symmetric memory",
    operands: &[
        ArgDef::one("a", TypeConstraint::StaticTensor),
        ArgDef::one("b", TypeConstraint::StaticTensor),
    ],
    results: &[ArgDef::one("c", TypeConstraint::StaticTensor)],
    attributes: &[AttrDef::required("group", AttrConstraint::SymbolRef)],
    traits: &[Trait::Collective, Trait::MemRead, Trait::Blocking, Trait::MemAlloc],
    comm_buffer_operands: &[CommBufferOperand { operand: "a", kind: CommBufferKind::SymmMem, group_attr: "group" }],
    ..OpDef::EMPTY
});

const PROGRAM: &str = r#"
coll.group @tp {size = 2 : i64, symm_mem}
func.func @f(%x: tensor<4x8xbf16>, %w: tensor<8x16xbf16>) -> (tensor<8x16xbf16>, tensor<4x8xbf16>) {
  %a = compute.gelu %x : tensor<4x8xbf16>
  %c = embed.fused_all_gather_matmul %a, %w {group = @tp} : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  %d = embed.fused_all_gather_matmul %x, %w {group = @tp} : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<8x16xbf16>
  return %c, %x : tensor<8x16xbf16>, tensor<4x8xbf16>
}
"#;

#[test]
fn embedder_op_operands_become_symm_mem_buffers() {
    let mut ctx = Context::new();
    let m = common::parse(&mut ctx, PROGRAM);
    common::run_pipeline(
        &mut ctx,
        m,
        "builtin.module(func.func(coll-to-comm))",
        PROGRAM,
    );
    let out = common::print(&ctx, m);
    // The gelu producer is realized directly in symmetric memory (no copy) ...
    assert!(
        out.contains("compute.gelu %arg0 : (tensor<4x8xbf16>) -> tensor<4x8xbf16, #comm.buffer<symm_mem, @tp>>"),
        "{out}"
    );
    // ... while the function argument is cloned into it.
    assert!(
        out.contains("compute.clone %arg0 : (tensor<4x8xbf16>) -> tensor<4x8xbf16, #comm.buffer<symm_mem, @tp>>"),
        "{out}"
    );
    assert_eq!(
        out.matches("embed.fused_all_gather_matmul").count(),
        2,
        "{out}"
    );
}
