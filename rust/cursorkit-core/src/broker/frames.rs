//! Splitting a client's byte stream into frames, with SEND, ACK and FLOW decoded here.
//!
//! A frame is `totalSize u32 | commandSize u32 | BaseCommand [| payload section]`, big-endian
//! sizes. The scanner refuses what no decoder could recover from (a size over the limit, a size
//! that leaves no room for the command size, a command size that does not fit); every other frame
//! is either decoded here — only when every field it holds is one this decoder reads exactly as
//! Pulsar's protobuf schema does, so a frame taken here is one a full decoder would take with the
//! same values — or handed back whole as [`Frame::Other`] for the caller's full decoder, which
//! gives the errors. The hot decoder takes no payload section that it cannot check: a SEND whose
//! checksum fails, that carries broker entry metadata, or whose batch count its payload cannot
//! hold ([`batch_fits`]) goes to the full decoder.

use super::batches::batch_fits;
use super::reader::{int32, Reader, LEN, VARINT};
use crate::error::{CoreError, Result};

const TYPE_SEND: u64 = 6;
const TYPE_ACK: u64 = 10;
const TYPE_FLOW: u64 = 11;
const CHECKSUM_MAGIC: [u8; 2] = [0x0E, 0x01];
const BROKER_ENTRY_METADATA_MAGIC: [u8; 2] = [0x0E, 0x02];
/// The largest ledger or entry id a hot ACK carries (a `Position`'s bound); larger ones go whole.
const MAX_ID: u64 = i64::MAX as u64;

/// One frame of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A SEND whose checksum matched (or that had none), whose metadata is well formed and whose
    /// payload can hold the messages its metadata counts.
    Send {
        /// The producer's id on its connection.
        producer_id: u64,
        /// The producer's sequence id of the message (or the batch's first).
        sequence_id: u64,
        /// `metadataSize | MessageMetadata | payload`: what a broker stores.
        stored: &'a [u8],
        /// The metadata's publish time (ms).
        publish_time: u64,
        /// The metadata's `num_messages_in_batch`, at least 1.
        num_messages: u32,
        /// Whether the frame carried a checksum (then it matched).
        checksummed: bool,
    },
    /// An individual or cumulative ACK of whole entries (no `ack_set`, no request id).
    Ack {
        /// The consumer's id on its connection.
        consumer_id: u64,
        /// Cumulative (else individual).
        cumulative: bool,
        /// The acked (ledger, entry) ids, in frame order.
        ids: Vec<(u64, u64)>,
    },
    /// A FLOW: more permits for a consumer.
    Flow {
        /// The consumer's id on its connection.
        consumer_id: u64,
        /// Messages added to its permits.
        permits: u32,
    },
    /// Any other frame: its bytes after `totalSize`, for a full decoder.
    Other(&'a [u8]),
}

/// An incremental scanner: feed it chunks of the stream, in any split; it keeps at most one
/// unfinished frame between calls. After an error the stream has no frame boundary left and
/// every later feed fails with it again.
#[derive(Debug)]
pub struct FrameScanner {
    max_frame_size: u32,
    buffer: Vec<u8>,
    consumed: usize,
    failed: Option<String>,
}

impl FrameScanner {
    /// A scanner refusing frames whose `totalSize` passes `max_frame_size` (at least 8).
    pub fn new(max_frame_size: u64) -> Result<Self> {
        let max_frame_size = u32::try_from(max_frame_size)
            .ok()
            .filter(|&m| m >= 8)
            .ok_or_else(|| {
                CoreError::InvalidArgument(format!(
                    "max_frame_size must be in 8..=2^32-1, got {max_frame_size}"
                ))
            })?;
        Ok(Self {
            max_frame_size,
            buffer: Vec::new(),
            consumed: 0,
            failed: None,
        })
    }

    /// Bytes held of a frame not yet complete.
    pub fn buffered(&self) -> usize {
        self.buffer.len() - self.consumed
    }

