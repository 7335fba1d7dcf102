//! PIP-195 bucket snapshot segments: the segment cut rule, index ordering, the `SnapshotSegment`
//! wire bytes and the per-ledger bitmaps of a segment's metadata.
//!
//! The wire form is Pulsar's proto2 `SnapshotSegment{repeated DelayedIndex indexes = 1}` with
//! `DelayedIndex{required uint64 timestamp = 1; required uint64 ledger_id = 2;
//! required uint64 entry_id = 3; optional DelayedOperationType delayed_operation_type = 4}`.
//! It is written and read here by hand (no protobuf crate): [`encode_segment`] gives the bytes
//! protobuf writes, [`decode_segment`] reads any valid encoding and reports damage as
//! [`CoreError::Corrupt`] without panicking.
//!
//! ```
//! use cursorkit_core::{cut_segments, decode_segment, encode_segment};
//! let at = [1_000, 1_500, 400_000];
//! let (ledgers, entries) = ([3, 3, 4], [0, 1, 0]);
//! // A 300 s time step puts the first two indexes in one segment and the third in another.
//! assert_eq!(cut_segments(&at, 300_000, 5000).unwrap(), vec![2, 3]);
//! let bytes = encode_segment(&at, &ledgers, &entries).unwrap();
//! let (a, l, e) = decode_segment(&bytes).unwrap();
//! assert_eq!((a.as_slice(), l.as_slice(), e.as_slice()), (&at[..], &ledgers[..], &entries[..]));
//! ```
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

use std::collections::HashMap;

use roaring::RoaringBitmap;

use crate::ackstate::rangeset::{validate_columns, RangeSet};
use crate::ackstate::wire::{put_varint, varint_len};
use crate::error::{CoreError, Result};

/// `max_indexes_per_segment` value that means "no count limit" (Pulsar's −1).
pub const UNLIMITED_INDEXES: i64 = -1;

/// Protobuf wire types.
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;
const FIXED32: u64 = 5;
/// Tags of the fields written: `indexes` (1, LEN) and `DelayedIndex` 1..3 (VARINT).
const TAG_INDEX: u8 = 0x0A;
const TAG_TIMESTAMP: u8 = 0x08;
const TAG_LEDGER: u8 = 0x10;
const TAG_ENTRY: u8 = 0x18;
/// Highest legal protobuf field number.
const MAX_FIELD_NUMBER: u64 = (1 << 29) - 1;

/// Exclusive end offsets of the segments PIP-195 cuts from `timestamps` (sorted ascending).
///
/// Opening a segment at index `i` sets `upper = timestamps[i] + max_time_step_ms - 1`
/// (saturating); after appending an index the segment closes if it was the last index, the next
/// timestamp is above `upper`, or `max_indexes_per_segment` (unless −1) indexes are in it.
/// A step ≤ 0, a count limit ≤ 0 other than −1, or unsorted timestamps are `InvalidArgument`.
pub fn cut_segments(
    timestamps: &[i64],
    max_time_step_ms: i64,
    max_indexes_per_segment: i64,
) -> Result<Vec<usize>> {
    if max_time_step_ms <= 0 {
        return Err(CoreError::InvalidArgument(format!(
            "max_time_step_ms must be > 0, got {max_time_step_ms}"
        )));
    }
    if max_indexes_per_segment <= 0 && max_indexes_per_segment != UNLIMITED_INDEXES {
        return Err(CoreError::InvalidArgument(format!(
            "max_indexes_per_segment must be > 0 or -1 (unlimited), got {max_indexes_per_segment}"
        )));
    }
    let unsorted = timestamps
        .windows(2)
        .enumerate()
        .find_map(|(i, w)| match *w {
            [a, b] if a > b => Some((i, a, b)),
            _ => None,
        });
    if let Some((i, a, b)) = unsorted {
        return Err(CoreError::InvalidArgument(format!(
            "timestamps must be sorted ascending: index {} ({b}) follows {a}",
            i + 1
        )));
    }
    let limit = if max_indexes_per_segment == UNLIMITED_INDEXES {
        usize::MAX
    } else {
        usize::try_from(max_indexes_per_segment).unwrap_or(usize::MAX)
    };
    let mut ends = Vec::new();
    let mut i = 0;
    while let Some(&first) = timestamps.get(i) {
        let upper = first.saturating_add(max_time_step_ms - 1);
        let start = i;
        i += 1;
        while timestamps.get(i).is_some_and(|&t| t <= upper) && i - start < limit {
            i += 1;
        }
        ends.push(i);
    }
    Ok(ends)
}

