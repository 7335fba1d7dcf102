//! The two frames a broker sends per message, written straight into an output buffer: MESSAGE
//! (a stored entry delivered to a consumer, behind its CRC-32C) and SEND_RECEIPT.
//!
//! Field numbers are Pulsar's: `BaseCommand.type` 1, `send_receipt` 7, `message` 9;
//! `CommandMessage` consumer_id 1, message_id 2, redelivery_count 3, ack_set 4;
//! `CommandSendReceipt` producer_id 1, sequence_id 2, message_id 3; `MessageIdData` ledgerId 1,
//! entryId 2, partition 3 (written only for a partition of a partitioned topic). Ids are unsigned
//! on the wire: Pulsar's -1 travels as 2^64 - 1.

use crate::ackstate::wire::{put_varint, varint_len};

const TYPE_SEND_RECEIPT: u8 = 7;
const TYPE_MESSAGE: u8 = 9;

/// No partition: the field is left out (the reader's default is -1).
const NO_PARTITION: i32 = -1;

fn partition_len(partition: i32) -> usize {
    if partition < 0 {
        0
    } else {
        1 + varint_len(partition as u64)
    }
}

fn message_id_len(ledger_id: u64, entry_id: u64, partition: i32) -> usize {
    2 + varint_len(ledger_id) + varint_len(entry_id) + partition_len(partition)
}

fn put_message_id(out: &mut Vec<u8>, tag: u8, ledger_id: u64, entry_id: u64, partition: i32) {
    out.push(tag);
    put_varint(out, message_id_len(ledger_id, entry_id, partition) as u64);
    out.push(0x08);
    put_varint(out, ledger_id);
    out.push(0x10);
    put_varint(out, entry_id);
    if partition >= 0 {
        out.push(0x18);
        put_varint(out, partition as u64);
    }
}

/// Appends `totalSize | commandSize | BaseCommand{type, field: body}` where `body_len` bytes of
/// the sub-command are then written by `body`; returns where `totalSize` is, to patch it.
fn put_command(
    out: &mut Vec<u8>,
    kind: u8,
    body_len: usize,
    body: impl FnOnce(&mut Vec<u8>),
) -> usize {
    let at = out.len();
    let command_len = 2 + 1 + varint_len(body_len as u64) + body_len;
    out.extend_from_slice(&((command_len + 4) as u32).to_be_bytes());
    out.extend_from_slice(&(command_len as u32).to_be_bytes());
    out.extend_from_slice(&[0x08, kind, (kind << 3) | 2]);
    put_varint(out, body_len as u64);
    body(out);
    at
}

/// Appends a MESSAGE frame delivering `stored` (`metadataSize | metadata | payload`) at
/// `ledger_id:entry_id` of `partition` (negative: not a partition) to `consumer_id`, with the
/// batch's `ack_set` words when given.
#[allow(clippy::too_many_arguments)]
pub fn put_message_frame(
    out: &mut Vec<u8>,
    consumer_id: u64,
    ledger_id: i64,
    entry_id: i64,
    partition: i32,
    redelivery_count: u32,
    ack_set: &[i64],
    stored: &[u8],
) {
    let (ledger, entry) = (ledger_id as u64, entry_id as u64);
    let id_len = message_id_len(ledger, entry, partition);
    let body_len = 1
        + varint_len(consumer_id)
        + 1
        + varint_len(id_len as u64)
        + id_len
        + 1
        + varint_len(u64::from(redelivery_count))
        + ack_set
            .iter()
            .map(|&w| 1 + varint_len(w as u64))
            .sum::<usize>();
    let at = put_command(out, TYPE_MESSAGE, body_len, |out| {
        out.push(0x08);
        put_varint(out, consumer_id);
        put_message_id(out, 0x12, ledger, entry, partition);
        out.push(0x18);
        put_varint(out, u64::from(redelivery_count));
        for &word in ack_set {
            out.push(0x20);
            put_varint(out, word as u64);
        }
    });
    out.extend_from_slice(&[0x0E, 0x01]);
    out.extend_from_slice(&crc32c::crc32c(stored).to_be_bytes());
    out.extend_from_slice(stored);
    let total = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&total.to_be_bytes());
}

/// Appends a SEND_RECEIPT frame for `producer_id`'s `sequence_id`, stored at `ledger_id:entry_id`.
pub fn put_send_receipt(
    out: &mut Vec<u8>,
    producer_id: u64,
    sequence_id: u64,
    ledger_id: i64,
    entry_id: i64,
) {
    let (ledger, entry) = (ledger_id as u64, entry_id as u64);
    let id_len = message_id_len(ledger, entry, NO_PARTITION);
    let body_len = 1
        + varint_len(producer_id)
        + 1
        + varint_len(sequence_id)
        + 1
        + varint_len(id_len as u64)
        + id_len;
    put_command(out, TYPE_SEND_RECEIPT, body_len, |out| {
        out.push(0x08);
        put_varint(out, producer_id);
        out.push(0x10);
        put_varint(out, sequence_id);
        put_message_id(out, 0x1A, ledger, entry, NO_PARTITION);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::frames::{Frame, FrameScanner};

    #[test]
    fn a_receipt_is_a_well_formed_frame() {
        let mut out = Vec::new();
        put_send_receipt(&mut out, 3, 300, 7, -1);
        let total = u32::from_be_bytes([out[0], out[1], out[2], out[3]]) as usize;
        assert_eq!(total + 4, out.len());
        let command = u32::from_be_bytes([out[4], out[5], out[6], out[7]]) as usize;
        assert_eq!(command + 8, out.len());
        assert_eq!(&out[8..11], &[0x08, 7, 0x3A]);
        // -1 travels as ten bytes
        assert!(out
            .windows(10)
            .any(|w| w == [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]));
    }

    #[test]
    fn a_message_frame_carries_its_stored_bytes_behind_their_checksum() {
        let stored = b"\x00\x00\x00\x02\x0a\x00payload";
        let mut out = Vec::new();
        put_message_frame(&mut out, 1, 2, 3, NO_PARTITION, 4, &[-1, 5], stored);
        assert!(out.ends_with(stored));
        let crc_at = out.len() - stored.len() - 4;
        assert_eq!(&out[crc_at - 2..crc_at], &[0x0E, 0x01]);
        assert_eq!(
            out[crc_at..crc_at + 4],
            crc32c::crc32c(stored).to_be_bytes()
        );
        let mut scanner = FrameScanner::new(1 << 20).unwrap();
        let frames = scanner.feed(&out).unwrap();
        assert!(matches!(frames.as_slice(), [Frame::Other(b)] if b.len() + 4 == out.len()));
    }

    #[test]
    fn a_partition_travels_in_the_message_id_only_when_there_is_one() {
        let stored = b"\x00\x00\x00\x02\x0a\x00payload";
        let (mut plain, mut partitioned) = (Vec::new(), Vec::new());
        put_message_frame(&mut plain, 1, 2, 3, NO_PARTITION, 0, &[], stored);
        put_message_frame(&mut partitioned, 1, 2, 3, 7, 0, &[], stored);
        assert_eq!(partitioned.len(), plain.len() + 2);
        // MessageIdData{ledgerId 2, entryId 3, partition 7}
        assert!(partitioned
            .windows(8)
            .any(|w| w == [0x12, 6, 0x08, 2, 0x10, 3, 0x18, 7]));
        assert!(plain.windows(6).any(|w| w == [0x12, 4, 0x08, 2, 0x10, 3]));
    }
}
