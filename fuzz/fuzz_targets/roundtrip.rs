//! parse → verify → print → parse → verify → print: nothing may panic, what was printed must
//! parse and verify again, and the second print must equal the first (the printer's output is
//! a fixed point), in both the custom and the generic form.

#![no_main]

use commlir::ir::parser::{parse_source, ParseOptions};
use commlir::ir::printer::{print_op, PrintOptions};
use commlir::ir::verify::verify;
use commlir::ir::Context;
use libfuzzer_sys::fuzz_target;

/// The tools run on a big stack (deep but allowed nesting recurses in the printer); so does
/// the fuzz target.
const STACK: usize = 256 << 20;

fn parse_and_print(text: &[u8], opts: &PrintOptions) -> Option<String> {
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    let module = parse_source(&mut ctx, "fuzz.mlir", text, &ParseOptions::default()).ok()?;
    verify(&ctx, module).ok()?;
    Some(print_op(&ctx, module, opts))
}

fn roundtrip(data: &[u8]) {
    for generic in [false, true] {
        for debug_info in [false, true] {
            let opts = PrintOptions {
                generic,
                debug_info,
            };
            let Some(first) = parse_and_print(data, &opts) else {
                return;
            };
            let second = parse_and_print(first.as_bytes(), &opts).unwrap_or_else(|| {
                panic!("printed IR does not parse or verify (generic={generic}):\n{first}")
            });
            assert_eq!(
                first, second,
                "printing is not a fixed point (generic={generic}, debug_info={debug_info})"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    commlir::register_all();
    let data = data.to_vec();
    let worker = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || roundtrip(&data))
        .expect("spawn the fuzzing thread");
    if let Err(panic) = worker.join() {
        std::panic::resume_unwind(panic);
    }
});
