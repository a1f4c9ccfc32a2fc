//! Snapshot tests of the printer on a representative module, in the custom and generic forms,
//! with and without debug info.

mod printer_common;

use commlir_ir::printer::{print_op, PrintOptions};

fn print(generic: bool, debug_info: bool) -> String {
    let mut ctx = printer_common::context();
    let m = printer_common::sample_module(&mut ctx);
    print_op(
        &ctx,
        m,
        &PrintOptions {
            generic,
            debug_info,
        },
    )
}

#[test]
fn custom() {
    insta::assert_snapshot!(print(false, false));
}

#[test]
fn custom_debug_info() {
    insta::assert_snapshot!(print(false, true));
}

#[test]
fn generic() {
    insta::assert_snapshot!(print(true, false));
}

#[test]
fn generic_debug_info() {
    insta::assert_snapshot!(print(true, true));
}
