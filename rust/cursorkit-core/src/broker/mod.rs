//! The reference broker's per-frame work on Pulsar's wire protocol, done in bulk: splitting the
//! byte stream a client sends into frames and decoding the three commands that come once per
//! message or per few (SEND, ACK, FLOW), and writing the two frames a broker sends per message
//! (MESSAGE, SEND_RECEIPT). Pure byte work: the sockets, the log and every decision stay with the
//! caller. Frames the hot decoder does not take whole are handed back as bytes for a full decoder.

pub mod batches;
pub mod checksum;
pub mod entries;
pub mod frames;
pub mod out;
mod reader;
pub mod records;

pub use batches::{batch_fits, MIN_BATCHED_MESSAGE_BYTES};
pub use checksum::crc32c;
pub use entries::entry_fields;
pub use frames::{Frame, FrameScanner};
pub use out::{put_message_frame, put_send_receipt};
pub use records::{put_record, read_records, Record, MAX_ENTRY_BYTES, RECORD_HEADER};
