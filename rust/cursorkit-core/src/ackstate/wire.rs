//! Pulsar's `PositionInfo` ack fields on the wire: exact sizes (to compare encodings without
//! encoding) and the field bytes themselves (a fast path for what protobuf would write).
//!
//! `PositionInfo.individualDeletedMessages` (field 3) is `repeated MessageRange` with
//! `MessageRange{1: NestedPositionInfo lower, 2: NestedPositionInfo upper}` and
//! `NestedPositionInfo{1: int64 ledgerId, 2: int64 entryId}`;
//! `PositionInfo.individualDeletedMessageRanges` (field 6) is `repeated LongListMap` with
//! `LongListMap{1: int64 key, 2: repeated int64 values}` (not packed). All fields are proto2.
// A decoder of bytes from disk or a peer: no unwrap/expect/panic/unchecked indexing outside tests.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use std::collections::BTreeMap;

use crate::ackstate::ledger_bits::LedgerBits;
use crate::ackstate::rangeset::RangeSet;
use crate::error::{CoreError, Result};

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
pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
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

/// Reads a base-128 varint at `*pos`.
fn get_varint(data: &[u8], pos: &mut usize) -> Result<u64> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *data
            .get(*pos)
            .ok_or_else(|| CoreError::Corrupt(format!("varint runs past the end at byte {pos}")))?;
        *pos += 1;
        value |= u64::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(CoreError::Corrupt(format!(
        "varint longer than 10 bytes before byte {pos}"
    )))
}

/// One field of a protobuf message: its number and, for length-delimited fields, the payload.
fn next_field<'a>(data: &'a [u8], pos: &mut usize) -> Result<(u64, Option<&'a [u8]>, u64)> {
    let at = *pos;
    let key = get_varint(data, pos)?;
    let (number, wire_type) = (key >> 3, key & 7);
    let skip = |pos: &mut usize, n: usize| -> Result<()> {
        if data.len() - *pos < n {
            return Err(CoreError::Corrupt(format!(
                "field {number} at byte {at} runs past the end"
            )));
        }
        *pos += n;
        Ok(())
    };
    match wire_type {
        0 => Ok((number, None, get_varint(data, pos)?)),
        1 => skip(pos, 8).map(|()| (number, None, 0)),
        5 => skip(pos, 4).map(|()| (number, None, 0)),
        2 => {
            let len = usize::try_from(get_varint(data, pos)?).unwrap_or(usize::MAX);
            let start = *pos;
            skip(pos, len)?;
            let payload = data.get(start..start.saturating_add(len)).ok_or_else(|| {
                CoreError::Corrupt(format!("field {number} at byte {at} runs past the end"))
            })?;
            Ok((number, Some(payload), 0))
        }
        other => Err(CoreError::Corrupt(format!(
            "field {number} at byte {at} has unsupported wire type {other}"
        ))),
    }
}

/// A `NestedPositionInfo`: both required fields.
fn nested_from(data: &[u8]) -> Result<(i64, i64)> {
    let (mut ledger, mut entry) = (None, None);
    let mut pos = 0;
    while pos < data.len() {
        match next_field(data, &mut pos)? {
            (1, None, v) => ledger = Some(v as i64),
            (2, None, v) => entry = Some(v as i64),
            _ => {}
        }
    }
    match (ledger, entry) {
        (Some(l), Some(e)) => Ok((l, e)),
        _ => Err(CoreError::Corrupt(
            "a NestedPositionInfo lacks ledgerId or entryId".to_owned(),
        )),
    }
}

/// The `MessageRange` rows `(lk, lv, uk, uv)` of field `field` of a serialised message
/// (`PositionInfo` field 3, `ManagedCursorInfo` field 4); other fields are skipped.
pub fn parse_message_ranges(data: &[u8], field: u64) -> Result<Vec<[i64; 4]>> {
    let mut rows = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let (number, payload, _) = next_field(data, &mut pos)?;
        let Some(range) = payload.filter(|_| number == field) else {
            continue;
        };
        let (mut lower, mut upper) = (None, None);
        let mut at = 0;
        while at < range.len() {
            match next_field(range, &mut at)? {
                (1, Some(p), _) => lower = Some(nested_from(p)?),
                (2, Some(p), _) => upper = Some(nested_from(p)?),
                _ => {}
            }
        }
        let (Some((lk, lv)), Some((uk, uv))) = (lower, upper) else {
            return Err(CoreError::Corrupt(format!(
                "a MessageRange before byte {pos} lacks an endpoint"
            )));
        };
        rows.push([lk, lv, uk, uv]);
    }
    Ok(rows)
}

impl RangeSet {
    /// The first `max_ranges` ranges as `PositionInfo` field 3 (`repeated MessageRange`), byte for
    /// byte what protobuf writes for them; appended to a serialised `PositionInfo` it adds them.
    pub fn message_range_field_bytes(&self, max_ranges: Option<u64>) -> Vec<u8> {
        self.message_ranges_tagged(max_ranges, 0x1A)
    }

    /// The same ranges as field `field` (1..=15) of any message: field 4 of `ManagedCursorInfo`
    /// holds the same `repeated MessageRange`. Other field numbers are `InvalidArgument`.
    pub fn message_range_field_bytes_as(
        &self,
        max_ranges: Option<u64>,
        field: i64,
    ) -> Result<Vec<u8>> {
        match u8::try_from(field) {
            Ok(small) if (1..=15).contains(&small) => {
                Ok(self.message_ranges_tagged(max_ranges, (small << 3) | 2))
            }
            _ => Err(CoreError::InvalidArgument(format!(
                "field must be 1..15 (a one-byte tag), got {field}"
            ))),
        }
    }

