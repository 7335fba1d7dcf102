//! Bindings of Key_Shared: sticky-key hashing, the selectors, draining hashes, the dispatch core
//! and the per-event calls of `KeySharedDispatcher`.

pub mod dispatch;
pub mod dispatcher;
pub mod draining;
pub mod hash;
pub mod selector;
