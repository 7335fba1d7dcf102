//! Bindings of the ack state: `Position`, `RangeSet`, the `Cursor` state and redelivery counts
//! (durable, and the columns a dispatcher's in-memory ones cross in).

pub mod cursor;
pub mod dispatch_counts;
pub mod position;
pub mod rangeset;
pub mod redeliveries;
