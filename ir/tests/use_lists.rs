//! Use lists through every edit that changes them (creating ops, setting operands, replacing
//! uses, erasing ops), against the plain list semantics: a new use goes at the end, a removed
//! one is replaced by the last use, and replacing all uses appends `from`'s list to `to`'s.
//! Long lists keep an index of their uses' positions (so that removing a use costs O(1)); the
//! order must be exactly the plain one, on values whose lists grow past the indexing length
//! and shrink back, many times.

use commlir_ir::{BlockId, Context, OpId, OpState, Use, Value};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The plain semantics, one list per value.
struct Model {
    uses: Vec<Vec<Use>>,
}

impl Model {
    fn add(&mut self, v: Value, u: Use) {
        self.uses[v.index()].push(u);
    }
    fn remove(&mut self, v: Value, u: Use) {
        let l = &mut self.uses[v.index()];
        let p = l.iter().position(|x| *x == u).expect("a use");
        l.swap_remove(p);
    }
}

struct World {
    ctx: Context,
    block: BlockId,
    values: Vec<Value>,
    users: Vec<OpId>,
    model: Model,
    rng: Rng,
}

impl World {
    /// A value, most often the first (a weight every layer reads) or the second.
    fn pick(&mut self) -> Value {
        match self.rng.below(8) {
            0..=3 => self.values[0],
            4 => self.values[1],
            _ => self.values[self.rng.below(self.values.len())],
        }
    }

    fn create_user(&mut self) {
        let n = 1 + self.rng.below(3);
        let operands: Vec<Value> = (0..n).map(|_| self.pick()).collect();
        let name = self.ctx.ident("t.user");
        let mut st = OpState::new(name, self.ctx.unknown_loc());
        st.operands = operands.clone();
        let op = self.ctx.create_op(st);
        self.ctx.append_op(self.block, op);
        for (i, v) in operands.into_iter().enumerate() {
            self.model.add(
                v,
                Use {
                    op,
                    index: i as u32,
                },
            );
        }
        self.users.push(op);
    }

    fn step(&mut self) {
        let grow = self.rng.below(100) < 60;
        match self.rng.below(20) {
            _ if self.users.is_empty() => self.create_user(),
            0..=7 if grow => self.create_user(),
            0..=7 => {
                let op = self.users.swap_remove(self.rng.below(self.users.len()));
                for (i, &v) in self.ctx.operands(op).to_vec().iter().enumerate() {
                    self.model.remove(
                        v,
                        Use {
                            op,
                            index: i as u32,
                        },
                    );
                }
                self.ctx.erase_op(op);
            }
            8..=13 => {
                let op = self.users[self.rng.below(self.users.len())];
                let i = self.rng.below(self.ctx.operands(op).len());
                let (old, new) = (self.ctx.operand(op, i), self.pick());
                if old != new {
                    let u = Use {
                        op,
                        index: i as u32,
                    };
                    self.model.remove(old, u);
                    self.model.add(new, u);
                }
                self.ctx.set_operand(op, i, new);
            }
            14 | 15 => {
                let op = self.users[self.rng.below(self.users.len())];
                let old = self.ctx.operands(op).to_vec();
                let new: Vec<Value> = (0..1 + self.rng.below(3)).map(|_| self.pick()).collect();
                for (i, &v) in old.iter().enumerate() {
                    self.model.remove(
                        v,
                        Use {
                            op,
                            index: i as u32,
                        },
                    );
                }
                for (i, &v) in new.iter().enumerate() {
                    self.model.add(
                        v,
                        Use {
                            op,
                            index: i as u32,
                        },
                    );
                }
                self.ctx.set_operands(op, new);
            }
            16 if self.rng.below(8) == 0 => {
                // Move every use of a value to another (often the busy ones).
                let (from, to) = (self.pick(), self.pick());
                if from != to {
                    let moved = std::mem::take(&mut self.model.uses[from.index()]);
                    self.model.uses[to.index()].extend(moved);
                }
                self.ctx.replace_all_uses(from, to);
            }
            17 => {
                // Move the uses by every other op.
                let (from, to) = (self.pick(), self.pick());
                let odd = |o: OpId| o.index() % 2 == 1;
                for u in self.model.uses[from.index()].clone() {
                    if odd(u.op) && from != to {
                        self.model.remove(from, u);
                        self.model.add(to, u);
                    }
                }
                self.ctx.replace_uses_where(from, to, |_, o| odd(o));
            }
            _ => self.create_user(),
        }
    }

    fn check(&self, what: &str) {
        for &v in &self.values {
            assert_eq!(self.ctx.uses(v), &self.model.uses[v.index()][..], "{what}");
        }
    }
}

#[test]
fn use_lists_keep_the_plain_order_through_every_edit() {
    for seed in 1..=12u64 {
        let mut ctx = Context::new();
        let block = ctx.new_block(&[]);
        let ty = ctx.index_type();
        let mut values = Vec::new();
        for _ in 0..6 {
            let name = ctx.ident("t.def");
            let mut st = OpState::new(name, ctx.unknown_loc());
            st.result_types = vec![ty];
            let d = ctx.create_op(st);
            ctx.append_op(block, d);
            values.push(ctx.result(d, 0));
        }
        let n = values.iter().map(|v| v.index() + 1).max().unwrap();
        let mut w = World {
            ctx,
            block,
            values,
            users: Vec::new(),
            model: Model {
                uses: vec![Vec::new(); n],
            },
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
        };
        // Phases that grow the lists well past the indexing length (64) and shrink them
        // below half of it, so that indexes are built, kept up and dropped many times.
        let (mut grown, mut shrunk) = (0, 0);
        for phase in 0..8 {
            let steps = 600 + w.rng.below(300);
            for s in 0..steps {
                if phase % 2 == 0 || w.rng.below(3) > 0 {
                    w.step();
                } else if let Some(op) = w.users.pop() {
                    for (i, &v) in w.ctx.operands(op).to_vec().iter().enumerate() {
                        w.model.remove(
                            v,
                            Use {
                                op,
                                index: i as u32,
                            },
                        );
                    }
                    w.ctx.erase_op(op);
                }
                let busy = w.ctx.uses(w.values[0]).len();
                if busy >= 128 && grown == shrunk {
                    grown += 1;
                } else if busy < 16 && grown > shrunk {
                    shrunk += 1;
                }
                if s % 7 == 0 {
                    w.check(&format!("seed {seed} phase {phase} step {s}"));
                }
            }
            w.check(&format!("seed {seed} end of phase {phase}"));
        }
        assert!(shrunk >= 1, "seed {seed}: grown {grown}, shrunk {shrunk}");
    }
}
