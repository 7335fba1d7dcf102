//! The entry records of the reference broker's message log, encoded and checked in bulk.
//!
//! A record is `CRC-32 u32 | length u32 | publish time i64 | messages u32 | data`, little endian,
//! the CRC (zlib's CRC-32) covering the 16 bytes after it and the data. A group commit encodes all
//! its records into one blob; a read checks every record it returns against its CRC.

use crate::error::{CoreError, Result};

/// Bytes of a record before its data.
pub const RECORD_HEADER: usize = 20;
/// The largest entry a record holds (a longer length field is damage, never an allocation).
pub const MAX_ENTRY_BYTES: usize = 1 << 30;

/// One record read back: its data, publish time (ms) and message count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// The entry's bytes.
    pub data: &'a [u8],
    /// The publish time it was stored with (ms).
    pub publish_time: i64,
    /// Messages in the entry.
    pub num_messages: u32,
}

/// Appends one record (`data` at most [`MAX_ENTRY_BYTES`], checked by the caller).
pub fn put_record(out: &mut Vec<u8>, data: &[u8], publish_time: i64, num_messages: u32) {
    let mut fields = [0u8; 16];
    fields[..4].copy_from_slice(&(data.len() as u32).to_le_bytes());
    fields[4..12].copy_from_slice(&publish_time.to_le_bytes());
    fields[12..].copy_from_slice(&num_messages.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&fields);
    crc.update(data);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&fields);
    out.extend_from_slice(data);
}

/// The records `data` holds end to end, the first being entry `first` of `ledger_id`; `Corrupt`
/// naming the entry when one is cut short or fails its checksum.
pub fn read_records(ledger_id: i64, first: i64, data: &[u8]) -> Result<Vec<Record<'_>>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let entry = first + out.len() as i64;
        let head = data.get(pos..pos + RECORD_HEADER).ok_or_else(|| {
            CoreError::Corrupt(format!("ledger {ledger_id}: entry {entry} is cut short"))
        })?;
        let word =
            |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
        let (crc, length, count) = (word(0), word(4) as usize, word(16));
        let mut time = [0u8; 8];
        time.copy_from_slice(&head[8..16]);
        let end = pos + RECORD_HEADER + length.min(data.len());
        let body = data.get(pos + 4..end).filter(|_| length <= MAX_ENTRY_BYTES);
        match body {
            Some(body) if crc32fast::hash(body) == crc => out.push(Record {
                data: &body[16..],
                publish_time: i64::from_le_bytes(time),
                num_messages: count,
            }),
            _ => {
                return Err(CoreError::Corrupt(format!(
                    "ledger {ledger_id}: entry {entry} fails its checksum"
                )))
            }
        }
        pos = end;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_and_damage_is_named() {
        let mut blob = Vec::new();
        put_record(&mut blob, b"one", -5, 1);
        put_record(&mut blob, b"", 7, 3);
        put_record(&mut blob, b"three", i64::MAX, u32::MAX);
        let got = read_records(4, 10, &blob).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0],
            Record {
                data: b"one",
                publish_time: -5,
                num_messages: 1
            }
        );
        assert_eq!(got[2].data, b"three");
        assert_eq!(
            read_records(4, 10, &blob[..blob.len() - 1])
                .unwrap_err()
                .to_string(),
            "ledger 4: entry 12 fails its checksum"
        );
        assert_eq!(
            read_records(4, 10, &blob[..30]).unwrap_err().to_string(),
            "ledger 4: entry 11 is cut short"
        );
        for i in 0..blob.len() {
            let mut flipped = blob.clone();
            flipped[i] ^= 0x10;
            assert!(read_records(4, 10, &flipped).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn a_crafted_length_is_damage_not_an_allocation() {
        let mut blob = Vec::new();
        put_record(&mut blob, b"x", 0, 1);
        blob[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_records(0, 0, &blob).is_err());
    }
}