/// The indexes sorted by `(timestamp, ledger, entry)`, each position kept once.
///
/// When a position occurs more than once, the occurrence that sorts first (the earliest
/// timestamp) is kept and the later ones are dropped. An input that is already sorted is not
/// sorted again. Validated as [`encode_segment`] validates, before any work.
pub fn sort_indexes(
    timestamps: &[i64],
    ledger_ids: &[i64],
    entry_ids: &[i64],
) -> Result<(Vec<i64>, Vec<i64>, Vec<i64>)> {
    validate_indexes(timestamps, ledger_ids, entry_ids)?;
    let mut rows: Vec<(i64, i64, i64)> = timestamps
        .iter()
        .zip(ledger_ids)
        .zip(entry_ids)
        .map(|((&t, &l), &e)| (t, l, e))
        .collect();
    if !rows.windows(2).all(|w| matches!(w, [a, b] if a <= b)) {
        rows.sort_unstable();
    }
    let mut seen = SeenPositions::default();
    let n = rows.len();
    let (mut at, mut ls, mut es) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (t, l, e) in rows {
        if seen.insert(l, e as u32) {
            at.push(t);
            ls.push(l);
            es.push(e);
        }
    }
    Ok((at, ls, es))
}

/// Positions met so far, one bitmap per ledger (a hash of pairs would cost more per look-up).
#[derive(Default)]
struct SeenPositions {
    slots: HashMap<i64, usize>,
    bitmaps: Vec<RoaringBitmap>,
    last: Option<(i64, usize)>,
}

impl SeenPositions {
    /// Records a position; true when it was not seen before.
    fn insert(&mut self, ledger_id: i64, entry: u32) -> bool {
        let slot = match self.last {
            Some((l, slot)) if l == ledger_id => slot,
            _ => {
                let next = self.bitmaps.len();
                let slot = *self.slots.entry(ledger_id).or_insert(next);
                if slot == next {
                    self.bitmaps.push(RoaringBitmap::new());
                }
                self.last = Some((ledger_id, slot));
                slot
            }
        };
        self.bitmaps.get_mut(slot).is_some_and(|b| b.insert(entry))
    }
}

/// `SnapshotSegment` bytes holding these indexes in the given order, byte for byte what protobuf
/// writes (`delayed_operation_type` omitted, as for DELAY).
///
/// Timestamps must be ≥ 0 (`InvalidArgument`), ledger ids ≥ 0 and entry ids in `0..=u32::MAX`
/// (`InvalidPosition`: segment bitmaps are 32-bit); the three columns must have equal lengths.
pub fn encode_segment(
    timestamps: &[i64],
    ledger_ids: &[i64],
    entry_ids: &[i64],
) -> Result<Vec<u8>> {
    validate_indexes(timestamps, ledger_ids, entry_ids)?;
    let body = |t: i64, l: i64, e: i64| {
        3 + varint_len(t as u64) + varint_len(l as u64) + varint_len(e as u64)
    };
    let size: usize = timestamps
        .iter()
        .zip(ledger_ids)
        .zip(entry_ids)
        .map(|((&t, &l), &e)| 2 + body(t, l, e))
        .sum();
    let mut out = Vec::with_capacity(size);
    for ((&t, &l), &e) in timestamps.iter().zip(ledger_ids).zip(entry_ids) {
        out.push(TAG_INDEX);
        // At most 3 + 10 + 10 + 5 = 28 bytes: the length is always a one-byte varint.
        out.push(body(t, l, e) as u8);
        out.push(TAG_TIMESTAMP);
        put_varint(&mut out, t as u64);
        out.push(TAG_LEDGER);
        put_varint(&mut out, l as u64);
        out.push(TAG_ENTRY);
        put_varint(&mut out, e as u64);
    }
    Ok(out)
}

