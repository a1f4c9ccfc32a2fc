//! Random SPMD programs mixing compute ops and functional collectives over several groups.

use crate::rng::Rng;
use std::fmt::Write as _;

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Number of ranks the program is meant for (2 or 4; groups are sized to fit).
    pub ranks: usize,
    /// Approximate number of ops in the function body.
    pub ops: usize,
    /// Element types to draw from.
    pub elem_types: Vec<&'static str>,
    /// Emit `cost_ns` on some ops.
    pub with_costs: bool,
    /// Also emit the ops of transformer blocks (broadcast, permute, reduce_max, sin, cos,
    /// sigmoid, log, compare, select, iota). Off by default, which leaves the programs of
    /// every seed as they were before these ops existed.
    pub model_ops: bool,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            ranks: 2,
            ops: 40,
            elem_types: vec!["f32", "bf16"],
            with_costs: false,
            model_ops: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Ty {
    shape: Vec<i64>,
    elem: &'static str,
}

impl Ty {
    fn text(&self) -> String {
        let mut s = String::from("tensor<");
        for d in &self.shape {
            let _ = write!(s, "{d}x");
        }
        s.push_str(self.elem);
        s.push('>');
        s
    }
    fn numel(&self) -> i64 {
        self.shape.iter().product()
    }
}

struct Group {
    name: &'static str,
    size: i64,
}

struct Gen {
    rng: Rng,
    cfg: GenConfig,
    body: String,
    next: usize,
    ready: Vec<(String, Ty)>,
    in_flight: Vec<(String, Ty)>,
    groups: Vec<Group>,
}

const MAX_NUMEL: i64 = 512;

