//! Bindings of Key_Shared: sticky-key hashing, the selectors, draining hashes and pending acks.

pub mod dispatch;
pub mod draining;
pub mod hash;
pub mod selector;
