//! The builtin dialect: `builtin.module`, the top-level container every program lives in.

use crate::opdef::{OpDef, Syntax, Trait};

crate::register_dialect!(pub BUILTIN_DIALECT = crate::opdef::DialectDef {
    name: "builtin",
    summary: "Top-level structure of every program.",
    description: "Holds `builtin.module`, the symbol table at the root of every file.",
});

crate::register_op!(
    /// `module [@name] [attributes {...}] { ... }`.
    pub MODULE = OpDef {
        name: "builtin.module",
        summary: "A top-level container holding a symbol table",
        description: "A module holds one block of ops: functions, groups and other symbols. \
            A file without an explicit module gets an implicit one.",
        regions: Some(1),
        traits: &[Trait::IsolatedFromAbove, Trait::SymbolTable, Trait::NoTerminator, Trait::SingleBlock],
        syntax: Syntax::Module,
        example: "module @m {\n}",
        ..OpDef::EMPTY
    }
);
