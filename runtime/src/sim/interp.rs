//! One rank's interpreter: a stack of function frames, each with an environment mapping SSA
//! values to runtime slots, and a cursor on the next op. It runs until it must block (see
//! [`RankTask`]); per-dialect semantics live in `compute`, `coll` and `comm`.

use super::collective::{CollKind, CollSpec};
use super::compute;
use super::engine::{CollId, Engine};
use super::groups::{group_op_of, Communicator, GroupLayout};
use super::memory::{Memory, PoolId, StorageId};
use super::pools::FramePlan;
use super::scheduler::{Progress, RankTask};
use crate::error::SimError;
use crate::tensor::{Data, Tensor, TensorType};
use commlir_ir::{CommBufferKind, Context, OpId, Value};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// Calls nested deeper than this are reported (the frames live on the heap, so this guards
/// against runaway recursion, not against the native stack).
const MAX_CALL_DEPTH: usize = 10_000;

/// What an SSA value is bound to at run time.
#[derive(Clone, Debug)]
pub(super) enum Slot {
    /// A tensor in the rank's memory (possibly shared with aliases).
    Tensor(StorageId),
    /// Result `index` of a `coll` collective, readable only through `coll.wait_tensor`.
    InFlight { coll: CollId, index: usize },
    /// A `!comm.work` handle; on completion, the outputs are written to `dests`.
    Work { coll: CollId, dests: Vec<StorageId> },
    /// A `!comm.pool` handle.
    Pool(PoolId),
}

struct Frame {
    func: OpId,
    env: HashMap<Value, Slot>,
    next: Option<OpId>,
    /// The `func.call` that created this frame (none for the entry function).
    call_site: Option<OpId>,
    /// The comm-buffer pools this call allocated, by (kind, group).
    pools: HashMap<(CommBufferKind, String), PoolId>,
    /// Positions and buffer liveness of a planned body (`None`: no pools, nothing to check).
    plan: Option<Rc<FramePlan>>,
}

/// How execution continues after an op.
pub(super) enum Flow {
    /// Go to the next op of the current frame.
    Next,
    /// The op moved the cursor itself (call, return).
    Jumped,
    /// Stay on this op until the collective completes, then execute it again.
    Block(CollId),
    /// The entry function returned.
    Done,
}

/// The interpreter state of one rank.
pub struct RankInterp<'c> {
    pub(super) ctx: &'c Context,
    pub(super) rank: usize,
    n_ranks: usize,
    pub(super) mem: Memory,
    frames: Vec<Frame>,
    layouts: HashMap<OpId, GroupLayout>,
    /// A blocking collective issued at an op, not yet complete (so re-executing the op after
    /// the block does not issue it again).
    blocking: Option<(OpId, CollId)>,
    /// `comm` collectives whose outputs were written to their destination buffers.
    pub(super) applied: HashSet<CollId>,
    /// The entry function's `func.return` and its operands, once it returned.
    returned: Option<(OpId, Vec<Slot>)>,
    /// The frame depth of each pool's function.
    pub(super) pool_frames: HashMap<PoolId, usize>,
    /// [`FramePlan`]s by function, computed on first call.
    plans: HashMap<OpId, Option<Rc<FramePlan>>>,
}

impl<'c> RankInterp<'c> {
    /// Rank `rank` of `n_ranks`, about to run `entry` on `args`.
    pub fn new(
        ctx: &'c Context,
        rank: usize,
        n_ranks: usize,
        entry: OpId,
        args: Vec<Tensor>,
    ) -> Result<Self, SimError> {
        let mut interp = RankInterp {
            ctx,
            rank,
            n_ranks,
            mem: Memory::default(),
            frames: Vec::new(),
            layouts: HashMap::new(),
            blocking: None,
            applied: HashSet::new(),
            returned: None,
            pool_frames: HashMap::new(),
            plans: HashMap::new(),
        };
        let slots = args
            .into_iter()
            .map(|t| Slot::Tensor(interp.mem.alloc(t)))
            .collect();
        interp.push_frame(entry, slots, None)?;
        Ok(interp)
    }