/// The `(timestamps, ledger_ids, entry_ids)` of a `SnapshotSegment`, in stored order.
///
/// Any valid encoding is read: fields in any order, repeated scalars (the last one wins), unknown
/// fields of wire types 0, 1, 2 and 5 skipped (so `delayed_operation_type` too, whatever its
/// value). A missing required field, a truncated varint or field, a length past the end, a
/// group (wire types 3 and 4) or another unknown wire type, a field number of 0, and values
/// beyond what the core holds (timestamp or ledger id above `i64::MAX`, entry id above
/// `u32::MAX`) are [`CoreError::Corrupt`], naming the index and the byte offset.
pub fn decode_segment(data: &[u8]) -> Result<(Vec<i64>, Vec<i64>, Vec<i64>)> {
    // The smallest index is 8 bytes (2 of framing, 6 of fields).
    let guess = data.len() / 8;
    let (mut at, mut ls, mut es) = (
        Vec::with_capacity(guess),
        Vec::with_capacity(guess),
        Vec::with_capacity(guess),
    );
    let mut pos = 0;
    while pos < data.len() {
        // What protobuf writes: an index framed by its tag and a one-byte length.
        if let (Some(&TAG_INDEX), Some(&len)) = (data.get(pos), data.get(pos + 1)) {
            let end = pos + 2 + usize::from(len);
            if let Some(body) = data.get(pos + 2..end).filter(|_| len < 0x80) {
                if let Some((t, l, e)) = canonical_index(body) {
                    at.push(t);
                    ls.push(l);
                    es.push(e);
                    pos = end;
                    continue;
                }
            }
        }
        let index = at.len();
        let fail = |offset: usize, what: String| {
            CoreError::Corrupt(format!(
                "SnapshotSegment, index {index}: {what} at byte {offset}"
            ))
        };
        let (number, wire, field_at) = read_key(data, &mut pos).map_err(|(o, m)| fail(o, m))?;
        if number == 1 && wire == LEN {
            let body = read_len(data, &mut pos).map_err(|(o, m)| fail(o, m))?;
            let (t, l, e) = decode_index(body, pos - body.len()).map_err(|(o, m)| fail(o, m))?;
            at.push(t);
            ls.push(l);
            es.push(e);
        } else {
            skip_field(data, &mut pos, number, wire, field_at).map_err(|(o, m)| fail(o, m))?;
        }
    }
    // Typical indexes take about 16 bytes: give back the guess's spare half (numpy arrays built
    // from these vectors would keep it alive).
    at.shrink_to_fit();
    ls.shrink_to_fit();
    es.shrink_to_fit();
    Ok((at, ls, es))
}

/// Per ledger (ascending), the entry ids as a run-optimised standard 32-bit roaring portable
/// bitmap: the `delayed_index_bit_map` of a `SnapshotSegmentMetadata`, byte-identical to Java's
/// RoaringBitmap after `runOptimize()` (the same serializer as [`RangeSet::ledger_to_bytes`]).
pub fn segment_bitmaps(ledger_ids: &[i64], entry_ids: &[i64]) -> Result<Vec<(i64, Vec<u8>)>> {
    let mut set = RangeSet::new(false);
    set.add_many(ledger_ids, entry_ids)?;
    Ok(set
        .ledger_ids()
        .into_iter()
        .filter_map(|id| Some((id, set.ledger_to_bytes(id)?)))
        .collect())
}

/// Number of entries in a standard 32-bit roaring portable bitmap; bytes that are not exactly
/// one such bitmap are [`CoreError::Corrupt`].
pub fn bitmap_cardinality(data: &[u8]) -> Result<u64> {
    // Parsed by the same code as RangeSet::set_ledger_bytes (one parser for portable bitmaps).
    let mut set = RangeSet::new(false);
    set.set_ledger_bytes(0, data).map_err(|e| match e {
        CoreError::Corrupt(m) => CoreError::Corrupt(format!(
            "not a 32-bit roaring portable bitmap: {}",
            m.strip_prefix("ledger 0: ").unwrap_or(&m)
        )),
        other => other,
    })?;
    Ok(set.total_cardinality())
}

/// Equal lengths, timestamps ≥ 0, and positions a 32-bit bitmap can hold.
fn validate_indexes(timestamps: &[i64], ledger_ids: &[i64], entry_ids: &[i64]) -> Result<()> {
    if timestamps.len() != ledger_ids.len() || timestamps.len() != entry_ids.len() {
        if ledger_ids.len() != entry_ids.len() {
            return Err(CoreError::LengthMismatch {
                ledgers: ledger_ids.len(),
                entries: entry_ids.len(),
            });
        }
        return Err(CoreError::InvalidArgument(format!(
            "timestamps and ledger ids differ in length: {} timestamps, {} ledger ids",
            timestamps.len(),
            ledger_ids.len()
        )));
    }
    if let Some((i, t)) = timestamps.iter().enumerate().find(|&(_, &t)| t < 0) {
        return Err(CoreError::InvalidArgument(format!(
            "timestamp {t} at index {i} is negative (deliver-at times are ms since the epoch, >= 0)"
        )));
    }
    validate_columns(ledger_ids, entry_ids, 0)
}

/// A decoding failure: the byte offset and what is wrong there.
type WireError = (usize, String);

/// Reads a base-128 varint of at most 10 bytes at `*pos` (bits past 64 are dropped, as protobuf does).
#[inline]
fn read_varint(data: &[u8], pos: &mut usize) -> std::result::Result<u64, WireError> {
    let start = *pos;
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let Some(&byte) = data.get(*pos) else {
            return Err((start, "varint runs past the end".to_owned()));
        };
        *pos += 1;
        value |= u64::from(byte & 0x7F) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err((start, "varint longer than 10 bytes".to_owned()))
}

