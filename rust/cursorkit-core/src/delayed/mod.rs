//! Delayed delivery: the [`delay_queue`] of `(deliver_at, ledger, entry)` indexes, Pulsar's
//! in-memory [`tracker`] rules over it, and PIP-195's bucket [`snapshot`] segments.

mod bucket;
pub mod delay_queue;
mod queued_entries;
pub mod snapshot;
pub mod tracker;