    /// The entry function's results, after it returned.
    pub fn results(&self) -> Result<Vec<Tensor>, SimError> {
        let Some((ret, slots)) = &self.returned else {
            return Err(SimError::Setup(format!(
                "rank {} did not finish",
                self.rank
            )));
        };
        slots
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Slot::Tensor(id) => self
                    .mem
                    .read(*id)
                    .map(Cow::into_owned)
                    .map_err(|e| self.mem_error(*ret, e)),
                _ => Err(SimError::op(
                    self.ctx,
                    *ret,
                    format!("returns operand #{i}, which is not a completed tensor"),
                )),
            })
            .collect()
    }

    fn push_frame(
        &mut self,
        func: OpId,
        args: Vec<Slot>,
        call_site: Option<OpId>,
    ) -> Result<(), SimError> {
        let ctx = self.ctx;
        let at = call_site.unwrap_or(func);
        if self.frames.len() >= MAX_CALL_DEPTH {
            return Err(SimError::op(
                ctx,
                at,
                format!("exceeds the maximum call depth ({MAX_CALL_DEPTH})"),
            ));
        }
        let blocks = ctx
            .op_regions(func)
            .first()
            .map(|r| ctx.region_blocks(*r))
            .unwrap_or(&[]);
        let entry = match blocks {
            [b] => *b,
            [] => return Err(SimError::op(ctx, at, "calls a function without a body")),
            _ => {
                return Err(SimError::op(
                    ctx,
                    func,
                    "has several blocks; the sim backend runs single-block functions",
                ))
            }
        };
        let params = ctx.block_args(entry);
        if params.len() != args.len() {
            return Err(SimError::op(
                ctx,
                at,
                format!(
                    "passes {} arguments to a function of {}",
                    args.len(),
                    params.len()
                ),
            ));
        }
        let env = params.iter().copied().zip(args).collect();
        let plan = self
            .plans
            .entry(func)
            .or_insert_with(|| FramePlan::of(ctx, entry).map(Rc::new))
            .clone();
        self.frames.push(Frame {
            func,
            env,
            next: ctx.block_first(entry),
            call_site,
            pools: HashMap::new(),
            plan,
        });
        Ok(())
    }

    /// Index of the running frame.
    pub(super) fn depth(&self) -> usize {
        self.frames.len() - 1
    }

    /// The running frame's pools.
    pub(super) fn frame_pools(&self) -> &HashMap<(CommBufferKind, String), PoolId> {
        &self.frame().pools
    }

    pub(super) fn frame_pools_mut(&mut self) -> &mut HashMap<(CommBufferKind, String), PoolId> {
        &mut self
            .frames
            .last_mut()
            .expect("a running rank has a frame")
            .pools
    }

    /// The running frame's plan, if its function is planned.
    pub(super) fn frame_plan(&self) -> Option<Rc<FramePlan>> {
        self.frame().plan.clone()
    }

    /// The plan of the frame at `depth`.
    pub(super) fn plan_at(&self, depth: usize) -> Option<&FramePlan> {
        self.frames.get(depth).and_then(|f| f.plan.as_deref())
    }

    /// The call that created the frame at `depth`, if that frame exists.
    pub(super) fn call_site_at(&self, depth: usize) -> Option<OpId> {
        self.frames.get(depth).and_then(|f| f.call_site)
    }

    fn frame(&self) -> &Frame {
        self.frames.last().expect("a running rank has a frame")
    }

    // ----- value access ---------------------------------------------------------------------

    pub(super) fn slot(&self, op: OpId, v: Value) -> Result<&Slot, SimError> {
        self.frame().env.get(&v).ok_or_else(|| {
            SimError::op(self.ctx, op, "uses a value that has no run-time definition")
        })
    }

    pub(super) fn bind(&mut self, v: Value, s: Slot) {
        self.frames
            .last_mut()
            .expect("a running rank has a frame")
            .env
            .insert(v, s);
    }

    /// The storage of operand `i` of `op`, which must be a completed tensor.
    pub(super) fn storage(&self, op: OpId, i: usize) -> Result<StorageId, SimError> {
        let v = *self
            .ctx
            .operands(op)
            .get(i)
            .ok_or_else(|| SimError::op(self.ctx, op, format!("has no operand #{i}")))?;
        match self.slot(op, v)? {
            Slot::Tensor(id) => Ok(*id),
            Slot::InFlight { .. } => Err(SimError::op(
                self.ctx,
                op,
                format!("reads operand #{i} while it is in flight (before its 'coll.wait_tensor')"),
            )),
            Slot::Work { .. } => Err(SimError::op(
                self.ctx,
                op,
                format!("expects a tensor for operand #{i}, got a work handle"),
            )),
            Slot::Pool(_) => Err(SimError::op(
                self.ctx,
                op,
                format!("expects a tensor for operand #{i}, got a pool"),
            )),
        }
    }

    /// Operand `i` of `op` as a tensor (decoded from its pool for a planned comm buffer).
    pub(super) fn tensor(&self, op: OpId, i: usize) -> Result<Cow<'_, Tensor>, SimError> {
        self.mem
            .read(self.storage(op, i)?)
            .map_err(|e| self.mem_error(op, e))
    }

    /// The runtime type of result `i` of `op`.
    pub(super) fn result_type(&self, op: OpId, i: usize) -> Result<TensorType, SimError> {
        let v = *self
            .ctx
            .results(op)
            .get(i)
            .ok_or_else(|| SimError::op(self.ctx, op, format!("has no result #{i}")))?;
        TensorType::from_type(self.ctx, self.ctx.value_type(v)).ok_or_else(|| {
            SimError::op(self.ctx, op, format!("result #{i} is not a statically shaped tensor of a type the sim backend supports"))
        })
    }

    /// Binds result `i` of `op` to a new storage holding `t`, after checking its type.
    pub(super) fn define(&mut self, op: OpId, i: usize, t: Tensor) -> Result<(), SimError> {
        let want = self.result_type(op, i)?;
        if t.ty != want {
            return Err(SimError::op(
                self.ctx,
                op,
                format!("produces {} for result #{i}, whose type is {want}", t.ty),
            ));
        }
        let slot = match self.place_in_slot(op, i, t)? {
            Ok(placed) => placed,
            Err(t) => Slot::Tensor(self.mem.alloc(t)),
        };
        self.bind(self.ctx.result(op, i), slot);
        Ok(())
    }

    // ----- collectives ----------------------------------------------------------------------

    /// The communicator this rank uses for the group of collective `op`.
    pub(super) fn communicator(&mut self, op: OpId) -> Result<Communicator, SimError> {
        let ctx = self.ctx;
        let g = group_op_of(ctx, op)?;
        if !self.layouts.contains_key(&g) {
            let layout = GroupLayout::resolve(ctx, g, self.n_ranks, op)?;
            self.layouts.insert(g, layout);
        }
        let layout = &self.layouts[&g];
        layout
            .communicator_of(self.rank)
            .ok_or_else(|| SimError::RankNotInGroup {
                op,
                name: ctx.op_name(op).to_string(),
                rank: self.rank,
                group: layout.name.clone(),
            })
    }

    /// Issues the collective of `op` with this rank's `inputs`.
    pub(super) fn issue(
        &mut self,
        engine: &mut Engine,
        op: OpId,
        kind: CollKind,
        inputs: Vec<Tensor>,
    ) -> Result<CollId, SimError> {
        let comm = self.communicator(op)?;
        let spec = CollSpec {
            kind,
            inputs: inputs.iter().map(|t| t.ty.clone()).collect(),
        };
        engine.issue(self.ctx, self.rank, &comm, spec, op, inputs)
    }

    /// A blocking collective: issued the first time `op` executes (with what `make` returns),
    /// then polled each time the rank resumes at `op`. Returns the collective and whether it
    /// has completed.
    pub(super) fn issue_blocking(
        &mut self,
        engine: &mut Engine,
        op: OpId,
        make: impl FnOnce(&Self) -> Result<(CollKind, Vec<Tensor>), SimError>,
    ) -> Result<(CollId, bool), SimError> {
        let coll = match self.blocking {
            Some((o, c)) if o == op => c,
            _ => {
                let (kind, inputs) = make(self)?;
                let c = self.issue(engine, op, kind, inputs)?;
                self.blocking = Some((op, c));
                c
            }
        };
        let done = engine.is_complete(coll);
        if done {
            self.blocking = None;
        }
        Ok((coll, done))
    }

    // ----- execution ------------------------------------------------------------------------

    fn exec(&mut self, op: OpId, engine: &mut Engine) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let name = ctx.op_name(op);
        match name {
            "func.return" => self.exec_return(op),
            "func.call" => self.exec_call(op),
            _ if name.starts_with("compute.") => self.exec_compute(op),
            _ if name.starts_with("coll.") => self.exec_coll(op, engine),
            "symm.fused_all_gather_matmul" | "symm.fused_matmul_reduce_scatter" => {
                self.exec_fused(op, engine)
            }
            _ if name.starts_with("comm.") || name.starts_with("symm.") => {
                self.exec_comm(op, engine)
            }
            _ => Err(SimError::Unsupported {
                op,
                name: name.to_string(),
            }),
        }
    }

    fn exec_compute(&mut self, op: OpId) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let inputs = (0..ctx.operands(op).len())
            .map(|i| self.tensor(op, i))
            .collect::<Result<Vec<_>, _>>()?;
        let inputs: Vec<&Tensor> = inputs.iter().map(|t| t.as_ref()).collect();
        let results = (0..ctx.results(op).len())
            .map(|i| self.result_type(op, i))
            .collect::<Result<Vec<_>, _>>()?;
        let outs = compute::execute_all(ctx, op, &inputs, &results)
            .map_err(|m| SimError::op(ctx, op, m))?
            .ok_or_else(|| SimError::Unsupported {
                op,
                name: ctx.op_name(op).to_string(),
            })?;
        for (i, out) in outs.into_iter().enumerate() {
            self.define(op, i, out)?;
        }
        Ok(Flow::Next)
    }

    fn exec_call(&mut self, op: OpId) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let callee_name = ctx
            .inherent_attr(op, "callee")
            .and_then(|a| ctx.attr_as_symbol(a))
            .ok_or_else(|| SimError::op(ctx, op, "requires a 'callee' symbol"))?;
        let callee = ctx
            .lookup_symbol(op, callee_name)
            .filter(|f| ctx.op_name(*f) == "func.func")
            .ok_or_else(|| {
                SimError::op(
                    ctx,
                    op,
                    format!("'{callee_name}' does not reference a function"),
                )
            })?;
        let args = ctx
            .operands(op)
            .iter()
            .map(|v| self.slot(op, *v).cloned())
            .collect::<Result<Vec<_>, _>>()?;
        // The caller resumes after the call once the callee returns.
        self.frames.last_mut().expect("frame").next = ctx.next_op(op);
        self.push_frame(callee, args, Some(op))?;
        Ok(Flow::Jumped)
    }

    fn exec_return(&mut self, op: OpId) -> Result<Flow, SimError> {
        let ctx = self.ctx;
        let slots = ctx
            .operands(op)
            .iter()
            .map(|v| self.slot(op, *v).cloned())
            .collect::<Result<Vec<_>, _>>()?;
        let frame = self.frames.pop().expect("frame");
        match frame.call_site {
            None => {
                self.returned = Some((op, slots));
                Ok(Flow::Done)
            }
            Some(call) => {
                let results = ctx.results(call);
                if results.len() != slots.len() {
                    return Err(SimError::op(
                        ctx,
                        op,
                        format!(
                            "returns {} values to a call expecting {}",
                            slots.len(),
                            results.len()
                        ),
                    ));
                }
                for (r, s) in results.iter().zip(slots) {
                    self.bind(*r, s);
                }
                Ok(Flow::Jumped)
            }
        }
    }
}