    /// The frames `data` completes, in stream order (borrowing the scanner until the next feed).
    pub fn feed(&mut self, data: &[u8]) -> Result<Vec<Frame<'_>>> {
        if let Some(why) = &self.failed {
            return Err(CoreError::Protocol(format!("stream already failed: {why}")));
        }
        self.buffer.drain(..self.consumed);
        self.consumed = 0;
        self.buffer.extend_from_slice(data);
        let ends = match self.frame_ends() {
            Ok(ends) => ends,
            Err(why) => {
                self.buffer = Vec::new();
                self.failed = Some(why.clone());
                return Err(CoreError::Protocol(why));
            }
        };
        let mut start = 0;
        let mut frames = Vec::with_capacity(ends.len());
        for &end in &ends {
            frames.push(decode(&self.buffer[start + 4..end]));
            start = end;
        }
        self.consumed = start;
        Ok(frames)
    }

    /// Where each complete frame ends, checking every size field that has arrived.
    fn frame_ends(&self) -> std::result::Result<Vec<usize>, String> {
        let buffer = &self.buffer;
        let mut ends = Vec::new();
        let mut start = 0;
        while let Some(size) = be_u32(buffer, start) {
            if size > self.max_frame_size {
                return Err(format!(
                    "frame of {size} bytes is over the limit of {}",
                    self.max_frame_size
                ));
            }
            if size < 4 {
                return Err(format!(
                    "frame size {size} leaves no room for the command size"
                ));
            }
            if let Some(command_size) = be_u32(buffer, start + 4) {
                if command_size > size - 4 {
                    return Err(format!(
                        "command size {command_size} does not fit a frame of {size} bytes"
                    ));
                }
            }
            let end = start + 4 + size as usize;
            if buffer.len() < end {
                break;
            }
            ends.push(end);
            start = end;
        }
        Ok(ends)
    }
}

fn be_u32(data: &[u8], at: usize) -> Option<u32> {
    let bytes = data.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// A frame's bytes after `totalSize` (its command size known to fit) decoded, or handed back.
fn decode(body: &[u8]) -> Frame<'_> {
    hot(body).unwrap_or(Frame::Other(body))
}

fn hot(body: &[u8]) -> Option<Frame<'_>> {
    let command_size = be_u32(body, 0)? as usize;
    let command = body.get(4..4 + command_size)?;
    let rest = body.get(4 + command_size..)?;
    let (kind, sub) = base_command(command)?;
    match kind {
        TYPE_SEND => send(sub, rest),
        TYPE_ACK if rest.is_empty() => ack(sub),
        TYPE_FLOW if rest.is_empty() => flow(sub),
        _ => None,
    }
}

/// The type and sub-command of a BaseCommand holding exactly those two fields, the sub-command's
/// field number being the type's (as in Pulsar's schema).
fn base_command(command: &[u8]) -> Option<(u64, &[u8])> {
    let mut r = Reader::new(command);
    let (mut kind, mut sub) = (None, None);
    while !r.done() {
        match r.key()? {
            (1, VARINT) => kind = Some(r.varint()?),
            (field, LEN) if sub.is_none() && matches!(field, TYPE_SEND | TYPE_ACK | TYPE_FLOW) => {
                sub = Some((field, r.bytes()?));
            }
            _ => return None,
        }
    }
    let (field, sub) = sub?;
    (kind? == field).then_some((field, sub))
}

fn send<'a>(sub: &[u8], section: &'a [u8]) -> Option<Frame<'a>> {
    let mut r = Reader::new(sub);
    let (mut producer_id, mut sequence_id) = (None, None);
    while !r.done() {
        match r.key()? {
            (1, VARINT) => producer_id = Some(r.varint()?),
            (2, VARINT) => sequence_id = Some(r.varint()?),
            (3, VARINT) => {
                r.varint()?; // num_messages: the metadata's count is the one used
            }
            _ => return None,
        }
    }
    let (producer_id, sequence_id) = (producer_id?, sequence_id?);
    if section.starts_with(&BROKER_ENTRY_METADATA_MAGIC) {
        return None;
    }
    let (stored, checksummed) = if section.starts_with(&CHECKSUM_MAGIC) {
        let expected = be_u32(section, 2)?;
        let stored = section.get(6..)?;
        if crc32c::crc32c(stored) != expected {
            return None;
        }
        (stored, true)
    } else {
        (section, false)
    };
    let meta_size = be_u32(stored, 0)? as usize;
    let meta = stored.get(4..4usize.checked_add(meta_size)?)?;
    let m = metadata(meta)?;
    let payload_bytes = (stored.len() - 4 - meta_size) as u64;
    if !batch_fits(
        i64::from(m.count),
        payload_bytes,
        m.compression,
        m.uncompressed_size,
    ) {
        return None; // refused by the full decoder's caller
    }
    let (publish_time, num_messages) = (m.publish_time, m.count.max(1) as u32);
    Some(Frame::Send {
        producer_id,
        sequence_id,
        stored,
        publish_time,
        num_messages,
        checksummed,
    })
}

