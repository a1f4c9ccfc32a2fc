//! commlir analyses and passes, one file per pass.
