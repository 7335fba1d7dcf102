//! Bindings of Shared dispatch: the round-robin dispatch core behind `SharedDispatcher`.

pub mod core;
