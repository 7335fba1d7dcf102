//! Pulsar's `PositionInfo` ack fields on the wire: exact sizes (to compare encodings without
//! encoding) and the field bytes themselves (a fast path for what protobuf would write).
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

/// Appends a base-128 varint.
#[inline]
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends one `NestedPositionInfo` as field `tag` of a `MessageRange`.
fn put_nested(out: &mut Vec<u8>, tag: u8, ledger_id: i64, entry_id: i64) {
    out.push(tag);
    put_varint(out, nested_position(ledger_id, entry_id) as u64);
    out.push(0x08);
    put_varint(out, ledger_id as u64);
    out.push(0x10);
    put_varint(out, entry_id as u64);
}

impl RangeSet {
    /// The first `max_ranges` ranges as `PositionInfo` field 3 (`repeated MessageRange`), byte for
    /// byte what protobuf writes for them; appended to a serialised `PositionInfo` it adds them.
    pub fn message_range_field_bytes(&self, max_ranges: Option<u64>) -> Vec<u8> {
        let rows = self.ranges_rows(max_ranges);
        let mut out = Vec::with_capacity(rows.iter().map(message_range_field).sum());
        for row in &rows {
            let payload = delimited(nested_position(row[0], row[1]))
                + delimited(nested_position(row[2], row[3]));
            out.push(0x1A);
            put_varint(&mut out, payload as u64);
            put_nested(&mut out, 0x0A, row[0], row[1]);
            put_nested(&mut out, 0x12, row[2], row[3]);
        }
        out
    }

    /// `to_long_list_map(max_entries)` as `PositionInfo` field 6 (`repeated LongListMap`, words
    /// not packed), byte for byte what protobuf writes.
    pub fn long_list_map_field_bytes(&self, max_entries: Option<u64>) -> Vec<u8> {
        let map = self.to_long_list_map(max_entries);
        let mut out = Vec::with_capacity(map.iter().map(|(k, w)| long_list_map_field(*k, w)).sum());
        for (key, words) in &map {
            let body = 1
                + varint_len(*key as u64)
                + words
                    .iter()
                    .map(|&w| 1 + varint_len(w as u64))
                    .sum::<usize>();
            out.push(0x32);
            put_varint(&mut out, body as u64);
            out.push(0x08);
            put_varint(&mut out, *key as u64);
            for &w in words {
                out.push(0x10);
                put_varint(&mut out, w as u64);
            }
        }
        out
    }

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
    fn field_bytes_have_the_computed_sizes() {
        let mut rs = RangeSet::new(false);
        rs.add_open_closed(5, -1, 5, 5, None).unwrap();
        rs.add_many(&[9, 9, 9, 300], &[63, 64, 1000, 70_000])
            .unwrap();
        let mr = rs.message_range_field_bytes(None);
        assert_eq!(mr.len(), rs.message_range_wire_size(None));
        assert_eq!(&mr[..4], &[0x1A, 21, 0x0A, 13]);
        let llm = rs.long_list_map_field_bytes(None);
        assert_eq!(llm.len(), rs.long_list_map_wire_size(None));
        assert_eq!(&llm[..4], &[0x32, 4, 0x08, 5]);
    }

    #[test]
    fn one_range_from_entry_zero() {
        // (5:-1..5:5]: lower {08 05 10 <10 bytes>} = 13, upper {08 05 10 05} = 4;
        // MessageRange payload = (1+1+13) + (1+1+4) = 21; as a field: 1 + 1 + 21 = 23.
        assert_eq!(message_range_field(&[5, -1, 5, 5]), 23);
    }
}
