//! The LL (low-latency) one-shot all-reduce: the one-shot for messages of at most
//! [`abi::SYMM_LL_MAX_BYTES`], with no barrier at all.
//!
//! The two signal-pad barriers of the other symm kernels each cost a round trip over NVLink
//! (a remote compare-and-swap, then a wait for the peer's), which is most of a small
//! all-reduce's time. LL, the protocol of NCCL's small messages, replaces both with data that
//! carries its own arrival flag: every 8 data bytes travel as one 16-byte line
//! `{lo, epoch, hi, epoch}`, stored with one `st.volatile.v4.u32` into each peer's LL area;
//! the receiver polls its own area with `ld.volatile.v4.u32` until both flags of a line
//! equal the call's epoch (each 8-byte half of a 16-byte store arrives whole), so data and
//! synchronization cost one one-way NVLink write.
//!
//! The area after each rank's signal pad and control words holds `2 × G` slots, slot
//! `(parity, source)` at `(parity · G + source) · SYMM_LL_SLOT_BYTES`, each split into one
//! part of [`BLOCK_LINES`] lines per block of the grid: block `b`'s `j`-th line (its threads
//! take lines `b · ntid + t + k · stride` of the message, `j = k · ntid + t`) is at
//! `b · BLOCK_LINES · 16 + j · 16`. Each block counts its own calls (`epoch[b]` of the
//! control words): the call's flag is `epoch[b] + 1`, its parity the flag's low bit, and
//! thread 0 stores the new count after the block's last barrier, so blocks never wait for
//! each other. Every rank runs the same calls with the same grids, so the counts agree.
//!
//! Why two parities suffice and no end barrier is needed: a rank can be at most one call
//! ahead of a peer. Its call `k + 1` cannot finish before the peer pushed the lines of
//! `k + 1`, which the peer does only after its call `k` finished (stream order); so when a
//! rank pushes block b's lines of its next call into the peer, the peer is done reading
//! block b's lines of the previous ones, and the parity alternates with every call block b
//! takes part in. Flags equal to the count identify the call, so no slot is ever cleared.
//! A call that times out waiting for a line writes the fault word like a barrier and does
//! not advance the count.
//!
//! Data: lines are filled from the input by 8-byte loads when the input is 8-byte aligned
//! (element by element for the tail and otherwise), and the reduced line is stored by one
//! 8-byte store (or element by element); the fold is the one-shot's, in rank order, so the
//! result is bit for bit the sim's. An epilogue takes the reduced elements one by one.
//!
//! The epoch is 32 bits: a line not rewritten for 2³² calls of its pool could be taken for
//! the current call's. Like NCCL's LL flags, this is accepted.

