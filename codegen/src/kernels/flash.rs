//! `rt.flash_attention`: attention in one kernel on the tensor cores (`mma.sync` m16n8k16,
//! bf16 operands, f32 accumulators), the scores never leaving registers.
//!
//! A block is 4 warps; a work item is 64 query rows of one head, 16 per warp (items are taken
//! grid-stride, the rows with the most keys first when causal). A warp keeps its queries'
//! operand fragments in registers and walks the keys in tiles of 64: the 16×64 scores
//! `q·kᵀ` (8 × 8 `mma`s per 16 dims), scaled to base 2 and masked, update the running row
//! maximum and sum (online softmax), the probabilities are rounded to bf16 and multiplied
//! by the value tile into the 16×Dv output accumulators (the C fragments of the scores are
//! laid out as the A fragments of that product, so nothing moves between lanes). At the end
//! each row is divided by its sum and stored in bf16. Every operand fragment is loaded
//! straight from global memory as 32-bit pairs of adjacent elements, which needs `v`
//! transposed (`vt: Dv×Lk`, made by the lowering) so that a B fragment's key pairs are
//! adjacent too.
//!
//! Fragment layouts (PTX ISA, `mma.m16n8k16`, `g` = lane / 4, `t` = lane mod 4): A registers
//! hold rows `g`, `g + 8` × columns `2t, 2t + 1` and `2t + 8, 2t + 9`; B registers rows
//! (the contraction) `2t, 2t + 1` and `2t + 8, 2t + 9` × column `g`; C holds rows `g`,
//! `g + 8` × columns `2t, 2t + 1`.
//!
//! Each tile of keys and of transposed values is first copied into shared memory by the
//! whole block (16-byte coalesced loads), rows padded so that fragment reads are free of bank
//! conflicts, between two block barriers; the 4 warps then read their fragments from there.
//! The tile count is the block's (causal: up to its last row), so every warp passes the same
//! barriers; a warp's tiles past its own rows are fully masked and change nothing.

use super::{declare_intrinsic, Gen, R};
use commlir_ir::{Context as IrContext, OpId, Value};
use inkwell::module::Linkage;
use inkwell::values::{BasicValue, FloatValue, FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, IntPredicate};

/// Query rows per warp and per block; keys per tile.
const WARP_ROWS: u64 = 16;
const BLOCK_ROWS: u64 = 64;
const KEY_TILE: u64 = 64;
/// Threads of a block (`rt.launch`'s `block` for this kernel).
pub const FLASH_BLOCK: i64 = 128;
/// Padding of a shared-memory tile row (elements): rows 16 bytes apart modulo 128 make the
/// 8 rows × 4 pairs a fragment read touches fall in 32 distinct banks.
const PAD: u64 = 8;
/// The shared memory of the key and value tiles, sized for the largest head dim and value
/// width (128): `64 × (128 + PAD)` keys, then `128 × (64 + PAD)` transposed values, bf16.
const SMEM_ELEMS: u64 = KEY_TILE * (128 + PAD) + 128 * (KEY_TILE + PAD);

