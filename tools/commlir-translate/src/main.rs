//! commlir-translate: thin driver over [`commlir_codegen`].

fn main() {
    let (a, b, c) = commlir_codegen::llvm_version();
    println!("LLVM {a}.{b}.{c}");
}
