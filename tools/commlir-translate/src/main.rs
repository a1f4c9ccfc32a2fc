//! commlir-translate: the translation driver. The stages live in
//! [`commlir_codegen::translate`] and [`commlir_mlir_interop`]; [`driver`] only routes.

mod driver;

fn main() -> std::process::ExitCode {
    driver::main()
}