impl RankTask for RankInterp<'_> {
    fn resume(&mut self, engine: &mut Engine) -> Result<Progress, SimError> {
        loop {
            let frame = self.frame();
            let Some(op) = frame.next else {
                return Err(SimError::op(
                    self.ctx,
                    frame.func,
                    "body ends without 'func.return'",
                ));
            };
            match self.exec(op, engine)? {
                Flow::Next => self.frames.last_mut().expect("frame").next = self.ctx.next_op(op),
                Flow::Jumped => {}
                Flow::Block(on) => return Ok(Progress::Blocked { at: op, on }),
                Flow::Done => return Ok(Progress::Finished),
            }
        }
    }
}

/// The contents of a freshly allocated, uninitialized comm buffer: NaN for floats and a
/// 0x5A byte pattern for integers, so a read before the collective wrote it shows in digests.
pub(super) fn garbage(ty: TensorType) -> Tensor {
    let n = ty.numel();
    let data = match ty.elem {
        crate::tensor::ElemType::F64 => Data::F64(vec![f64::NAN; n]),
        e if e.is_float() => Data::F32(vec![f32::NAN; n]),
        e => Data::Int(vec![e.wrap(0x5a5a_5a5a_5a5a_5a5a); n]),
    };
    Tensor { ty, data }
}
