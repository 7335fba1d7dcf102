//! Bindings of the reference broker's byte work: the frame scanner and the per-message frames.

pub mod checksum;
pub mod frames;
pub mod records;
pub mod scanner;