/// A field key: `(number, wire type, offset of the key)`.
fn read_key(data: &[u8], pos: &mut usize) -> std::result::Result<(u64, u64, usize), WireError> {
    let at = *pos;
    let key = read_varint(data, pos)?;
    let number = key >> 3;
    if number == 0 || number > MAX_FIELD_NUMBER {
        return Err((at, format!("invalid field number {number}")));
    }
    Ok((number, key & 7, at))
}

/// The payload of a length-delimited field whose key has been read.
fn read_len<'a>(data: &'a [u8], pos: &mut usize) -> std::result::Result<&'a [u8], WireError> {
    let at = *pos;
    let len = read_varint(data, pos)?;
    let rest = data.len() - *pos;
    match usize::try_from(len) {
        Ok(n) if n <= rest => {
            let start = *pos;
            *pos += n;
            data.get(start..start + n)
                .ok_or_else(|| (at, format!("length {len} runs past the end")))
        }
        _ => Err((
            at,
            format!("length {len} runs past the end ({rest} bytes left)"),
        )),
    }
}

/// Skips the value of a field that is not read (unknown, or a known number with another wire type).
fn skip_field(
    data: &[u8],
    pos: &mut usize,
    number: u64,
    wire: u64,
    field_at: usize,
) -> std::result::Result<(), WireError> {
    let mut skip = |n: usize| {
        if data.len() - *pos < n {
            return Err((field_at, format!("field {number} runs past the end")));
        }
        *pos += n;
        Ok(())
    };
    match wire {
        VARINT => read_varint(data, pos).map(|_| ()),
        FIXED64 => skip(8),
        FIXED32 => skip(4),
        LEN => read_len(data, pos).map(|_| ()),
        other => Err((
            field_at,
            format!("field {number} has unsupported wire type {other}"),
        )),
    }
}

/// The fast path for the layout protobuf writes (fields 1, 2, 3 in order, nothing else) with
/// values in range; anything else (including damage) is left to [`decode_index`].
#[inline]
fn canonical_index(body: &[u8]) -> Option<(i64, i64, i64)> {
    let mut pos = 0;
    let mut field = |tag: u8| {
        if *body.get(pos)? != tag {
            return None;
        }
        pos += 1;
        let mut value: u64 = 0;
        for (i, &byte) in body.get(pos..)?.iter().take(10).enumerate() {
            value |= u64::from(byte & 0x7F) << (7 * i);
            if byte & 0x80 == 0 {
                pos += i + 1;
                return Some(value);
            }
        }
        None
    };
    let t = i64::try_from(field(TAG_TIMESTAMP)?).ok()?;
    let l = i64::try_from(field(TAG_LEDGER)?).ok()?;
    let e = field(TAG_ENTRY)?;
    (pos == body.len() && e <= u64::from(u32::MAX)).then_some((t, l, e as i64))
}

