//! The dialect pages in `docs/dialects/` must match the op definitions. Run with
//! `UPDATE_DOCS=1` to regenerate them.

use commlir_dialects::docgen::{dialect_page, DOCUMENTED};
use commlir_ir::Registry;
use std::path::PathBuf;

#[test]
fn dialect_docs_are_fresh() {
    commlir_dialects::link();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/dialects");
    let update = std::env::var_os("UPDATE_DOCS").is_some();
    let mut stale = Vec::new();
    for d in DOCUMENTED {
        let page = dialect_page(Registry::global(), d);
        let path = dir.join(format!("{d}.md"));
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &page).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(page.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    assert!(stale.is_empty(), "stale dialect docs (run `UPDATE_DOCS=1 cargo test -p commlir-dialects --test docs_fresh`): {stale:?}");
}
