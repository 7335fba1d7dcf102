//! Exact protobuf sizes of Pulsar's `PositionInfo` ack fields, to compare encodings without encoding.
//!
//! `PositionInfo.individualDeletedMessages` (field 3) is `repeated MessageRange` with
//! `MessageRange{1: NestedPositionInfo lower, 2: NestedPositionInfo upper}` and
//! `NestedPositionInfo{1: int64 ledgerId, 2: int64 entryId}`;
//! `PositionInfo.individualDeletedMessageRanges` (field 6) is `repeated LongListMap` with
//! `LongListMap{1: int64 key, 2: repeated int64 values}` (not packed). All fields are proto2.

use crate::rangeset::RangeSet;

/// Bytes of a base-128 varint; negative int64 values take 10.
#[inline]
pub fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

/// Bytes of a length-delimited field (one-byte tag) whose payload is `len` bytes.
#[inline]
fn delimited(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// Bytes of one `NestedPositionInfo` payload.
#[inline]
fn nested_position(ledger_id: i64, entry_id: i64) -> usize {
    2 + varint_len(ledger_id as u64) + varint_len(entry_id as u64)
}

/// Bytes of one `MessageRange` as an element of a repeated field (tag, length and payload).
pub fn message_range_field(row: &[i64; 4]) -> usize {
    let payload =
        delimited(nested_position(row[0], row[1])) + delimited(nested_position(row[2], row[3]));
    delimited(payload)
}

/// Bytes of one `LongListMap` as an element of a repeated field.
pub fn long_list_map_field(key: i64, words: &[i64]) -> usize {
    let payload = 1
        + varint_len(key as u64)
        + words
            .iter()
            .map(|&w| 1 + varint_len(w as u64))
            .sum::<usize>();
    delimited(payload)
}

impl RangeSet {
    /// Bytes the first `max_ranges` ranges take as `PositionInfo` field 3.
    pub fn message_range_wire_size(&self, max_ranges: Option<u64>) -> usize {
        self.ranges_rows(max_ranges)
            .iter()
            .map(message_range_field)
            .sum()
    }

    /// Bytes `to_long_list_map(max_entries)` takes as `PositionInfo` field 6.
    pub fn long_list_map_wire_size(&self, max_entries: Option<u64>) -> usize {
        self.to_long_list_map(max_entries)
            .iter()
            .map(|(k, w)| long_list_map_field(*k, w))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_lengths() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(127), 1);
        assert_eq!(varint_len(128), 2);
        assert_eq!(varint_len(u64::MAX), 10);
        assert_eq!(varint_len(-1i64 as u64), 10);
    }

    #[test]
    fn one_range_from_entry_zero() {
        // (5:-1..5:5]: lower {08 05 10 <10 bytes>} = 13, upper {08 05 10 05} = 4;
        // MessageRange payload = (1+1+13) + (1+1+4) = 21; as a field: 1 + 1 + 21 = 23.
        assert_eq!(message_range_field(&[5, -1, 5, 5]), 23);
    }
}
