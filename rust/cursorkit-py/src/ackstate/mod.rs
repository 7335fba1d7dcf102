//! Bindings of the ack state: `Position`, `RangeSet` and the `Cursor` state.

pub mod cursor;
pub mod position;
pub mod rangeset;