/// One `DelayedIndex` payload that starts at byte `base` of the segment.
fn decode_index(body: &[u8], base: usize) -> std::result::Result<(i64, i64, i64), WireError> {
    let (mut t, mut l, mut e) = (None, None, None);
    let mut pos = 0;
    let shift = |(o, m): WireError| (base + o, m);
    while pos < body.len() {
        let (number, wire, field_at) = read_key(body, &mut pos).map_err(shift)?;
        if wire == VARINT && (1..=3).contains(&number) {
            let v = read_varint(body, &mut pos).map_err(shift)?;
            match number {
                1 => t = Some((v, base + field_at)),
                2 => l = Some((v, base + field_at)),
                _ => e = Some((v, base + field_at)),
            }
        } else {
            skip_field(body, &mut pos, number, wire, field_at).map_err(shift)?;
        }
    }
    let missing = |name: &str| (base, format!("DelayedIndex lacks required field {name}"));
    let (t, t_at) = t.ok_or_else(|| missing("timestamp"))?;
    let (l, l_at) = l.ok_or_else(|| missing("ledger_id"))?;
    let (e, e_at) = e.ok_or_else(|| missing("entry_id"))?;
    let t = i64::try_from(t).map_err(|_| (t_at, format!("timestamp {t} is above 2^63-1")))?;
    let l = i64::try_from(l).map_err(|_| (l_at, format!("ledger_id {l} is above 2^63-1")))?;
    if e > u64::from(u32::MAX) {
        return Err((
            e_at,
            format!("entry_id {e} is above 2^32-1 (segment bitmaps are 32-bit)"),
        ));
    }
    Ok((t, l, e as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny deterministic generator (xorshift64*), so the randomised tests need no dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// The cut rule written the way Pulsar's loop reads, as a model.
    fn model_cut(ts: &[i64], step: i64, max: i64) -> Vec<usize> {
        let mut ends = Vec::new();
        let (mut upper, mut count) = (0i64, 0i64);
        for i in 0..ts.len() {
            if count == 0 {
                upper = ts[i].saturating_add(step - 1);
            }
            count += 1;
            let last = i + 1 == ts.len();
            if last || ts[i + 1] > upper || (max != -1 && count >= max) {
                ends.push(i + 1);
                count = 0;
            }
        }
        ends
    }

    #[test]
    fn cuts_by_time_step() {
        // Step 10: [0, 9] then [10, 19] then [25, 34].
        let ts = [0, 5, 9, 10, 19, 25, 34];
        assert_eq!(cut_segments(&ts, 10, -1).unwrap(), vec![3, 5, 7]);
        // The window opens at the segment's first timestamp, not at a multiple of the step.
        assert_eq!(cut_segments(&[3, 12, 13], 10, -1).unwrap(), vec![2, 3]);
    }

    #[test]
    fn cuts_by_count_and_unlimited() {
        let ts = [7; 7];
        assert_eq!(cut_segments(&ts, 1, 3).unwrap(), vec![3, 6, 7]);
        assert_eq!(cut_segments(&ts, 1, -1).unwrap(), vec![7]);
        assert_eq!(cut_segments(&ts, 1, 1).unwrap(), vec![1, 2, 3, 4, 5, 6, 7]);
        // Equal timestamps always fit one window; only the count splits them.
        assert_eq!(cut_segments(&[5, 5, 5, 6], 1, 100).unwrap(), vec![3, 4]);
    }

    #[test]
    fn cuts_single_empty_and_saturating() {
        assert_eq!(cut_segments(&[42], 300_000, 5000).unwrap(), vec![1]);
        assert!(cut_segments(&[], 300_000, 5000).unwrap().is_empty());
        let top = [i64::MAX - 1, i64::MAX, i64::MAX];
        assert_eq!(cut_segments(&top, i64::MAX, -1).unwrap(), vec![3]);
        assert_eq!(
            cut_segments(&[0, i64::MAX], i64::MAX, -1).unwrap(),
            vec![1, 2]
        );
    }

    #[test]
    fn cut_rejects_bad_arguments() {
        for (step, max) in [(0, 10), (-5, 10), (10, 0), (10, -2)] {
            assert!(matches!(
                cut_segments(&[1, 2], step, max),
                Err(CoreError::InvalidArgument(_))
            ));
        }
        let err = cut_segments(&[1, 5, 3], 10, 10).unwrap_err();
        assert!(err.to_string().contains("index 2"), "{err}");
    }

    #[test]
    fn cut_matches_the_model_on_random_input() {
        let mut rng = Rng(0x5EED);
        for _ in 0..2000 {
            let n = rng.below(40) as usize;
            let mut ts: Vec<i64> = (0..n).map(|_| rng.below(100) as i64).collect();
            ts.sort_unstable();
            let step = 1 + rng.below(30) as i64;
            let max = [-1, 1, 2, 3, 5, 8][rng.below(6) as usize];
            let ends = cut_segments(&ts, step, max).unwrap();
            assert_eq!(ends, model_cut(&ts, step, max), "{ts:?} {step} {max}");
            // Every segment respects both limits.
            let mut start = 0;
            for &end in &ends {
                assert!(ts[end - 1] - ts[start] < step);
                assert!(max == -1 || (end - start) as i64 <= max);
                start = end;
            }
        }
    }

    #[test]
    fn sorts_and_keeps_the_earliest_timestamp_of_a_position() {
        let (at, ls, es) =
            sort_indexes(&[9, 3, 5, 3, 1], &[1, 1, 0, 1, 2], &[4, 4, 7, 4, 0]).unwrap();
        assert_eq!(at, vec![1, 3, 5]);
        assert_eq!(ls, vec![2, 1, 0]);
        assert_eq!(es, vec![0, 4, 7]);
        // Already sorted: unchanged apart from later duplicates of a position.
        let (at, ls, es) = sort_indexes(&[1, 2, 3], &[0, 0, 0], &[5, 6, 5]).unwrap();
        assert_eq!((at, ls, es), (vec![1, 2], vec![0, 0], vec![5, 6]));
        assert!(matches!(
            sort_indexes(&[1], &[0], &[-1]),
            Err(CoreError::InvalidPosition(_))
        ));
    }

    #[test]
    fn sort_matches_a_model_on_random_input() {
        let mut rng = Rng(99);
        for _ in 0..500 {
            let n = rng.below(60) as usize;
            let rows: Vec<(i64, i64, i64)> = (0..n)
                .map(|_| {
                    (
                        rng.below(8) as i64,
                        rng.below(3) as i64,
                        rng.below(6) as i64,
                    )
                })
                .collect();
            let mut expected = rows.clone();
            expected.sort_unstable();
            let mut seen = std::collections::BTreeSet::new();
            expected.retain(|&(_, l, e)| seen.insert((l, e)));
            let at: Vec<i64> = rows.iter().map(|r| r.0).collect();
            let ls: Vec<i64> = rows.iter().map(|r| r.1).collect();
            let es: Vec<i64> = rows.iter().map(|r| r.2).collect();
            let (a, l, e) = sort_indexes(&at, &ls, &es).unwrap();
            let got: Vec<(i64, i64, i64)> = (0..a.len()).map(|i| (a[i], l[i], e[i])).collect();
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn known_bytes_for_a_tiny_segment() {
        // DelayedIndex{1: 300, 2: 5, 3: 0} = 08 AC 02 10 05 18 00 (7 bytes), framed as 0A 07.
        let bytes = encode_segment(&[300, 1], &[5, 0], &[0, u32::MAX as i64]).unwrap();
        let mut expected = vec![0x0A, 0x07, 0x08, 0xAC, 0x02, 0x10, 0x05, 0x18, 0x00];
        expected.extend([
            0x0A, 0x0A, 0x08, 0x01, 0x10, 0x00, 0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F,
        ]);
        assert_eq!(bytes, expected);
        assert!(encode_segment(&[], &[], &[]).unwrap().is_empty());
    }

    #[test]
    fn encode_validates_before_writing() {
        let big = u32::MAX as i64 + 1;
        assert!(matches!(
            encode_segment(&[-1], &[0], &[0]),
            Err(CoreError::InvalidArgument(_))
        ));
        assert!(matches!(
            encode_segment(&[0], &[-1], &[0]),
            Err(CoreError::InvalidPosition(_))
        ));
        assert!(matches!(
            encode_segment(&[0], &[0], &[big]),
            Err(CoreError::InvalidPosition(_))
        ));
        assert!(matches!(
            encode_segment(&[0], &[0, 1], &[0]),
            Err(CoreError::LengthMismatch { .. })
        ));
        assert!(matches!(
            encode_segment(&[0, 1], &[0], &[0]),
            Err(CoreError::InvalidArgument(_))
        ));
    }

    #[test]
    fn round_trips_extreme_values() {
        let at = [0, 1, 127, 128, i64::MAX];
        let ls = [i64::MAX, 0, 300, 1 << 40, 7];
        let es = [0, u32::MAX as i64, 128, 16_384, 1];
        let (a, l, e) = decode_segment(&encode_segment(&at, &ls, &es).unwrap()).unwrap();
        assert_eq!((a, l, e), (at.to_vec(), ls.to_vec(), es.to_vec()));
    }

    #[test]
    fn round_trips_random_segments() {
        let mut rng = Rng(7);
        for _ in 0..300 {
            let n = rng.below(50) as usize;
            let shift = |r: &mut Rng| r.next() >> r.below(64);
            let at: Vec<i64> = (0..n).map(|_| (shift(&mut rng) >> 1) as i64).collect();
            let ls: Vec<i64> = (0..n).map(|_| (shift(&mut rng) >> 1) as i64).collect();
            let es: Vec<i64> = (0..n).map(|_| (shift(&mut rng) >> 32) as i64).collect();
            let bytes = encode_segment(&at, &ls, &es).unwrap();
            assert_eq!(decode_segment(&bytes).unwrap(), (at, ls, es));
        }
    }

    #[test]
    fn decodes_other_field_orders_and_skips_unknown_fields() {
        // entry 2, op type CANCEL (field 4), ledger 9, timestamp 1 then timestamp 5 (last wins).
        let mut data = vec![0x0A, 0x0A];
        data.extend([0x18, 0x02, 0x20, 0x01, 0x10, 0x09, 0x08, 0x01, 0x08, 0x05]);
        // Unknown top-level fields: varint (2), fixed64 (3), length-delimited (4), fixed32 (5),
        // and field 1 with a varint wire type (protobuf treats it as unknown, so do we).
        data.extend([0x10, 0x96, 0x01]);
        data.extend([0x19, 1, 2, 3, 4, 5, 6, 7, 8]);
        data.extend([0x22, 0x02, 0xFF, 0xFF]);
        data.extend([0x2D, 1, 2, 3, 4]);
        data.extend([0x08, 0x01]);
        let (a, l, e) = decode_segment(&data).unwrap();
        assert_eq!((a, l, e), (vec![5], vec![9], vec![2]));
    }

    #[test]
    fn decode_reports_each_kind_of_damage() {
        let good = encode_segment(&[300, 1], &[5, 0], &[0, 1]).unwrap();
        let expect_corrupt = |data: &[u8], needle: &str| match decode_segment(data) {
            Err(CoreError::Corrupt(m)) => assert!(m.contains(needle), "{m:?} lacks {needle:?}"),
            other => panic!("expected Corrupt for {data:02x?}, got {other:?}"),
        };
        // Truncated inside the second index: its length runs past the end.
        expect_corrupt(&good[..good.len() - 1], "index 1");
        expect_corrupt(&good[..good.len() - 1], "byte 10");
        // A truncated varint key, a varint of 11 bytes.
        expect_corrupt(&[0x80], "varint runs past the end");
        expect_corrupt(
            &[
                0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01,
            ],
            "longer than 10",
        );
        // Groups and unknown wire types.
        expect_corrupt(&[0x0B], "wire type 3");
        expect_corrupt(&[0x0C], "wire type 4");
        expect_corrupt(&[0x0E], "wire type 6");
        expect_corrupt(&[0x00], "field number 0");
        // Missing required fields.
        expect_corrupt(&[0x0A, 0x04, 0x08, 0x01, 0x10, 0x02], "entry_id");
        expect_corrupt(&[0x0A, 0x00], "timestamp");
        // Values beyond what the core holds.
        let mut wide = vec![0x0A, 0x0F, 0x08];
        wide.extend([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]);
        wide.extend([0x10, 0x00, 0x18, 0x00]);
        expect_corrupt(&wide, "timestamp 18446744073709551615");
        expect_corrupt(
            &[
                0x0A, 0x0A, 0x08, 0x00, 0x10, 0x00, 0x18, 0x80, 0x80, 0x80, 0x80, 0x10,
            ],
            "entry_id 4294967296",
        );
        // Truncated skipped fields.
        expect_corrupt(&[0x19, 1, 2, 3], "field 3 runs past the end");
        expect_corrupt(&[0x2D, 1], "field 5 runs past the end");
        expect_corrupt(&[0x22, 0x05, 1], "length 5");
    }

    #[test]
    fn decode_never_panics_on_random_or_mutated_bytes() {
        let mut rng = Rng(0xC0FFEE);
        let seed = encode_segment(&[1, 200, 70_000], &[3, 3, 1 << 33], &[0, 9, 65_536]).unwrap();
        for round in 0..20_000 {
            let data: Vec<u8> = if round % 2 == 0 {
                (0..rng.below(40)).map(|_| rng.next() as u8).collect()
            } else {
                let mut d = seed.clone();
                for _ in 0..=rng.below(3) {
                    match rng.below(3) {
                        0 if !d.is_empty() => {
                            let i = rng.below(d.len() as u64) as usize;
                            d[i] = rng.next() as u8;
                        }
                        1 if !d.is_empty() => d.truncate(rng.below(d.len() as u64) as usize),
                        _ => d.insert(rng.below(d.len() as u64 + 1) as usize, rng.next() as u8),
                    }
                }
                d
            };
            if let Ok((a, l, e)) = decode_segment(&data) {
                // Whatever decodes re-encodes to a valid segment with the same indexes.
                let again = encode_segment(&a, &l, &e).unwrap();
                assert_eq!(decode_segment(&again).unwrap(), (a, l, e));
            }
        }
    }

    #[test]
    fn bitmaps_per_ledger_match_the_rangeset_serializer() {
        let ls = [4, 2, 4, 4, 2];
        let es = [10, 0, 11, 12, 70_000];
        let maps = segment_bitmaps(&ls, &es).unwrap();
        assert_eq!(maps.iter().map(|m| m.0).collect::<Vec<_>>(), vec![2, 4]);
        let mut rs = RangeSet::new(false);
        rs.add_many(&ls, &es).unwrap();
        for (id, bytes) in &maps {
            assert_eq!(Some(bytes.clone()), rs.ledger_to_bytes(*id));
        }
        assert_eq!(bitmap_cardinality(&maps[0].1).unwrap(), 2);
        assert_eq!(bitmap_cardinality(&maps[1].1).unwrap(), 3);
        assert!(segment_bitmaps(&[], &[]).unwrap().is_empty());
        assert!(matches!(
            segment_bitmaps(&[0], &[-1]),
            Err(CoreError::InvalidPosition(_))
        ));
        assert!(matches!(
            segment_bitmaps(&[0], &[]),
            Err(CoreError::LengthMismatch { .. })
        ));
    }

    #[test]
    fn union_and_remove_many_match_a_set_model() {
        use std::collections::BTreeSet;
        let mut rng = Rng(31);
        for _ in 0..300 {
            let mut rs = RangeSet::new(rng.below(2) == 0);
            let mut model: BTreeSet<(i64, i64)> = BTreeSet::new();
            for _ in 0..12 {
                let ledger = rng.below(3) as i64;
                // Short and long runs, near 0, near a container boundary and near u32::MAX.
                let base = [0, 65_520, u32::MAX as i64 - 40][rng.below(3) as usize];
                let n = rng.below(30) as usize;
                let entries: Vec<i64> = (0..n)
                    .map(|_| (base + rng.below(60) as i64).min(u32::MAX as i64))
                    .collect();
                if rng.below(2) == 0 {
                    let mut src = RangeSet::new(false);
                    src.add_many(&vec![9; n], &entries).unwrap();
                    // No entries: an empty portable bitmap (cookie 12346, zero containers).
                    let bytes = src
                        .ledger_to_bytes(9)
                        .unwrap_or_else(|| vec![0x3A, 0x30, 0, 0, 0, 0, 0, 0]);
                    rs.clear_dirty();
                    let added = rs.union_ledger_bytes(ledger, &bytes).unwrap();
                    let new = entries
                        .iter()
                        .filter(|&&e| model.insert((ledger, e)))
                        .count();
                    assert_eq!(added, new as u64);
                    assert_eq!(rs.dirty_ledgers().contains(&ledger), new > 0);
                } else {
                    let ledgers: Vec<i64> = (0..n).map(|_| rng.below(3) as i64).collect();
                    let got = rs.remove_many(&ledgers, &entries).unwrap();
                    let want: Vec<bool> = ledgers
                        .iter()
                        .zip(&entries)
                        .map(|(&l, &e)| model.remove(&(l, e)))
                        .collect();
                    assert_eq!(got, want);
                }
                // The O(1) range count equals a recount of the model.
                let runs = model
                    .iter()
                    .zip(model.iter().skip(1))
                    .filter(|(a, b)| a.0 != b.0 || b.1 != a.1 + 1)
                    .count()
                    + usize::from(!model.is_empty());
                assert_eq!(rs.len(), runs as u64);
                assert_eq!(rs.total_cardinality(), model.len() as u64);
            }
        }
    }

    #[test]
    fn rangeset_bulk_calls_reject_bad_input_unchanged() {
        let mut rs = RangeSet::new(false);
        rs.add_many(&[1, 1], &[5, 6]).unwrap();
        let before = rs.clone();
        assert!(matches!(
            rs.remove_many(&[1, 1], &[5, -1]),
            Err(CoreError::InvalidPosition(_))
        ));
        assert!(matches!(
            rs.remove_many(&[1], &[5, 6]),
            Err(CoreError::LengthMismatch { .. })
        ));
        assert!(matches!(
            rs.union_ledger_bytes(1, &[1, 2, 3]),
            Err(CoreError::Corrupt(_))
        ));
        assert!(matches!(
            rs.union_ledger_bytes(-1, &[]),
            Err(CoreError::InvalidPosition(_))
        ));
        assert_eq!(rs, before);
        assert_eq!(rs.len(), 1);
        // A whole-ledger run is a few bytes and goes in as one range.
        let mut full = RangeSet::new(false);
        full.add_open_closed(0, -1, 0, u32::MAX as i64, None)
            .unwrap();
        let bytes = full.ledger_to_bytes(0).unwrap();
        assert_eq!(rs.union_ledger_bytes(1, &bytes).unwrap(), (1u64 << 32) - 2);
        assert_eq!(rs.len(), 1);
        assert_eq!(
            rs.remove_many(&[1, 1, 1], &[7, 7, 8]).unwrap(),
            vec![true, false, true]
        );
        assert_eq!(rs.len(), 2);
    }

    #[test]
    fn bitmap_cardinality_rejects_damage() {
        let bytes = segment_bitmaps(&[0, 0], &[1, 100_000]).unwrap().remove(0).1;
        for cut in 0..bytes.len() {
            match bitmap_cardinality(&bytes[..cut]) {
                Err(CoreError::Corrupt(m)) => assert!(m.starts_with("not a 32-bit"), "{m}"),
                other => panic!("truncation at {cut}: {other:?}"),
            }
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(matches!(
            bitmap_cardinality(&trailing),
            Err(CoreError::Corrupt(_))
        ));
    }
}
