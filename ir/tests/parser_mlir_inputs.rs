//! Files printed by real `mlir-opt-22` (under `tests/inputs/`) must parse.

use commlir_ir::parser::{parse_source, ParseOptions};
use commlir_ir::{Context, SourceFile, SourceMgr};

fn parse_file(name: &str) -> (Context, commlir_ir::OpId) {
    let path = format!("{}/tests/inputs/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).expect("input file");
    let mut ctx = Context::new();
    ctx.allow_unregistered = true;
    match parse_source(&mut ctx, name, &bytes, &ParseOptions::default()) {
        Ok(m) => (ctx, m),
        Err(d) => {
            let mut sm = SourceMgr::default();
            sm.add(SourceFile::new(name, String::from_utf8_lossy(&bytes)));
            panic!("{}", sm.render(&ctx, &d));
        }
    }
}

#[test]
fn every_input_parses() {
    let dir = format!("{}/tests/inputs", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("inputs dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".mlir"))
        .collect();
    names.sort();
    assert!(!names.is_empty());
    for n in names {
        let (ctx, m) = parse_file(&n);
        assert_eq!(ctx.op_name(m), "builtin.module", "{n}");
    }
}