/// What the scanner reads of a SEND's `MessageMetadata`.
struct Metadata {
    publish_time: u64,
    /// `num_messages_in_batch` as sent (1 when absent).
    count: i32,
    /// The `CompressionType` (0, NONE, when absent).
    compression: u32,
    uncompressed_size: Option<u64>,
}

/// The fields a SEND needs of a `MessageMetadata` holding only fields read exactly here (strings
/// checked as UTF-8, enums in range, the three required fields present).
fn metadata(meta: &[u8]) -> Option<Metadata> {
    let mut r = Reader::new(meta);
    let (mut name, mut sequence, mut publish_time) = (false, false, None);
    let (mut count, mut compression, mut uncompressed_size) = (1i32, 0u32, None);
    while !r.done() {
        match r.key()? {
            (1, LEN) => {
                text(r.bytes()?)?;
                name = true;
            }
            (5 | 6 | 26, LEN) => text(r.bytes()?)?,
            (4, LEN) => key_value(r.bytes()?)?,
            (16 | 18, LEN) => {
                r.bytes()?;
            }
            (2, VARINT) => {
                r.varint()?;
                sequence = true;
            }
            (3, VARINT) => publish_time = Some(r.varint()?),
            (8, VARINT) => {
                let codec = r.varint()?;
                if codec > 4 {
                    return None; // not a CompressionType
                }
                compression = codec as u32;
            }
            (9, VARINT) => uncompressed_size = Some(u64::from(r.varint()? as u32)),
            (11, VARINT) => count = int32(r.varint()?),
            (12 | 17 | 19 | 24 | 25 | 30, VARINT) => {
                r.varint()?;
            }
            _ => return None,
        }
    }
    (name && sequence).then_some(())?;
    Some(Metadata {
        publish_time: publish_time?,
        count,
        compression,
        uncompressed_size,
    })
}

fn key_value(data: &[u8]) -> Option<()> {
    let mut r = Reader::new(data);
    let (mut key, mut value) = (false, false);
    while !r.done() {
        match r.key()? {
            (1, LEN) => {
                text(r.bytes()?)?;
                key = true;
            }
            (2, LEN) => {
                text(r.bytes()?)?;
                value = true;
            }
            _ => return None,
        }
    }
    (key && value).then_some(())
}

fn text(data: &[u8]) -> Option<()> {
    std::str::from_utf8(data).ok().map(|_| ())
}

fn ack(sub: &[u8]) -> Option<Frame<'_>> {
    let mut r = Reader::new(sub);
    let (mut consumer_id, mut cumulative) = (None, None);
    let mut ids = Vec::new();
    while !r.done() {
        match r.key()? {
            (1, VARINT) => consumer_id = Some(r.varint()?),
            (2, VARINT) => {
                cumulative = Some(match r.varint()? {
                    0 => false,
                    1 => true,
                    _ => return None,
                });
            }
            (3, LEN) => ids.push(message_id(r.bytes()?)?),
            _ => return None,
        }
    }
    Some(Frame::Ack {
        consumer_id: consumer_id?,
        cumulative: cumulative?,
        ids,
    })
}

/// A `MessageIdData`'s ledger and entry, when it has no `ack_set` nor chunk and both fit a
/// position (partition, batch index and batch size are read and not needed).
fn message_id(data: &[u8]) -> Option<(u64, u64)> {
    let mut r = Reader::new(data);
    let (mut ledger, mut entry) = (None, None);
    while !r.done() {
        match r.key()? {
            (1, VARINT) => ledger = Some(r.varint()?),
            (2, VARINT) => entry = Some(r.varint()?),
            (3 | 4 | 6, VARINT) => {
                r.varint()?;
            }
            _ => return None,
        }
    }
    let (ledger, entry) = (ledger?, entry?);
    (ledger <= MAX_ID && entry <= MAX_ID).then_some((ledger, entry))
}

fn flow(sub: &[u8]) -> Option<Frame<'_>> {
    let mut r = Reader::new(sub);
    let (mut consumer_id, mut permits) = (None, None);
    while !r.done() {
        match r.key()? {
            (1, VARINT) => consumer_id = Some(r.varint()?),
            (2, VARINT) => permits = Some(r.varint()? as u32),
            _ => return None,
        }
    }
    Some(Frame::Flow {
        consumer_id: consumer_id?,
        permits: permits?,
    })
}

#[cfg(test)]
#[path = "frames_tests.rs"]
mod tests;
