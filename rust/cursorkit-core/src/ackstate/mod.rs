//! Ack state: which positions of a topic a cursor has acknowledged.
//!
//! [`position`] addresses, `ledger_bits` (private) one ledger's roaring bitmap, [`rangeset`] the set of
//! acknowledged positions, [`batch`] partial batches, [`cursor`] mark-delete + all of them,
//! [`redeliveries`] durable redelivery counts, [`dispatch_counts`] a dispatcher's in-memory ones, and the byte forms: [`codec`] (compact, roaring
//! portable, `LongListMap` words) and [`wire`] (Pulsar's `PositionInfo` fields on the wire).

pub mod batch;
pub mod codec;
pub mod cursor;
pub mod dispatch_counts;
pub(crate) mod ledger_bits;
pub mod position;
pub mod rangeset;
pub mod redeliveries;
pub mod wire;
