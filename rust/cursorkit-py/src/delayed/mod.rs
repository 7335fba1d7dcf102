//! Bindings of delayed delivery: `DelayQueue`, the in-memory tracker state and segment codecs.

pub mod delay_queue;
pub mod snapshot;
pub mod tracker;
