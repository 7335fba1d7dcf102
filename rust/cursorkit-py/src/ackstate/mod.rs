//! Bindings of the ack state: `Position`, `RangeSet`, the `Cursor` state and redelivery counts.

pub mod cursor;
pub mod position;
pub mod rangeset;
pub mod redeliveries;
