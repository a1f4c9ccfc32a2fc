//! Pass manager.