impl<'a, 'c> Gen<'a, 'c> {
    /// Generates the body of `rt.flash_attention` (`q: H×Lq×D`, `k: H×Lk×D`, `vt: H×Dv×Lk`
    /// → `H×Lq×Dv`, bf16) into `f`.
    pub(super) fn flash_attention(
        &mut self,
        ctx: &IrContext,
        f: FunctionValue<'c>,
        op: OpId,
        args: &[Value],
    ) -> R<()> {
        let dims = |v: Value| -> R<Vec<i64>> { Ok(self.kind_of(ctx, v)?.1) };
        let (qs, ks, vs) = (
            dims(ctx.operand(op, 0))?,
            dims(ctx.operand(op, 1))?,
            dims(ctx.operand(op, 2))?,
        );
        let (&[h, lq, d], &[_, lk, _], &[_, dv, _]) = (&qs[..], &ks[..], &vs[..]) else {
            return Err("flash attention takes rank-3 operands".into());
        };
        if !commlir_dialects::compute::flash_attention_supported(lq, lk, d, dv) {
            return Err(format!(
                "flash attention does not support {lq}×{lk} keys, d {d}, dv {dv}"
            ));
        }
        let scale = ctx
            .inherent_attr(op, "scale")
            .and_then(|a| ctx.attr_as_f64(a))
            .ok_or("requires 'scale'")?;
        let causal = ctx.inherent_attr(op, "causal").is_some();
        let param = |v: Value| -> R<PointerValue<'c>> {
            let i = args
                .iter()
                .position(|a| *a == v)
                .ok_or("operand not in kernel")?;
            self.param(f, i)
        };
        let (qp, kp, vp) = (
            param(ctx.operand(op, 0))?,
            param(ctx.operand(op, 1))?,
            param(ctx.operand(op, 2))?,
        );
        let op_ = self.param(f, args.len())?;
        let (h, lq, lk, d, dv) = (h as u64, lq as u64, lk as u64, d as u64, dv as u64);

        let cx = self.cx;
        let f32t = cx.f32_type();
        let i32t = cx.i32_type();
        let bf16x2 = cx.bf16_type().vec_type(2);
        let mma = declare_intrinsic(self.m, "llvm.nvvm.mma.m16n8k16.row.col.bf16", &[])?;
        let ex2 = self.intrinsic("llvm.nvvm.ex2.approx", f32t.into())?;
        let maxf = self.intrinsic("llvm.maxnum", f32t.into())?;
        let shfl = declare_intrinsic(self.m, "llvm.nvvm.shfl.sync.bfly.f32", &[])?;
        let smem = {
            const NAME: &str = "__commlir_flash_tiles";
            match self.m.get_global(NAME) {
                Some(g) => g.as_pointer_value(),
                None => {
                    let ty = cx.bf16_type().array_type(SMEM_ELEMS as u32);
                    let g = self.m.add_global(ty, Some(AddressSpace::from(3u16)), NAME);
                    g.set_linkage(Linkage::Internal);
                    g.set_initializer(&ty.get_poison());
                    g.set_alignment(16);
                    g.as_pointer_value()
                }
            }
        };
        let (k_ld, v_ld) = (d + PAD, KEY_TILE + PAD);
        let v_base = KEY_TILE * (128 + PAD); // the value tile's first element in `smem`

