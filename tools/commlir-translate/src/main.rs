//! commlir-translate: the translation driver. All the logic lives in
//! [`commlir_codegen::translate`], so embedders can drive the same stages.

fn main() -> std::process::ExitCode {
    commlir_codegen::translate::translate_main()
}
