//! commlir-opt driver.