impl Gen {
    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("%v{}", self.next)
    }

    fn cost(&mut self) -> String {
        if self.cfg.with_costs && self.rng.chance(0.5) {
            format!(", cost_ns = {} : i64", 1 + self.rng.below(200))
        } else {
            String::new()
        }
    }

    fn cost_dict(&mut self) -> String {
        let c = self.cost();
        if c.is_empty() {
            String::new()
        } else {
            format!(" {{{}}}", &c[2..])
        }
    }

    fn emit(&mut self, line: String, result: Option<(String, Ty)>) {
        let _ = writeln!(self.body, "    {line}");
        if let Some(r) = result {
            self.ready.push(r);
        }
    }

    fn pick_ready(&mut self) -> (String, Ty) {
        // Prefer recent values so chains form, but reach back sometimes.
        let n = self.ready.len();
        let i = if self.rng.chance(0.7) {
            n - 1 - self.rng.below(n.min(4))
        } else {
            self.rng.below(n)
        };
        self.ready[i].clone()
    }

    fn pick_where(&mut self, f: impl Fn(&Ty) -> bool) -> Option<(String, Ty)> {
        let c: Vec<_> = self.ready.iter().filter(|(_, t)| f(t)).cloned().collect();
        if c.is_empty() {
            None
        } else {
            Some(c[self.rng.below(c.len())].clone())
        }
    }

    fn group(&mut self) -> (&'static str, i64) {
        let g = self.rng.pick(&self.groups);
        (g.name, g.size)
    }

    fn step(&mut self) {
        if !self.in_flight.is_empty() && self.rng.chance(0.3) {
            let i = self.rng.below(self.in_flight.len());
            let (name, ty) = self.in_flight.remove(i);
            let y = self.fresh();
            let c = self.cost_dict();
            self.emit(
                format!("{y} = coll.wait_tensor {name}{c} : {}", ty.text()),
                Some((y, ty)),
            );
            return;
        }
        // `&&` first: without model ops the random stream is not touched here.
        if self.cfg.model_ops && self.rng.chance(0.25) {
            return self.model_op();
        }
        match self.rng.below(19) {
            0..=2 => self.binary(),
            3..=4 => self.unary(),
            5 => self.matmul(),
            6 => self.shape_op(),
            7 => self.reduce_or_softmax(),
            8 => self.cast_or_fill(),
            9..=10 => self.all_reduce(),
            11 => self.all_gather(),
            12 => self.reduce_scatter(),
            13 => self.all_to_all(),
            14 => self.broadcast(),
            15 => self.coalesced(),
            16 => self.shard_dim(),
            _ => self.binary(),
        }
    }

    fn binary(&mut self) {
        let (a, t) = self.pick_ready();
        let (b, _) = self.pick_where(|x| *x == t).unwrap();
        let op = *self
            .rng
            .pick(&["add", "sub", "mul", "maximum", "minimum", "div"]);
        let b = if op == "div" {
            // Keep divisors away from zero: divide by exp(b).
            let e = self.fresh();
            self.emit(format!("{e} = compute.exp {b} : {}", t.text()), None);
            e
        } else {
            b
        };
        let r = self.fresh();
        let c = self.cost_dict();
        self.emit(
            format!("{r} = compute.{op} {a}, {b}{c} : {}", t.text()),
            Some((r.clone(), t)),
        );
    }

    fn unary(&mut self) {
        let (a, t) = self.pick_ready();
        let op = *self
            .rng
            .pick(&["neg", "exp", "relu", "gelu", "silu", "tanh", "clone"]);
        let r = self.fresh();
        if op == "exp" {
            // exp of unbounded chains overflows bf16; squash first.
            let s = self.fresh();
            self.emit(format!("{s} = compute.tanh {a} : {}", t.text()), None);
            self.emit(
                format!("{r} = compute.exp {s} : {}", t.text()),
                Some((r.clone(), t)),
            );
            return;
        }
        let c = self.cost_dict();
        self.emit(
            format!("{r} = compute.{op} {a}{c} : {}", t.text()),
            Some((r.clone(), t)),
        );
        if self.rng.chance(0.3) {
            let s = self.fresh();
            let f = *self.rng.pick(&["0.5", "2.0", "-1.25"]);
            self.emit(
                format!(
                    "{s} = compute.scale {r} {{factor = {f} : f64}} : {}",
                    self.ready.last().unwrap().1.text()
                ),
                Some((s.clone(), self.ready.last().unwrap().1.clone())),
            );
        }
        if self.rng.chance(0.2) {
            let s = self.fresh();
            let t = self.ready.last().unwrap().1.clone();
            let op = if self.rng.chance(0.5) {
                "sqrt"
            } else {
                "rsqrt"
            };
            // Keep the argument positive.
            let e = self.fresh();
            self.emit(format!("{e} = compute.exp {r} : {}", t.text()), None);
            let _ = e.clone();
            self.emit(
                format!("{s} = compute.{op} {e} : {}", t.text()),
                Some((s.clone(), t)),
            );
        }
    }

    fn matmul(&mut self) {
        let Some((a, t)) =
            self.pick_where(|t| t.shape.len() == 2 && t.shape[0] * t.shape[0] <= MAX_NUMEL)
        else {
            return self.binary();
        };
        let tt = Ty {
            shape: vec![t.shape[1], t.shape[0]],
            elem: t.elem,
        };
        let b = self.fresh();
        self.emit(
            format!(
                "{b} = compute.transpose {a} : ({}) -> {}",
                t.text(),
                tt.text()
            ),
            Some((b.clone(), tt.clone())),
        );
        let rt = Ty {
            shape: vec![t.shape[0], t.shape[0]],
            elem: t.elem,
        };
        let r = self.fresh();
        let c = self.cost_dict();
        self.emit(
            format!(
                "{r} = compute.matmul {a}, {b}{c} : ({}, {}) -> {}",
                t.text(),
                tt.text(),
                rt.text()
            ),
            Some((r.clone(), rt.clone())),
        );
        // Bring magnitudes back down so long chains stay finite in bf16.
        let s = self.fresh();
        self.emit(
            format!("{s} = compute.tanh {r} : {}", rt.text()),
            Some((s, rt)),
        );
    }

    fn shape_op(&mut self) {
        let (a, t) = self.pick_ready();
        match self.rng.below(4) {
            0 if t.shape.len() == 2 => {
                let d = self.rng.below(2);
                if t.shape[d] < 2 {
                    return self.unary();
                }
                let size = 1 + self.rng.below(t.shape[d] as usize - 1) as i64;
                let start = self.rng.below((t.shape[d] - size + 1) as usize) as i64;
                let mut s = t.shape.clone();
                s[d] = size;
                let rt = Ty {
                    shape: s,
                    elem: t.elem,
                };
                let r = self.fresh();
                self.emit(format!("{r} = compute.slice {a} {{dim = {d} : i64, start = {start} : i64, size = {size} : i64}} : ({}) -> {}", t.text(), rt.text()), Some((r, rt)));
            }
            1 if t.numel() * 2 <= MAX_NUMEL && !t.shape.is_empty() => {
                let (b, _) = self.pick_where(|x| *x == t).unwrap();
                let d = self.rng.below(t.shape.len());
                let mut s = t.shape.clone();
                s[d] *= 2;
                let rt = Ty {
                    shape: s,
                    elem: t.elem,
                };
                let r = self.fresh();
                self.emit(
                    format!(
                        "{r} = compute.concat {a}, {b} {{dim = {d} : i64}} : ({}, {}) -> {}",
                        t.text(),
                        t.text(),
                        rt.text()
                    ),
                    Some((r, rt)),
                );
            }
            2 => {
                let n = t.numel();
                let shapes: Vec<Vec<i64>> = [2, 4, 8]
                    .iter()
                    .filter(|k| n % *k == 0)
                    .map(|k| vec![*k, n / *k])
                    .chain([vec![n]])
                    .collect();
                let s = self.rng.pick(&shapes).clone();
                let rt = Ty {
                    shape: s,
                    elem: t.elem,
                };
                let r = self.fresh();
                self.emit(
                    format!(
                        "{r} = compute.reshape {a} : ({}) -> {}",
                        t.text(),
                        rt.text()
                    ),
                    Some((r, rt)),
                );
            }
            _ if t.shape.len() == 2 => {
                let rt = Ty {
                    shape: vec![t.shape[1], t.shape[0]],
                    elem: t.elem,
                };
                let r = self.fresh();
                self.emit(
                    format!(
                        "{r} = compute.transpose {a} : ({}) -> {}",
                        t.text(),
                        rt.text()
                    ),
                    Some((r, rt)),
                );
            }
            _ => self.unary(),
        }
    }

    /// One of the transformer-block patterns on a ready value `a: T`, each giving a value of
    /// a float element type (except the integer-safe ones, which keep any type):
    /// `sigmoid`/`sin`/`cos`, `log(sigmoid(a))` (finite), a causal mask of `a` (iota, compare,
    /// select with a fill), `a − broadcast(reduce_max(a))` (a softmax's shift), a 2-D
    /// permute, and `select(a > b, a, b)`.
    fn model_op(&mut self) {
        let (a, t) = self.pick_ready();
        let float = matches!(t.elem, "f16" | "bf16" | "f32" | "f64");
        let tx = t.text();
        match self.rng.below(6) {
            0 if float => {
                let op = *self.rng.pick(&["sigmoid", "sin", "cos"]);
                let r = self.fresh();
                let c = self.cost_dict();
                self.emit(format!("{r} = compute.{op} {a}{c} : {tx}"), Some((r, t)));
            }
            1 if float => {
                let s = self.fresh();
                self.emit(format!("{s} = compute.sigmoid {a} : {tx}"), None);
                let r = self.fresh();
                self.emit(format!("{r} = compute.log {s} : {tx}"), Some((r, t)));
            }
            2 if t.shape.len() == 2 => {
                let (q, k, m, f, r) = (
                    self.fresh(),
                    self.fresh(),
                    self.fresh(),
                    self.fresh(),
                    self.fresh(),
                );
                let mt = Ty {
                    shape: t.shape.clone(),
                    elem: "i1",
                };
                let it = Ty {
                    shape: t.shape.clone(),
                    elem: "i32",
                };
                let (itx, mtx) = (it.text(), mt.text());
                self.emit(
                    format!("{q} = compute.iota {{dim = 0 : i64}} : {itx}"),
                    None,
                );
                self.emit(
                    format!("{k} = compute.iota {{dim = 1 : i64}} : {itx}"),
                    None,
                );
                self.emit(
                    format!("{m} = compute.compare {k}, {q} {{predicate = \"le\"}} : ({itx}, {itx}) -> {mtx}"),
                    None,
                );
                self.emit(
                    format!("{f} = compute.fill {{value = -3.0 : f64}} : {tx}"),
                    None,
                );
                self.emit(
                    format!("{r} = compute.select {m}, {a}, {f} : ({mtx}, {tx}, {tx}) -> {tx}"),
                    Some((r, t)),
                );
            }
            3 if t.shape.len() == 2 => {
                let (mx, col, b, r) = (self.fresh(), self.fresh(), self.fresh(), self.fresh());
                let rows = t.shape[0];
                let vt = Ty {
                    shape: vec![rows],
                    elem: t.elem,
                };
                let ct = Ty {
                    shape: vec![rows, 1],
                    elem: t.elem,
                };
                let (vtx, ctx_) = (vt.text(), ct.text());
                self.emit(
                    format!("{mx} = compute.reduce_max {a} {{dim = 1 : i64}} : ({tx}) -> {vtx}"),
                    None,
                );
                self.emit(
                    format!("{col} = compute.reshape {mx} : ({vtx}) -> {ctx_}"),
                    None,
                );
                self.emit(
                    format!("{b} = compute.broadcast {col} : ({ctx_}) -> {tx}"),
                    None,
                );
                self.emit(format!("{r} = compute.sub {a}, {b} : {tx}"), Some((r, t)));
            }
            4 if t.shape.len() == 2 => {
                let rt = Ty {
                    shape: vec![t.shape[1], t.shape[0]],
                    elem: t.elem,
                };
                let r = self.fresh();
                self.emit(
                    format!(
                        "{r} = compute.permute {a} {{perm = array<i64: 1, 0>}} : ({tx}) -> {}",
                        rt.text()
                    ),
                    Some((r, rt)),
                );
            }
            _ => {
                let (b, _) = self.pick_where(|x| *x == t).unwrap();
                let (c, r) = (self.fresh(), self.fresh());
                let mt = Ty {
                    shape: t.shape.clone(),
                    elem: "i1",
                };
                let mtx = mt.text();
                self.emit(
                    format!("{c} = compute.compare {a}, {b} {{predicate = \"gt\"}} : ({tx}, {tx}) -> {mtx}"),
                    None,
                );
                self.emit(
                    format!("{r} = compute.select {c}, {a}, {b} : ({mtx}, {tx}, {tx}) -> {tx}"),
                    Some((r, t)),
                );
            }
        }
    }

    fn reduce_or_softmax(&mut self) {
        let Some((a, t)) = self.pick_where(|t| t.shape.len() == 2) else {
            return self.unary();
        };
        let d = self.rng.below(2);
        let r = self.fresh();
        if self.rng.chance(0.5) {
            self.emit(
                format!(
                    "{r} = compute.softmax {a} {{dim = {d} : i64}} : {}",
                    t.text()
                ),
                Some((r, t)),
            );
        } else {
            let mut s = t.shape.clone();
            s.remove(d);
            let rt = Ty {
                shape: s,
                elem: t.elem,
            };
            self.emit(
                format!(
                    "{r} = compute.reduce_sum {a} {{dim = {d} : i64}} : ({}) -> {}",
                    t.text(),
                    rt.text()
                ),
                Some((r, rt)),
            );
        }
    }

    fn cast_or_fill(&mut self) {
        let (a, t) = self.pick_ready();
        let r = self.fresh();
        if self.rng.chance(0.5) {
            let elem = *self.rng.pick(&["f32", "bf16", "f16"]);
            let rt = Ty {
                shape: t.shape.clone(),
                elem,
            };
            self.emit(
                format!("{r} = compute.cast {a} : ({}) -> {}", t.text(), rt.text()),
                Some((r, rt)),
            );
        } else {
            let v = *self.rng.pick(&["1.0", "-0.5", "0.25"]);
            self.emit(
                format!("{r} = compute.fill {{value = {v} : f64}} : {}", t.text()),
                Some((r, t)),
            );
        }
    }

    fn in_flight(&mut self, r: String, t: Ty) {
        self.in_flight.push((r, t));
    }

    fn all_reduce(&mut self) {
        let (a, t) = self.pick_ready();
        let (g, _) = self.group();
        let op = *self
            .rng
            .pick(&["sum", "sum", "avg", "max", "min", "product"]);
        let r = self.fresh();
        let c = self.cost();
        self.emit(
            format!(
                "{r} = coll.all_reduce {a} {{reduce_op = \"{op}\", group = @{g}{c}}} : {}",
                t.text()
            ),
            None,
        );
        self.in_flight(r, t);
    }

    fn all_gather(&mut self) {
        let (g, size) = self.group();
        let Some((a, t)) =
            self.pick_where(|t| !t.shape.is_empty() && t.numel() * size <= MAX_NUMEL)
        else {
            return self.all_reduce();
        };
        let mut s = t.shape.clone();
        s[0] *= size;
        let rt = Ty {
            shape: s,
            elem: t.elem,
        };
        let r = self.fresh();
        let c = self.cost();
        self.emit(
            format!(
                "{r} = coll.all_gather_into_tensor {a} {{group = @{g}{c}}} : ({}) -> {}",
                t.text(),
                rt.text()
            ),
            None,
        );
        self.in_flight(r, rt);
    }

    fn reduce_scatter(&mut self) {
        let (g, size) = self.group();
        let Some((a, t)) = self.pick_where(|t| !t.shape.is_empty() && t.shape[0] % size == 0)
        else {
            return self.all_reduce();
        };
        let mut s = t.shape.clone();
        s[0] /= size;
        let rt = Ty {
            shape: s,
            elem: t.elem,
        };
        let r = self.fresh();
        let op = *self.rng.pick(&["sum", "max", "avg"]);
        self.emit(format!("{r} = coll.reduce_scatter_tensor {a} {{reduce_op = \"{op}\", group = @{g}}} : ({}) -> {}", t.text(), rt.text()), None);
        self.in_flight(r, rt);
    }

    fn all_to_all(&mut self) {
        let (g, size) = self.group();
        let Some((a, t)) = self.pick_where(|t| !t.shape.is_empty() && t.shape[0] % size == 0)
        else {
            return self.all_reduce();
        };
        let r = self.fresh();
        let splits = if self.rng.chance(0.5) && t.shape[0] >= size {
            // Uneven but consistent splits: input[r][j] rows from rank r to rank j.
            let n = size as usize;
            let d0 = t.shape[0];
            // A circulant pattern keeps every row and column summing to d0.
            let base: Vec<i64> = {
                let mut v = vec![0i64; n];
                let mut left = d0;
                for (k, slot) in v.iter_mut().enumerate().take(n - 1) {
                    let take = if left > 0 {
                        self.rng.below(left as usize + 1) as i64
                    } else {
                        0
                    };
                    *slot = take;
                    left -= take;
                    let _ = k;
                }
                v[n - 1] = left;
                v
            };
            let input: Vec<Vec<i64>> = (0..n)
                .map(|r| (0..n).map(|j| base[(j + n - r) % n]).collect())
                .collect();
            let output: Vec<Vec<i64>> = (0..n)
                .map(|r| (0..n).map(|j| input[j][r]).collect())
                .collect();
            let fmt = |m: &Vec<Vec<i64>>| {
                let rows: Vec<String> = m
                    .iter()
                    .map(|row| {
                        format!(
                            "array<i64: {}>",
                            row.iter()
                                .map(|x| x.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    })
                    .collect();
                format!("[{}]", rows.join(", "))
            };
            format!(
                ", input_split_sizes = {}, output_split_sizes = {}",
                fmt(&input),
                fmt(&output)
            )
        } else {
            String::new()
        };
        self.emit(
            format!(
                "{r} = coll.all_to_all_single {a} {{group = @{g}{splits}}} : {}",
                t.text()
            ),
            None,
        );
        self.in_flight(r, t);
    }

    fn broadcast(&mut self) {
        let (a, t) = self.pick_ready();
        let (g, size) = self.group();
        let src = self.rng.below(size as usize);
        let r = self.fresh();
        self.emit(
            format!(
                "{r} = coll.broadcast {a} {{src = {src} : i64, group = @{g}}} : {}",
                t.text()
            ),
            None,
        );
        self.in_flight(r, t);
    }

    fn coalesced(&mut self) {
        let (a, ta) = self.pick_ready();
        let (b, tb) = self.pick_ready();
        let (g, size) = self.group();
        let r = self.fresh();
        let kind = self.rng.below(3);
        let (op, attrs, ra, rb) = match kind {
            0 => (
                "all_reduce_coalesced",
                format!("reduce_op = \"sum\", group = @{g}"),
                ta.clone(),
                tb.clone(),
            ),
            1 if !ta.shape.is_empty()
                && !tb.shape.is_empty()
                && (ta.numel() + tb.numel()) * size <= MAX_NUMEL =>
            {
                let mut sa = ta.shape.clone();
                sa[0] *= size;
                let mut sb = tb.shape.clone();
                sb[0] *= size;
                (
                    "all_gather_into_tensor_coalesced",
                    format!("group = @{g}"),
                    Ty {
                        shape: sa,
                        elem: ta.elem,
                    },
                    Ty {
                        shape: sb,
                        elem: tb.elem,
                    },
                )
            }
            2 if !ta.shape.is_empty()
                && !tb.shape.is_empty()
                && ta.shape[0] % size == 0
                && tb.shape[0] % size == 0 =>
            {
                let mut sa = ta.shape.clone();
                sa[0] /= size;
                let mut sb = tb.shape.clone();
                sb[0] /= size;
                (
                    "reduce_scatter_tensor_coalesced",
                    format!("reduce_op = \"sum\", group = @{g}"),
                    Ty {
                        shape: sa,
                        elem: ta.elem,
                    },
                    Ty {
                        shape: sb,
                        elem: tb.elem,
                    },
                )
            }
            _ => return self.all_reduce(),
        };
        self.emit(
            format!(
                "{r}:2 = coll.{op} {a}, {b} {{{attrs}}} : ({}, {}) -> ({}, {})",
                ta.text(),
                tb.text(),
                ra.text(),
                rb.text()
            ),
            None,
        );
        self.in_flight(format!("{r}#0"), ra);
        self.in_flight(format!("{r}#1"), rb);
    }

    fn shard_dim(&mut self) {
        let (g, size) = self.group();
        let Some((a, t)) = self
            .pick_where(|t| t.shape.len() == 2 && t.shape[1] % size == 0 && t.numel() <= MAX_NUMEL)
        else {
            return self.all_reduce();
        };
        let rt = Ty {
            shape: vec![t.shape[0] * size, t.shape[1] / size],
            elem: t.elem,
        };
        let r = self.fresh();
        self.emit(format!("{r} = coll.shard_dim_alltoall {a} {{gather_dim = 0 : i64, shard_dim = 1 : i64, group = @{g}}} : ({}) -> {}", t.text(), rt.text()), Some((r, rt)));
    }
}

/// A random valid program for `cfg.ranks` ranks, from `seed`. Same seed, same text.
pub fn random_program(seed: u64, cfg: &GenConfig) -> String {
    let mut rng = Rng::new(seed);
    let elem = *rng.pick(&cfg.elem_types);
    let mut out = String::new();
    let groups = if cfg.ranks >= 4 {
        out.push_str("  coll.group @tp {size = 2 : i64, symm_mem}\n");
        out.push_str(
            "  coll.group @dp {size = 2 : i64, ranks = [array<i64: 0, 2>, array<i64: 1, 3>]}\n",
        );
        out.push_str("  coll.group @world {size = 4 : i64}\n");
        vec![
            Group {
                name: "tp",
                size: 2,
            },
            Group {
                name: "dp",
                size: 2,
            },
            Group {
                name: "world",
                size: 4,
            },
        ]
    } else {
        out.push_str("  coll.group @tp {size = 2 : i64, symm_mem}\n");
        out.push_str("  coll.group @dp {size = 2 : i64}\n");
        vec![
            Group {
                name: "tp",
                size: 2,
            },
            Group {
                name: "dp",
                size: 2,
            },
        ]
    };
    let args = [
        Ty {
            shape: vec![8, 8],
            elem,
        },
        Ty {
            shape: vec![4, 8],
            elem,
        },
        Ty {
            shape: vec![8, 4],
            elem,
        },
    ];
    let mut g = Gen {
        rng,
        cfg: cfg.clone(),
        body: String::new(),
        next: 0,
        ready: Vec::new(),
        in_flight: Vec::new(),
        groups,
    };
    for (i, t) in args.iter().enumerate() {
        g.ready.push((format!("%arg{i}"), t.clone()));
    }
    while g.body.lines().count() < cfg.ops {
        g.step();
    }
    while let Some((name, ty)) = g.in_flight.pop() {
        let y = g.fresh();
        g.emit(
            format!("{y} = coll.wait_tensor {name} : {}", ty.text()),
            Some((y, ty)),
        );
    }
    // Return the last few values: some are waited collectives, which exercises copy-out.
    let n = g.ready.len();
    let rets: Vec<(String, Ty)> = g.ready[n.saturating_sub(3)..].to_vec();
    let params: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, t)| format!("%arg{i}: {}", t.text()))
        .collect();
    let rtys: Vec<String> = rets.iter().map(|(_, t)| t.text()).collect();
    let _ = writeln!(
        out,
        "  func.func @main({}) -> ({}) {{",
        params.join(", "),
        rtys.join(", ")
    );
    out.push_str(&g.body);
    let names: Vec<&str> = rets.iter().map(|(n, _)| n.as_str()).collect();
    let _ = writeln!(out, "    return {} : {}", names.join(", "), rtys.join(", "));
    out.push_str("  }\n");
    format!("module {{\n{out}}}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic() {
        let c = GenConfig::default();
        assert_eq!(random_program(7, &c), random_program(7, &c));
        assert_ne!(random_program(7, &c), random_program(8, &c));
    }

    #[test]
    fn model_ops_appear_only_when_asked() {
        let off = GenConfig {
            ops: 60,
            ..GenConfig::default()
        };
        let on = GenConfig {
            model_ops: true,
            ..off.clone()
        };
        let plain: String = (0..20).map(|s| random_program(s, &off)).collect();
        let model: String = (0..20).map(|s| random_program(s, &on)).collect();
        for op in [
            "compute.sigmoid",
            "compute.sin",
            "compute.cos",
            "compute.log",
            "compute.iota",
            "compute.compare",
            "compute.select",
            "compute.reduce_max",
            "compute.broadcast",
            "compute.permute",
        ] {
            assert!(model.contains(op), "{op} never generated");
            assert!(!plain.contains(op), "{op} generated without model_ops");
        }
    }

    #[test]
    fn every_collective_appears_across_seeds() {
        let c = GenConfig {
            ops: 60,
            ..GenConfig::default()
        };
        let all: String = (0..40).map(|s| random_program(s, &c)).collect();
        for op in [
            "coll.all_reduce ",
            "coll.all_gather_into_tensor ",
            "coll.reduce_scatter_tensor ",
            "coll.all_to_all_single",
            "coll.broadcast",
            "coll.shard_dim_alltoall",
            "_coalesced",
            "coll.wait_tensor",
            "compute.matmul",
            "compute.softmax",
            "compute.reduce_sum",
            "compute.concat",
            "compute.slice",
            "compute.cast",
            "compute.fill",
            "input_split_sizes",
        ] {
            assert!(all.contains(op), "{op} never generated");
        }
    }
}