        // Per-thread state, promoted to registers (every index below is a constant).
        let entry = f.get_first_basic_block().ok_or("no entry")?;
        let nt_s = KEY_TILE / 8; // score n-tiles per key tile
        let nt_o = dv / 8; // output n-tiles
        let acc_t = f32t.array_type((nt_o * 4) as u32);
        let pair_t = f32t.array_type(2);
        let (o_acc, m_run, l_run) = {
            let bb = cx.create_builder();
            match entry.get_first_instruction() {
                Some(i) => bb.position_before(&i),
                None => bb.position_at_end(entry),
            }
            (
                b!(bb.build_alloca(acc_t, "o")),
                b!(bb.build_alloca(pair_t, "m")),
                b!(bb.build_alloca(pair_t, "l")),
            )
        };
        let slot = |g: &Self, arr: PointerValue<'c>, ty, i: u64| -> R<PointerValue<'c>> {
            Ok(unsafe {
                b!(g.b.build_in_bounds_gep(ty, arr, &[g.i64(0), g.i64(i)], "slot"))
            })
        };
        let getf = |g: &Self, arr, ty, i| -> R<FloatValue<'c>> {
            let p = slot(g, arr, ty, i)?;
            Ok(b!(g.b.build_load(f32t, p, "v")).into_float_value())
        };
        let setf = |g: &Self, arr, ty, i, v: FloatValue<'c>| -> R<()> {
            let p = slot(g, arr, ty, i)?;
            b!(g.b.build_store(p, v));
            Ok(())
        };
        // The i32 pair of adjacent bf16 elements `base[idx], base[idx + 1]`.
        let pair = |g: &Self, base: PointerValue<'c>, idx: IntValue<'c>| -> R<IntValue<'c>> {
            let p = unsafe { b!(g.b.build_in_bounds_gep(cx.bf16_type(), base, &[idx], "pp")) };
            let v = b!(g.b.build_load(i32t, p, "pair"));
            if let Some(ins) = v.as_instruction_value() {
                ins.set_alignment(4).map_err(|e| e.to_string())?;
            }
            Ok(v.into_int_value())
        };
        let pack = |g: &Self, lo: FloatValue<'c>, hi: FloatValue<'c>| -> R<IntValue<'c>> {
            let lo = b!(g.b.build_float_trunc(lo, cx.bf16_type(), "lo"));
            let hi = b!(g.b.build_float_trunc(hi, cx.bf16_type(), "hi"));
            let v = bf16x2.get_poison();
            let v = b!(g.b.build_insert_element(v, lo, i32t.const_zero(), "v0"));
            let v =
                b!(g.b.build_insert_element(v, hi, i32t.const_int(1, false), "v1"));
            Ok(b!(g.b.build_bit_cast(v, i32t, "packed")).into_int_value())
        };
        let mma4 = |g: &Self,
                    a: [IntValue<'c>; 4],
                    b: [IntValue<'c>; 2],
                    c: [FloatValue<'c>; 4]|
         -> R<[FloatValue<'c>; 4]> {
            let args = [
                a[0].into(),
                a[1].into(),
                a[2].into(),
                a[3].into(),
                b[0].into(),
                b[1].into(),
                c[0].into(),
                c[1].into(),
                c[2].into(),
                c[3].into(),
            ];
            let r = b!(g.b.build_call(mma, &args, "mma"))
                .try_as_basic_value()
                .basic()
                .ok_or("mma without value")?
                .into_struct_value();
            let mut out = [c[0]; 4];
            for (i, o) in out.iter_mut().enumerate() {
                *o = b!(g.b.build_extract_value(r, i as u32, "c")).into_float_value();
            }
            Ok(out)
        };
        // Combine with the other three lanes of the quad (the threads sharing a row).
        let quad = |g: &Self, v: FloatValue<'c>, max: bool| -> R<FloatValue<'c>> {
            let mut v = v;
            for off in [1u64, 2] {
                let o = g.shfl_bfly(shfl, v, off)?;
                v = if max {
                    g.call_f(maxf, &[v, o])?
                } else {
                    b!(g.b.build_float_add(v, o, "qs"))
                };
            }
            Ok(v)
        };

        let tid = self.sreg("llvm.nvvm.read.ptx.sreg.tid.x")?;
        let ctaid = self.sreg("llvm.nvvm.read.ptx.sreg.ctaid.x")?;
        let nctaid = self.sreg("llvm.nvvm.read.ptx.sreg.nctaid.x")?;
        let lane = b!(self.b.build_and(tid, self.i64(31), "lane"));
        let warp = b!(self.b.build_right_shift(tid, self.i64(5), false, "warp"));
        let gq = b!(self.b.build_right_shift(lane, self.i64(2), false, "g"));
        let tq = b!(self.b.build_and(lane, self.i64(3), "t"));
        let t2 = b!(self.b.build_int_mul(tq, self.i64(2), "t2"));
        let qblocks = lq / BLOCK_ROWS;
        // log2(e) folded into the scale: exp(x) = 2^(x·log2 e).
        let scale2 = f32t.const_float(scale * std::f64::consts::LOG2_E);
        let neg_inf = f32t.const_float(f64::NEG_INFINITY);

        self.counted(f, ctaid, self.i64(h * qblocks), nctaid, |g, item| {
            let head = b!(g.b.build_int_unsigned_div(item, g.i64(qblocks), "head"));
            let qb = b!(g.b.build_int_unsigned_rem(item, g.i64(qblocks), "qb"));
            // Causal: the blocks with the most keys first.
            let qb = if causal {
                b!(g.b.build_int_sub(g.i64(qblocks - 1), qb, "qbr"))
            } else {
                qb
            };
            let r0 = b!(g.b.build_int_mul(qb, g.i64(BLOCK_ROWS), "r0"));
            let wr = b!(g.b.build_int_mul(warp, g.i64(WARP_ROWS), "wr"));
            let r0 = b!(g.b.build_int_add(r0, wr, "r0w"));
            let row_a = b!(g.b.build_int_add(r0, gq, "ra")); // rows g and g + 8
            let row_b = b!(g.b.build_int_add(row_a, g.i64(8), "rb"));
            let hq = b!(g.b.build_int_mul(head, g.i64(lq * d), "hq"));
            let hk = b!(g.b.build_int_mul(head, g.i64(lk * d), "hk"));
            let hv = b!(g.b.build_int_mul(head, g.i64(dv * lk), "hv"));
            let ho = b!(g.b.build_int_mul(head, g.i64(lq * dv), "ho"));
            let at = |g: &Self,
                      base: IntValue<'c>,
                      row: IntValue<'c>,
                      ld: u64,
                      col: IntValue<'c>|
             -> R<IntValue<'c>> {
                let r = b!(g.b.build_int_mul(row, g.i64(ld), "r"));
                let r = b!(g.b.build_int_add(base, r, "rb"));
                Ok(b!(g.b.build_int_add(r, col, "ix")))
            };
            // The query fragments, one A operand per 16 dims.
            let mut qa = Vec::new();
            for kk in 0..d / 16 {
                let c0 = b!(g.b.build_int_add(t2, g.i64(kk * 16), "c0"));
                let c8 = b!(g.b.build_int_add(c0, g.i64(8), "c8"));
                qa.push([
                    pair(g, qp, at(g, hq, row_a, d, c0)?)?,
                    pair(g, qp, at(g, hq, row_b, d, c0)?)?,
                    pair(g, qp, at(g, hq, row_a, d, c8)?)?,
                    pair(g, qp, at(g, hq, row_b, d, c8)?)?,
                ]);
            }
            for i in 0..nt_o * 4 {
                setf(g, o_acc, acc_t, i, f32t.const_zero())?;
            }
            for r in 0..2 {
                setf(g, m_run, pair_t, r, neg_inf)?;
                setf(g, l_run, pair_t, r, f32t.const_zero())?;
            }
            // Key tiles: all of them, or (causal) up to the block's last row, the same for
            // every warp (they meet at the tiles' barriers).
            let tiles = if causal {
                let n = b!(g.b.build_int_mul(qb, g.i64(BLOCK_ROWS / KEY_TILE), "qt"));
                let n = b!(g.b.build_int_add(n, g.i64(BLOCK_ROWS / KEY_TILE), "tiles"));
                let lim = g.i64(lk / KEY_TILE);
                let lt = b!(g.b.build_int_compare(IntPredicate::ULT, n, lim, "lt"));
                b!(g.b.build_select(lt, n, lim, "tl")).into_int_value()
            } else {
                g.i64(lk / KEY_TILE)
            };
            g.counted(f, g.i64(0), tiles, g.i64(1), |g, kt| {
                let key0 = b!(g.b.build_int_mul(kt, g.i64(KEY_TILE), "key0"));
                // The block copies the key tile (64 × d) and the value tile (dv × 64 of vt)
                // into shared memory, 16 bytes a thread at a time.
                let copy = |g: &Self,
                            rows: u64,
                            cols: u64,
                            src: IntValue<'c>,
                            src_ld: u64,
                            from: PointerValue<'c>,
                            dst0: u64,
                            dst_ld: u64|
                 -> R<()> {
                    let per_row = cols / 8;
                    g.counted(
                        f,
                        tid,
                        g.i64(rows * per_row),
                        g.i64(FLASH_BLOCK as u64),
                        |g, v| {
                            let row = b!(g.b.build_int_unsigned_div(v, g.i64(per_row), "cr"));
                            let cv = b!(g.b.build_int_unsigned_rem(v, g.i64(per_row), "cv"));
                            let col = b!(g.b.build_int_mul(cv, g.i64(8), "cc"));
                            let si = at(g, src, row, src_ld, col)?;
                            let sp = unsafe {
                                b!(g.b.build_in_bounds_gep(cx.bf16_type(), from, &[si], "sp"))
                            };
                            let di = at(g, g.i64(dst0), row, dst_ld, col)?;
                            let dp = unsafe {
                                b!(g.b.build_in_bounds_gep(cx.bf16_type(), smem, &[di], "dp"))
                            };
                            g.copy16(sp, dp)?;
                            Ok(())
                        },
                    )
                };
                let ksrc = b!(g.b.build_int_mul(key0, g.i64(d), "ks"));
                let ksrc = b!(g.b.build_int_add(hk, ksrc, "ksrc"));
                copy(g, KEY_TILE, d, ksrc, d, kp, 0, k_ld)?;
                let vsrc = b!(g.b.build_int_add(hv, key0, "vsrc"));
                copy(g, dv, KEY_TILE, vsrc, lk, vp, v_base, v_ld)?;
                g.barrier()?;
                // Scores of 8 n-tiles of 8 keys: rows g, g + 8 × keys 2t, 2t + 1 of each.
                let mut s = Vec::new();
                for j in 0..nt_s {
                    let key = b!(g.b.build_int_add(gq, g.i64(8 * j), "kj"));
                    let mut c = [f32t.const_zero(); 4];
                    for (kk, a) in qa.iter().enumerate() {
                        let c0 = b!(g.b.build_int_add(t2, g.i64(kk as u64 * 16), "c0"));
                        let c8 = b!(g.b.build_int_add(c0, g.i64(8), "c8"));
                        let bf = [
                            pair(g, smem, at(g, g.i64(0), key, k_ld, c0)?)?,
                            pair(g, smem, at(g, g.i64(0), key, k_ld, c8)?)?,
                        ];
                        c = mma4(g, *a, bf, c)?;
                    }
                    // Scale to base 2, mask keys past the row (causal).
                    let col = b!(g.b.build_int_add(key0, g.i64(8 * j), "col"));
                    let col = b!(g.b.build_int_add(col, t2, "col2"));
                    for (e, v) in c.iter_mut().enumerate() {
                        let x = b!(g.b.build_float_mul(*v, scale2, "s2"));
                        *v = if causal {
                            let k = b!(g.b.build_int_add(col, g.i64(e as u64 % 2), "k"));
                            let row = if e < 2 { row_a } else { row_b };
                            let past = b!(g.b.build_int_compare(IntPredicate::UGT, k, row, "past"));
                            b!(g.b.build_select(past, neg_inf, x, "msk")).into_float_value()
                        } else {
                            x
                        };
                    }
                    s.push(c);
                }
                // Online softmax per row (r = 0: row g, elements 0, 1; r = 1: row g + 8).
                let mut alpha = [f32t.const_zero(); 2];
                let mut mnew = [f32t.const_zero(); 2];
                for r in 0..2usize {
                    let mut mx = neg_inf;
                    for c in &s {
                        mx = g.call_f(maxf, &[mx, c[2 * r]])?;
                        mx = g.call_f(maxf, &[mx, c[2 * r + 1]])?;
                    }
                    let mx = quad(g, mx, true)?;
                    let mold = getf(g, m_run, pair_t, r as u64)?;
                    let mn = g.call_f(maxf, &[mold, mx])?;
                    let dm = b!(g.b.build_float_sub(mold, mn, "dm"));
                    alpha[r] = g.call_f(ex2, &[dm])?;
                    mnew[r] = mn;
                    setf(g, m_run, pair_t, r as u64, mn)?;
                }
                let mut sum = [f32t.const_zero(); 2];
                for c in s.iter_mut() {
                    for (e, v) in c.iter_mut().enumerate() {
                        let r = e / 2;
                        let x = b!(g.b.build_float_sub(*v, mnew[r], "x"));
                        *v = g.call_f(ex2, &[x])?;
                        sum[r] = b!(g.b.build_float_add(sum[r], *v, "ps"));
                    }
                }
                for r in 0..2usize {
                    let total = quad(g, sum[r], false)?;
                    let l = getf(g, l_run, pair_t, r as u64)?;
                    let l = b!(g.b.build_float_mul(l, alpha[r], "la"));
                    let l = b!(g.b.build_float_add(l, total, "l"));
                    setf(g, l_run, pair_t, r as u64, l)?;
                }
                // Rescale the accumulators, then O += P·V over 4 steps of 16 keys.
                let mut o = Vec::new();
                for n in 0..nt_o {
                    let mut c = [f32t.const_zero(); 4];
                    for (e, v) in c.iter_mut().enumerate() {
                        let x = getf(g, o_acc, acc_t, n * 4 + e as u64)?;
                        *v = b!(g.b.build_float_mul(x, alpha[e / 2], "oa"));
                    }
                    o.push(c);
                }
                for q in 0..(KEY_TILE / 16) as usize {
                    let (lo, hi) = (&s[2 * q], &s[2 * q + 1]);
                    let a = [
                        pack(g, lo[0], lo[1])?,
                        pack(g, lo[2], lo[3])?,
                        pack(g, hi[0], hi[1])?,
                        pack(g, hi[2], hi[3])?,
                    ];
                    let k0 = b!(g.b.build_int_add(t2, g.i64(16 * q as u64), "k0"));
                    let k8 = b!(g.b.build_int_add(k0, g.i64(8), "k8"));
                    for (n, c) in o.iter_mut().enumerate() {
                        let vrow = b!(g.b.build_int_add(gq, g.i64(8 * n as u64), "vr"));
                        let bf = [
                            pair(g, smem, at(g, g.i64(v_base), vrow, v_ld, k0)?)?,
                            pair(g, smem, at(g, g.i64(v_base), vrow, v_ld, k8)?)?,
                        ];
                        *c = mma4(g, a, bf, *c)?;
                    }
                }
                for (n, c) in o.iter().enumerate() {
                    for (e, v) in c.iter().enumerate() {
                        setf(g, o_acc, acc_t, n as u64 * 4 + e as u64, *v)?;
                    }
                }
                // Every warp is done with the tiles before the next copy overwrites them.
                g.barrier()
            })?;
            // Divide by the row sums and store rows g and g + 8.
            let mut inv = [f32t.const_zero(); 2];
            for (r, v) in inv.iter_mut().enumerate() {
                let l = getf(g, l_run, pair_t, r as u64)?;
                *v = b!(g.b.build_float_div(f32t.const_float(1.0), l, "inv"));
            }
            for n in 0..nt_o {
                let col = b!(g.b.build_int_add(t2, g.i64(8 * n), "oc"));
                for r in 0..2u64 {
                    let x0 = getf(g, o_acc, acc_t, n * 4 + 2 * r)?;
                    let x1 = getf(g, o_acc, acc_t, n * 4 + 2 * r + 1)?;
                    let x0 = b!(g.b.build_float_mul(x0, inv[r as usize], "o0"));
                    let x1 = b!(g.b.build_float_mul(x1, inv[r as usize], "o1"));
                    let v = pack(g, x0, x1)?;
                    let row = if r == 0 { row_a } else { row_b };
                    let idx = at(g, ho, row, dv, col)?;
                    let p =
                        unsafe { b!(g.b.build_in_bounds_gep(cx.bf16_type(), op_, &[idx], "op")) };
                    let st = b!(g.b.build_store(p, v));
                    st.set_alignment(4).map_err(|e| e.to_string())?;
                }
            }
            Ok(())
        })
    }
}
