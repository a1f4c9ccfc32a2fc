//! A tiny program builder for the runtime tests: modules, groups and functions through
//! `commlir_ir::Builder`, without the parser.

#![allow(dead_code)]

use commlir_ir::{
    AttrKind, BlockId, Builder, CommBufferKind, Context, FloatKind, OpId, OpState, Type, Value,
};
use commlir_runtime::{format_results, sim, PrintMode, RankResults, SimError};

pub struct Prog {
    pub ctx: Context,
    pub module: OpId,
    body: BlockId,
    func: Option<(OpId, BlockId)>,
    line: u32,
}

impl Prog {
    pub fn new() -> Self {
        commlir_dialects::link();
        let mut ctx = Context::new();
        let name = ctx.ident("builtin.module");
        let mut st = OpState::new(name, ctx.unknown_loc());
        st.num_regions = 1;
        let module = ctx.create_op(st);
        let body = ctx.new_block(&[]);
        let r = ctx.op_regions(module)[0];
        ctx.append_block(r, body);
        Prog {
            ctx,
            module,
            body,
            func: None,
            line: 1,
        }
    }

    pub fn elem(&mut self, e: &str) -> Type {
        match e {
            "f16" => self.ctx.float_type(FloatKind::F16),
            "bf16" => self.ctx.float_type(FloatKind::BF16),
            "f32" => self.ctx.float_type(FloatKind::F32),
            "f64" => self.ctx.float_type(FloatKind::F64),
            "i32" => self.ctx.int_type(32),
            "i8" => self.ctx.int_type(8),
            _ => panic!("unknown element type {e}"),
        }
    }

    /// `tensor<shape x elem>`.
    pub fn t(&mut self, shape: &[i64], e: &str) -> Type {
        let elem = self.elem(e);
        self.ctx.tensor_type(shape, elem)
    }

    /// `t` with a `#comm.buffer<kind, @group>` encoding.
    pub fn buf(&mut self, t: Type, kind: CommBufferKind, group: &str) -> Type {
        commlir_dialects::comm::buffer_type(&mut self.ctx, t, kind, group)
    }

    pub fn i64(&mut self, v: i64) -> commlir_ir::Attr {
        self.ctx.int_attr(v, 64)
    }
    pub fn f64(&mut self, v: f64) -> commlir_ir::Attr {
        let ty = self.ctx.float_type(FloatKind::F64);
        self.ctx.attr(AttrKind::Float {
            value: commlir_ir::FloatValue::Bits(v.to_bits()),
            ty,
        })
    }
    pub fn s(&mut self, v: &str) -> commlir_ir::Attr {
        self.ctx.str_attr(v)
    }
    pub fn sym(&mut self, v: &str) -> commlir_ir::Attr {
        self.ctx.symbol_ref(v)
    }
    pub fn ints(&mut self, v: &[i64]) -> commlir_ir::Attr {
        let items = v.iter().map(|x| self.ctx.int_attr(*x, 64)).collect();
        self.ctx.attr(AttrKind::Array(items))
    }
    pub fn matrix(&mut self, rows: &[&[i64]]) -> commlir_ir::Attr {
        let items = rows.iter().map(|r| self.ints(r)).collect();
        self.ctx.attr(AttrKind::Array(items))
    }

    fn next_loc(&mut self) -> commlir_ir::Loc {
        self.line += 1;
        self.ctx.file_loc("test.mlir", self.line, 5)
    }

    /// `coll.group @name {size, ranks?, symm_mem?}`.
    pub fn group(&mut self, name: &str, size: i64, ranks: Option<commlir_ir::Attr>, symm: bool) {
        let mut attrs = vec![("sym_name", self.s(name)), ("size", self.i64(size))];
        if let Some(r) = ranks {
            attrs.push(("ranks", r));
        }
        if symm {
            attrs.push(("symm_mem", self.ctx.unit_attr()));
        }
        let loc = self.next_loc();
        let mut b = Builder::at_end(&mut self.ctx, self.body);
        b.loc = loc;
        b.create("coll.group", &[], &[], &attrs);
    }

    /// Starts `func.func @name(args)`; returns its arguments.
    pub fn func(&mut self, name: &str, args: &[Type]) -> Vec<Value> {
        let fty = self.ctx.function_type(args.to_vec(), vec![]);
        let attrs = [
            ("sym_name", self.s(name)),
            ("function_type", self.ctx.type_attr(fty)),
        ];
        let loc = self.next_loc();
        let fname = self.ctx.ident("func.func");
        let mut st = OpState::new(fname, loc);
        st.num_regions = 1;
        st.attrs = attrs.iter().map(|(k, v)| (self.ctx.ident(k), *v)).collect();
        let f = self.ctx.create_op(st);
        self.ctx.append_op(self.body, f);
        let entry = self.ctx.new_block(args);
        let r = self.ctx.op_regions(f)[0];
        self.ctx.append_block(r, entry);
        self.func = Some((f, entry));
        self.ctx.block_args(entry).to_vec()
    }

    /// Appends an op to the current function.
    pub fn op(
        &mut self,
        name: &str,
        operands: &[Value],
        results: &[Type],
        attrs: &[(&str, commlir_ir::Attr)],
    ) -> Vec<Value> {
        let loc = self.next_loc();
        let (_, entry) = self.func.expect("inside a function");
        let mut b = Builder::at_end(&mut self.ctx, entry);
        b.loc = loc;
        let op = b.create(name, operands, results, attrs);
        self.ctx.results(op).to_vec()
    }

    /// A single-result op.
    pub fn op1(
        &mut self,
        name: &str,
        operands: &[Value],
        result: Type,
        attrs: &[(&str, commlir_ir::Attr)],
    ) -> Value {
        self.op(name, operands, &[result], attrs)[0]
    }

    /// `func.return vals`, fixing the function type's results.
    pub fn ret(&mut self, vals: &[Value]) {
        let (f, entry) = self.func.take().expect("inside a function");
        let args: Vec<Type> = self
            .ctx
            .block_args(entry)
            .iter()
            .map(|v| self.ctx.value_type(*v))
            .collect();
        let results: Vec<Type> = vals.iter().map(|v| self.ctx.value_type(*v)).collect();
        let fty = self.ctx.function_type(args, results);
        let a = self.ctx.type_attr(fty);
        self.ctx.set_attr(f, "function_type", a);
        let loc = self.next_loc();
        let mut b = Builder::at_end(&mut self.ctx, entry);
        b.loc = loc;
        b.create("func.return", vals, &[], &[]);
    }

    /// Verifies the module (panics with the messages if invalid).
    pub fn verify(&self) {
        if let Err(errs) = commlir_ir::verify::verify(&self.ctx, self.module) {
            panic!(
                "invalid test IR: {:?}",
                errs.iter().map(|d| d.message.clone()).collect::<Vec<_>>()
            );
        }
    }

    pub fn try_run(&self, ranks: usize) -> Result<Vec<RankResults>, SimError> {
        sim::try_run(
            &self.ctx,
            self.module,
            &sim::SimOptions {
                ranks,
                ..Default::default()
            },
        )
    }

    /// Verifies, runs and formats.
    pub fn lines(&self, ranks: usize) -> String {
        self.verify();
        format_results(
            &self.try_run(ranks).expect("run succeeds"),
            PrintMode::Digest,
        )
    }

    /// The error of a failing run, rendered as the CLI would (without source lines).
    pub fn error(&self, ranks: usize) -> String {
        let err = self.try_run(ranks).expect_err("run fails");
        let d = err.to_diagnostic(&self.ctx);
        commlir_ir::SourceMgr::default().render(&self.ctx, &d)
    }
}