use super::{Env, EpiCall, Gen, R};
use crate::abi;
use inkwell::values::{BasicValue, BasicValueEnum, IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;

/// Byte offset of the LL area from a signal pad.
const LL_AREA: u64 = (abi::SYMM_SIGNAL_PAD_BYTES + abi::SYMM_CTRL_BYTES) as u64;
/// Lines of one block's part of a slot.
pub const BLOCK_LINES: u64 = abi::SYMM_LL_SLOT_BYTES as u64 / 16 / super::MAX_GRID;

macro_rules! b {
    ($e:expr) => {
        $e.map_err(|e| e.to_string())?
    };
}

impl<'a, 'c> Gen<'a, 'c> {
    /// `if cond { body }` at the builder's position.
    fn when(&self, e: &Env<'c>, cond: IntValue<'c>, body: &mut dyn FnMut() -> R<()>) -> R<()> {
        let then = self.cx.append_basic_block(e.f, "then");
        let join = self.cx.append_basic_block(e.f, "endif");
        b!(self.b.build_conditional_branch(cond, then, join));
        self.b.position_at_end(then);
        body()?;
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(join);
        Ok(())
    }

    /// The signal pad address (i64) of group rank `p`.
    pub(super) fn pad_addr(&self, e: &Env<'c>, p: IntValue<'c>) -> R<IntValue<'c>> {
        let off = b!(self.b.build_int_mul(p, self.i64(8), "po"));
        let off = b!(self.b.build_int_add(off, self.i64(64), "po"));
        self.desc_u64(e.desc, off, "pad")
    }

    /// Line `i` (the block's part included) of slot (`parity`, `src`) in the LL area after
    /// `pad`.
    fn ll_line(
        &self,
        pad: IntValue<'c>,
        parity: IntValue<'c>,
        src: IntValue<'c>,
        i: IntValue<'c>,
    ) -> R<PointerValue<'c>> {
        let slot = b!(self.b.build_int_mul(parity, self.i64(self.world), "slot"));
        let slot = b!(self.b.build_int_add(slot, src, "slot"));
        let slot =
            b!(self
                .b
                .build_int_mul(slot, self.i64(abi::SYMM_LL_SLOT_BYTES as u64), "slotb"));
        let line = b!(self.b.build_int_mul(i, self.i64(16), "lineb"));
        let a = b!(self.b.build_int_add(pad, self.i64(LL_AREA), "ll"));
        let a = b!(self.b.build_int_add(a, slot, "ll"));
        let a = b!(self.b.build_int_add(a, line, "ll"));
        self.to_ptr(a, "linep")
    }

    /// The bits of element `idx` of `ptr` as an i64 (zero-extended).
    fn elem_bits(&self, ptr: PointerValue<'c>, idx: IntValue<'c>) -> R<IntValue<'c>> {
        let st = self.storage();
        let it = self.cx.custom_width_int_type(
            std::num::NonZeroU32::new(8 * self.ty.bytes() as u32).ok_or("zero width")?,
        )?;
        let p = unsafe { b!(self.b.build_in_bounds_gep(st, ptr, &[idx], "ep")) };
        let v = b!(self.b.build_load(it, p, "eb")).into_int_value();
        Ok(b!(self.b.build_int_z_extend_or_bit_cast(
            v,
            self.cx.i64_type(),
            "ez"
        )))
    }

    /// The 8 input bytes of line `i` (elements past `count` read as 0).
    fn ll_gather_line(
        &self,
        e: &Env<'c>,
        input: PointerValue<'c>,
        i: IntValue<'c>,
        count: u64,
        fast: IntValue<'c>,
    ) -> R<IntValue<'c>> {
        let i64t = self.cx.i64_type();
        let k = 8 / self.ty.bytes();
        let slot = b!(self.b.build_alloca(i64t, "line"));
        let full = self.cx.append_basic_block(e.f, "full");
        let part = self.cx.append_basic_block(e.f, "part");
        let join = self.cx.append_basic_block(e.f, "gathered");
        b!(self.b.build_conditional_branch(fast, full, part));
        self.b.position_at_end(full);
        let p = unsafe { b!(self.b.build_in_bounds_gep(i64t, input, &[i], "lp")) };
        let v = b!(self.b.build_load(i64t, p, "l8"));
        v.as_instruction_value()
            .map(|x| x.set_alignment(8))
            .transpose()
            .map_err(|e| e.to_string())?;
        b!(self.b.build_store(slot, v));
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(part);
        b!(self.b.build_store(slot, self.i64(0)));
        for j in 0..k {
            let idx = b!(self.b.build_int_mul(i, self.i64(k), "ei"));
            let idx = b!(self.b.build_int_add(idx, self.i64(j), "ei"));
            let inb = b!(self
                .b
                .build_int_compare(IntPredicate::ULT, idx, self.i64(count), "inb"));
            self.when(e, inb, &mut || {
                let bits = self.elem_bits(input, idx)?;
                let sh = b!(self
                    .b
                    .build_left_shift(bits, self.i64(8 * self.ty.bytes() * j), "sh"));
                let cur = b!(self.b.build_load(i64t, slot, "cur")).into_int_value();
                let nv = b!(self.b.build_or(cur, sh, "or"));
                b!(self.b.build_store(slot, nv));
                Ok(())
            })?;
        }
        b!(self.b.build_unconditional_branch(join));
        self.b.position_at_end(join);
        Ok(b!(self.b.build_load(i64t, slot, "line")).into_int_value())
    }

    /// Spins on `line` until both flags equal `epoch` (or this thread already failed, or the
    /// timeout passes: then the fault word names `peer`); returns the line's data bytes.
    fn ll_poll(
        &self,
        e: &Env<'c>,
        line: PointerValue<'c>,
        epoch: IntValue<'c>,
        peer: IntValue<'c>,
    ) -> R<IntValue<'c>> {
        let i32t = self.cx.i32_type();
        let i64t = self.cx.i64_type();
        let vt = i32t.vec_type(4);
        let t0 = self.sreg_u64("globaltimer")?;
        let head = self.cx.append_basic_block(e.f, "poll");
        let check = self.cx.append_basic_block(e.f, "poll_clock");
        let fault = self.cx.append_basic_block(e.f, "poll_fault");
        let done = self.cx.append_basic_block(e.f, "arrived");
        b!(self.b.build_unconditional_branch(head));
        self.b.position_at_end(head);
        let v = b!(self.b.build_load(vt, line, "ll"));
        let inst = v.as_instruction_value().ok_or("load")?;
        inst.set_alignment(16).map_err(|e| e.to_string())?;
        inst.set_volatile(true).map_err(|e| e.to_string())?;
        let v: VectorValue<'c> = v.into_vector_value();
        let lane = |k: u64| -> R<IntValue<'c>> {
            Ok(b!(self.b.build_extract_element(v, self.i32(k), "lane")).into_int_value())
        };
        let (lo, f1, hi, f2) = (lane(0)?, lane(1)?, lane(2)?, lane(3)?);
        let ok1 = b!(self.b.build_int_compare(IntPredicate::EQ, f1, epoch, "f1"));
        let ok2 = b!(self.b.build_int_compare(IntPredicate::EQ, f2, epoch, "f2"));
        let ok = b!(self.b.build_and(ok1, ok2, "ok"));
        let fv = b!(self.b.build_load(i32t, e.failed, "fv")).into_int_value();
        let gave_up = b!(self
            .b
            .build_int_compare(IntPredicate::NE, fv, self.i32(0), "gaveup"));
        let leave = b!(self.b.build_or(ok, gave_up, "leave"));
        b!(self.b.build_conditional_branch(leave, done, check));
        self.timeout_tail(e, t0, [check, fault, head, done], peer, e.failed)?;
        let lo = b!(self.b.build_int_z_extend(lo, i64t, "lo"));
        let hi = b!(self.b.build_int_z_extend(hi, i64t, "hi"));
        let hi = b!(self.b.build_left_shift(hi, self.i64(32), "hi"));
        Ok(b!(self.b.build_or(lo, hi, "data")))
    }

    /// The storage lanes of one line's 8 data bytes.
    fn line_lanes(&self, data: IntValue<'c>) -> R<Vec<BasicValueEnum<'c>>> {
        let k = (8 / self.ty.bytes()) as u32;
        let st = self.storage();
        if k == 1 {
            return Ok(vec![b!(self.b.build_bit_cast(data, st, "l1"))]);
        }
        let v = b!(self.b.build_bit_cast(data, super::vec_of(st, k)?, "lv")).into_vector_value();
        (0..k)
            .map(|j| {
                Ok(b!(self.b.build_extract_element(
                    v,
                    self.i32(u64::from(j)),
                    "lane"
                )))
            })
            .collect()
    }

    /// The LL one-shot all-reduce of `count` elements (module docs), storing the reduced
    /// elements into `out` or handing them to the epilogue.
    pub(super) fn ll_one_shot(
        &self,
        e: &Env<'c>,
        count: u64,
        epi: Option<&EpiCall<'_, 'c>>,
    ) -> R<()> {
        let i32t = self.cx.i32_type();
        let i64t = self.cx.i64_type();
        let eb = self.ty.bytes();
        let k = 8 / eb;
        let nbytes = count * eb;
        let lines = nbytes.div_ceil(8);
        let full_lines = nbytes / 8;
        // The launch (`launch_shape`) must fit each block's lines into its part of a slot.
        let (grid, block) =
            super::launch_shape("one_shot_all_reduce", count as i64, eb, self.world);
        if lines.div_ceil(grid * block) * block > BLOCK_LINES {
            return Err(format!(
                "symm LL one-shot: {lines} lines on {grid}x{block} threads overflow a block's {BLOCK_LINES} lines"
            ));
        }
        b!(self.b.build_store(e.failed, self.i32(0)));

        // The block's call count, from this rank's control words.
        let pad_me = self.pad_addr(e, e.rank)?;
        let ctrl = b!(self.b.build_int_mul(e.ctaid, self.i64(4), "ctrlo"));
        let ctrl = b!(self.b.build_int_add(ctrl, pad_me, "ctrl"));
        let ctrl =
            b!(self
                .b
                .build_int_add(ctrl, self.i64(abi::SYMM_SIGNAL_PAD_BYTES as u64), "ctrl"));
        let epoch_p = self.to_ptr(ctrl, "epochp")?;
        let cur = b!(self.b.build_load(i32t, epoch_p, "cur"));
        cur.as_instruction_value()
            .ok_or("load")?
            .set_volatile(true)
            .map_err(|e| e.to_string())?;
        let epoch = b!(self
            .b
            .build_int_add(cur.into_int_value(), self.i32(1), "epoch"));
        let parity = b!(self.b.build_and(epoch, self.i32(1), "par"));
        let parity = b!(self.b.build_int_z_extend(parity, i64t, "par"));

        let start = b!(self.b.build_int_mul(e.ctaid, e.ntid, "s"));
        let start = b!(self.b.build_int_add(start, e.tid, "s"));
        let stride = b!(self.b.build_int_mul(e.nctaid, e.ntid, "stride"));
        // Line i of the message is line `part + j` of the slots: the block's part, then
        // j = (i / stride) · ntid + tid.
        let part = b!(self.b.build_int_mul(e.ctaid, self.i64(BLOCK_LINES), "part"));
        let local = |i: IntValue<'c>| -> R<IntValue<'c>> {
            let k = b!(self.b.build_int_unsigned_div(i, stride, "k"));
            let j = b!(self.b.build_int_mul(k, e.ntid, "j"));
            let j = b!(self.b.build_int_add(j, e.tid, "j"));
            Ok(b!(self.b.build_int_add(j, part, "slotline")))
        };

        // 1. Push this rank's lines into every rank's area (its own included).
        let in_off = b!(self.b.build_int_mul(e.rank, self.i64(8), "bo"));
        let my_base = self.desc_u64(e.desc, in_off, "mybase")?;
        let my_in = b!(self.b.build_int_add(my_base, e.in_offset, "myin"));
        let in8 = b!(self.b.build_and(my_in, self.i64(7), "in8"));
        let in8 = b!(self
            .b
            .build_int_compare(IntPredicate::EQ, in8, self.i64(0), "in8"));
        let input = self.to_ptr(my_in, "input")?;
        let pads = (0..self.world)
            .map(|q| self.desc_u64(e.desc, self.i64(64 + 8 * q), "padq"))
            .collect::<R<Vec<_>>>()?;
        let vt = i32t.vec_type(4);
        self.counted(e.f, start, self.i64(lines), stride, &mut |i| {
            let below =
                b!(self
                    .b
                    .build_int_compare(IntPredicate::ULT, i, self.i64(full_lines), "fulll"));
            let fast = b!(self.b.build_and(below, in8, "fast"));
            let data = self.ll_gather_line(e, input, i, count, fast)?;
            let li = local(i)?;
            let lo = b!(self.b.build_int_truncate(data, i32t, "lo"));
            let hi = b!(self.b.build_right_shift(data, self.i64(32), false, "hi"));
            let hi = b!(self.b.build_int_truncate(hi, i32t, "hi"));
            let mut v = vt.get_undef();
            for (j, x) in [lo, epoch, hi, epoch].into_iter().enumerate() {
                v = b!(self.b.build_insert_element(v, x, self.i32(j as u64), "ins"));
            }
            // From the next rank on, so that the ranks' first stores go to different peers.
            for j in 0..self.world {
                let q = b!(self.b.build_int_add(e.rank, self.i64(j), "q"));
                let q = b!(self.b.build_int_unsigned_rem(q, self.i64(self.world), "q"));
                let mut pad = pads[0];
                for (r, p) in pads.iter().enumerate().skip(1) {
                    let is = b!(self.b.build_int_compare(
                        IntPredicate::EQ,
                        q,
                        self.i64(r as u64),
                        "isq"
                    ));
                    pad = b!(self.b.build_select(is, *p, pad, "padsel")).into_int_value();
                }
                let dst = self.ll_line(pad, parity, e.rank, li)?;
                let st = b!(self.b.build_store(dst, v));
                st.set_alignment(16).map_err(|e| e.to_string())?;
                st.set_volatile(true).map_err(|e| e.to_string())?;
            }
            Ok(())
        })?;

        // 2. Wait for every rank's line, fold in rank order, store or hand to the epilogue.
        let out = epi.map_or(e.out, |c| c.out);
        let out_a = b!(self.b.build_ptr_to_int(out, i64t, "outa"));
        let out8 = b!(self.b.build_and(out_a, self.i64(7), "out8"));
        let out8 = b!(self
            .b
            .build_int_compare(IntPredicate::EQ, out8, self.i64(0), "out8"));
        self.counted(e.f, start, self.i64(lines), stride, &mut |i| {
            let mut acc: Vec<BasicValueEnum<'c>> = Vec::new();
            let li = local(i)?;
            for p in 0..self.world {
                let line = self.ll_line(pad_me, parity, self.i64(p), li)?;
                let data = self.ll_poll(e, line, epoch, self.i64(p))?;
                let xs = self.line_lanes(data)?;
                if acc.is_empty() {
                    acc = xs.into_iter().map(|x| self.widen(x)).collect::<R<_>>()?;
                } else {
                    for (a, x) in acc.iter_mut().zip(xs) {
                        *a = self.combine(*a, self.widen(x)?)?;
                    }
                }
            }
            let lanes = acc
                .into_iter()
                .map(|a| self.finish(a))
                .collect::<R<Vec<_>>>()?;
            let store_elem = |j: u64, idx: IntValue<'c>| -> R<()> {
                match epi {
                    Some(c) => {
                        let mut args: Vec<inkwell::values::BasicMetadataValueEnum<'c>> =
                            vec![idx.into(), lanes[j as usize].into()];
                        args.extend(
                            c.extras
                                .iter()
                                .map(|p| inkwell::values::BasicMetadataValueEnum::from(*p)),
                        );
                        args.push(c.out.into());
                        b!(self.b.build_call(c.epi.scalar, &args, ""));
                    }
                    None => self.store(out, idx, &lanes[j as usize..j as usize + 1])?,
                }
                Ok(())
            };
            let below =
                b!(self
                    .b
                    .build_int_compare(IntPredicate::ULT, i, self.i64(full_lines), "fulll"));
            let whole = self.cx.append_basic_block(e.f, "whole");
            let part = self.cx.append_basic_block(e.f, "parts");
            let join = self.cx.append_basic_block(e.f, "stored");
            let fast = b!(self.b.build_and(below, out8, "fast"));
            let fast = if epi.is_some() {
                self.cx.bool_type().const_zero()
            } else {
                fast
            };
            b!(self.b.build_conditional_branch(fast, whole, part));
            self.b.position_at_end(whole);
            let mut v = if k == 1 {
                None
            } else {
                Some(super::vec_of(self.storage(), k as u32)?.get_undef())
            };
            if let Some(vv) = v.as_mut() {
                for (j, l) in lanes.iter().enumerate() {
                    *vv = b!(self
                        .b
                        .build_insert_element(*vv, *l, self.i32(j as u64), "ins"));
                }
            }
            let bits = match v {
                Some(vv) => b!(self.b.build_bit_cast(vv, i64t, "bits")),
                None => b!(self.b.build_bit_cast(lanes[0], i64t, "bits")),
            };
            let p = unsafe { b!(self.b.build_in_bounds_gep(i64t, out, &[i], "op")) };
            let st = b!(self.b.build_store(p, bits));
            st.set_alignment(8).map_err(|e| e.to_string())?;
            b!(self.b.build_unconditional_branch(join));
            self.b.position_at_end(part);
            for j in 0..k {
                let idx = b!(self.b.build_int_mul(i, self.i64(k), "ei"));
                let idx = b!(self.b.build_int_add(idx, self.i64(j), "ei"));
                let inb =
                    b!(self
                        .b
                        .build_int_compare(IntPredicate::ULT, idx, self.i64(count), "inb"));
                self.when(e, inb, &mut || store_elem(j, idx))?;
            }
            b!(self.b.build_unconditional_branch(join));
            self.b.position_at_end(join);
            Ok(())
        })?;

        // 3. A failed wait leaves the count as it is; otherwise thread 0 stores it after the
        //    block barrier (every thread of the block has read it by then).
        self.quit_if_any_failed(e)?;
        let first = b!(self
            .b
            .build_int_compare(IntPredicate::EQ, e.tid, self.i64(0), "t0"));
        self.when(e, first, &mut || {
            let s = b!(self.b.build_store(epoch_p, epoch));
            s.set_volatile(true).map_err(|e| e.to_string())?;
            Ok(())
        })
    }
}