    fn message_ranges_tagged(&self, max_ranges: Option<u64>, tag: u8) -> Vec<u8> {
        let rows = self.ranges_rows(max_ranges);
        let mut out = Vec::with_capacity(rows.iter().map(message_range_field).sum());
        for row in &rows {
            let payload = delimited(nested_position(row[0], row[1]))
                + delimited(nested_position(row[2], row[3]));
            out.push(tag);
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

    /// Words `to_long_list_map(max_entries)` builds (one per 64 entries up to each ledger's last).
    pub fn long_list_map_word_count(&self, max_entries: Option<u64>) -> u64 {
        self.long_list_map_ledgers(max_entries)
            .into_iter()
            .filter_map(|(_, l)| l)
            .map(|l| u64::try_from(l.max()).map_or(0, |m| m / 64 + 1))
            .sum()
    }

    /// Bytes `to_long_list_map(max_entries)` takes as `PositionInfo` field 6.
    ///
    /// Computed from the runs, without building the words: a lone ack near entry 2^32 costs
    /// nothing here, though its words would take 512 MiB.
    pub fn long_list_map_wire_size(&self, max_entries: Option<u64>) -> usize {
        self.long_list_map_ledgers(max_entries)
            .into_iter()
            .map(|(id, l)| {
                let words = l.map_or(0, bitset_words_wire_size);
                delimited(1 + varint_len(id as u64) + words)
            })
            .sum()
    }
}

// --- LongListMap words ---------------------------------------------------------------------

/// `java.util.BitSet.toLongArray()` of one ledger: bit i of word j is entry 64j+i, no trailing zeros.
pub(crate) fn bitset_words(l: &LedgerBits) -> Vec<i64> {
    let top = l.max();
    if top < 0 {
        return Vec::new();
    }
    let words = std::cell::RefCell::new(vec![0u64; top as usize / 64 + 1]);
    let or = |i: usize, mask: u64| {
        if let Some(w) = words.borrow_mut().get_mut(i) {
            *w |= mask;
        }
    };
    for_each_run_word(l, or, |range| range.for_each(|i| or(i, !0)));
    words.into_inner().into_iter().map(|w| w as i64).collect()
}

/// Wire bytes of a ledger's BitSet words (`1 + varint` each) without building them: a zero word
/// costs 2, a full one 11, and only the words at the ends of runs are computed. O(runs).
fn bitset_words_wire_size(l: &LedgerBits) -> usize {
    let top = l.max();
    if top < 0 {
        return 0;
    }
    let n_words = top as usize / 64 + 1;
    let mut edges: BTreeMap<usize, u64> = BTreeMap::new();
    let mut full = 0usize;
    for_each_run_word(
        l,
        |w, mask| *edges.entry(w).or_default() |= mask,
        |words| full += words.len(),
    );
    let edge_bytes: usize = edges.values().map(|&w| 1 + varint_len(w)).sum();
    let zero = n_words - edges.len() - full;
    edge_bytes + full * 11 + zero * 2
}

/// Walks a ledger's runs as BitSet words: `edge(word, mask)` for each word a run starts or ends in
/// (a word may get several), `full(words)` for the words a run covers entirely.
fn for_each_run_word(
    l: &LedgerBits,
    mut edge: impl FnMut(usize, u64),
    mut full: impl FnMut(std::ops::Range<usize>),
) {
    l.for_each_run(|a, b| {
        let (a, b) = (a as usize, b as usize);
        let (wa, wb) = (a / 64, b / 64);
        let lo = !0u64 << (a % 64);
        let hi = !0u64 >> (63 - b % 64);
        if wa == wb {
            edge(wa, lo & hi);
        } else {
            edge(wa, lo);
            full(wa + 1..wb);
            edge(wb, hi);
        }
    });
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
    fn parses_what_it_writes() {
        let mut rs = RangeSet::new(false);
        rs.add_open_closed(5, -1, 5, 5, None).unwrap();
        rs.add_many(&[9, 9, 300], &[63, 1000, 70_000]).unwrap();
        let mut data = vec![0x08, 0x07, 0x10, 0x01]; // ledgerId 7, entryId 1: skipped
        data.extend(rs.message_range_field_bytes(None));
        let rows = parse_message_ranges(&data, 3).unwrap();
        assert_eq!(rows, rs.ranges_rows(None));
        assert!(parse_message_ranges(&data[..data.len() - 1], 3).is_err());
        assert!(parse_message_ranges(&[0x1A, 0x02, 0x0A, 0x00], 3).is_err());
        assert!(parse_message_ranges(&[0x0B], 3).is_err());
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
    fn ranges_as_another_field_differ_only_in_their_tags() {
        let mut rs = RangeSet::new(false);
        rs.add_many(&[2, 2, 7], &[0, 9, 300]).unwrap();
        let three = rs.message_range_field_bytes(None);
        let four = rs.message_range_field_bytes_as(None, 4).unwrap();
        assert_eq!(three.len(), four.len());
        let diffs: Vec<(u8, u8)> = three
            .iter()
            .zip(&four)
            .filter(|(a, b)| a != b)
            .map(|(a, b)| (*a, *b))
            .collect();
        assert_eq!(diffs, vec![(0x1A, 0x22); 3]);
        assert!(rs.message_range_field_bytes_as(None, 0).is_err());
        assert!(rs.message_range_field_bytes_as(None, 16).is_err());
    }

    #[test]
    fn one_range_from_entry_zero() {
        // (5:-1..5:5]: lower {08 05 10 <10 bytes>} = 13, upper {08 05 10 05} = 4;
        // MessageRange payload = (1+1+13) + (1+1+4) = 21; as a field: 1 + 1 + 21 = 23.
        assert_eq!(message_range_field(&[5, -1, 5, 5]), 23);
    }
}
