//! Byte forms of a `RangeSet`: the compact versioned form, single-ledger roaring portable bitmaps,
//! and Pulsar's `LongListMap` words (`java.util.BitSet.toLongArray` layout).
//!
//! Compact form, little-endian:
//! `"CKRS"`, version `u8`, flags `u8` (bit 0: pulsar_quirks), `u32` record count, then per ledger
//! `i64` id, `u32` length, that many bytes of a run-optimised 32-bit roaring portable bitmap
//! (length 0: a quirk-mode empty ledger), and last a CRC-32 of everything before it.
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

use roaring::RoaringBitmap;

use crate::ackstate::ledger_bits::LedgerBits;
use crate::ackstate::position::{check_ledger, MAX_ENTRY_ID};
use crate::ackstate::rangeset::RangeSet;
use crate::ackstate::wire::{bitset_words, long_list_map_field};
use crate::error::{CoreError, Result};

/// Magic bytes that open the compact form.
pub const MAGIC: &[u8; 4] = b"CKRS";
/// Version of the compact form this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;
const FLAG_QUIRKS: u8 = 1;
const HEADER_LEN: usize = 4 + 1 + 1 + 4;
const CRC_LEN: usize = 4;
/// Words needed for entry ids up to `u32::MAX`.
const MAX_WORDS: usize = (MAX_ENTRY_ID as usize + 1) / 64;

impl RangeSet {
    /// The compact, versioned, checksummed byte form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let blobs: Vec<(i64, Vec<u8>)> = self
            .ledgers
            .iter()
            .map(|(&id, l)| (id, l.portable_bytes()))
            .collect();
        let body: usize = blobs.iter().map(|(_, b)| 12 + b.len()).sum();
        let mut out =
            Vec::with_capacity(HEADER_LEN + body + 12 * self.empty_quirk_ledgers.len() + CRC_LEN);
        out.extend_from_slice(MAGIC);
        out.push(FORMAT_VERSION);
        out.push(if self.pulsar_quirks() { FLAG_QUIRKS } else { 0 });
        let records = blobs.len() + self.empty_quirk_ledgers.len();
        out.extend_from_slice(&(records as u32).to_le_bytes());
        let mut empties = self.empty_quirk_ledgers.iter().copied().peekable();
        for (id, blob) in &blobs {
            while let Some(e) = empties.next_if(|&e| e < *id) {
                write_record_header(&mut out, e, 0);
            }
            write_record_header(&mut out, *id, blob.len());
            out.extend_from_slice(blob);
        }
        for e in empties {
            write_record_header(&mut out, e, 0);
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes [`RangeSet::to_bytes`]; damaged or foreign bytes are reported, never half-applied.
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        if data.len() < HEADER_LEN + CRC_LEN {
            return Err(corrupt(format!(
                "{} bytes is too short for a RangeSet (at least {})",
                data.len(),
                HEADER_LEN + CRC_LEN
            )));
        }
        let magic: [u8; 4] = array(data, 0)?;
        if &magic != MAGIC {
            return Err(corrupt(format!(
                "bad magic {magic:02x?}: not a cursorkit RangeSet"
            )));
        }
        let [version] = array(data, 4)?;
        if version != FORMAT_VERSION {
            return Err(CoreError::UnsupportedVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let (payload, crc) = data.split_at(data.len() - CRC_LEN);
        let expected = u32::from_le_bytes(array(crc, 0)?);
        let actual = crc32fast::hash(payload);
        if expected != actual {
            return Err(corrupt(format!(
                "checksum mismatch: stored {expected:#010x}, computed {actual:#010x}"
            )));
        }
        let [flags] = array(payload, 5)?;
        if flags & !FLAG_QUIRKS != 0 {
            return Err(corrupt(format!("unknown flags {flags:#04x}")));
        }
        let mut rs = RangeSet::new(flags & FLAG_QUIRKS != 0);
        let count = u32::from_le_bytes(array(payload, 6)?);
        let mut at = HEADER_LEN;
        let mut previous: Option<i64> = None;
        for record in 0..count {
            let truncated = |_| corrupt(format!("record {record} header truncated at offset {at}"));
            let id = i64::from_le_bytes(array(payload, at).map_err(truncated)?);
            let len = u32::from_le_bytes(array(payload, at + 8).map_err(truncated)?) as usize;
            at += 12;
            check_ledger(id)
                .map_err(|_| corrupt(format!("record {record}: negative ledger id {id}")))?;
            if previous.is_some_and(|p| p >= id) {
                return Err(corrupt(format!(
                    "record {record}: ledger {id} out of order"
                )));
            }
            previous = Some(id);
            let bytes = payload.get(at..at + len).ok_or_else(|| {
                corrupt(format!(
                    "record {record} (ledger {id}) truncated at offset {at}"
                ))
            })?;
            at += len;
            if len == 0 {
                if !rs.pulsar_quirks() {
                    return Err(corrupt(format!(
                        "record {record}: empty ledger {id} outside quirks mode"
                    )));
                }
                rs.empty_quirk_ledgers.insert(id);
                continue;
            }
            let bits = decode_bitmap(bytes)
                .map_err(|m| corrupt(format!("record {record} (ledger {id}): {m}")))?;
            if bits.is_empty() {
                return Err(corrupt(format!(
                    "record {record}: ledger {id} holds no entries"
                )));
            }
            rs.put_ledger(id, LedgerBits::from_bitmap(bits));
        }
        if at != payload.len() {
            return Err(corrupt(format!(
                "{} trailing bytes after {count} records",
                payload.len() - at
            )));
        }
        rs.clear_dirty();
        Ok(rs)
    }

    /// One ledger's entries as a run-optimised 32-bit roaring portable bitmap (Java/C/Go compatible).
    pub fn ledger_to_bytes(&self, ledger_id: i64) -> Option<Vec<u8>> {
        Some(self.ledgers.get(&ledger_id)?.portable_bytes())
    }

    /// Replaces one ledger's entries with a portable bitmap's (an empty bitmap removes the ledger).
    pub fn set_ledger_bytes(&mut self, ledger_id: i64, data: &[u8]) -> Result<()> {
        check_ledger(ledger_id)?;
        let bits = decode_bitmap(data).map_err(|m| corrupt(format!("ledger {ledger_id}: {m}")))?;
        self.put_ledger(ledger_id, LedgerBits::from_bitmap(bits));
        Ok(())
    }

    /// Pulsar's `toRanges(max)`: ledger → BitSet words, whole ledgers in ascending order.
    ///
    /// Without quirks a ledger is kept while the running entry count including it stays within
    /// `max_entries`; with quirks while the count *before* it does (so the first ledger is always
    /// kept), as Pulsar's `OpenLongPairRangeSet` does.
    pub fn to_long_list_map(&self, max_entries: Option<u64>) -> Vec<(i64, Vec<i64>)> {
        self.to_long_list_map_within(max_entries, None)
    }

    /// [`RangeSet::to_long_list_map_within`] under a memory budget: without `max_bytes`, a map of
    /// more than `max_words` words in all (8 B each; one ack near entry 2^32 alone needs 2^26) is
    /// refused with `CoreError::Budget` before anything is built.
    pub fn to_long_list_map_budgeted(
        &self,
        max_entries: Option<u64>,
        max_bytes: Option<u64>,
        max_words: u64,
    ) -> Result<Vec<(i64, Vec<i64>)>> {
        if max_bytes.is_none() {
            let words = self.long_list_map_word_count(max_entries);
            if words > max_words {
                return Err(CoreError::Budget(format!(
                    "to_long_list_map would build {words} words ({} MiB), over the max_words \
                     budget of {max_words}: pass max_bytes or a larger max_words",
                    words / (1 << 17)
                )));
            }
        }
        Ok(self.to_long_list_map_within(max_entries, max_bytes))
    }

    /// [`RangeSet::to_long_list_map`] that also stops before the first ledger whose words would
    /// take the `PositionInfo` field past `max_bytes`. A ledger's words are only built once a
    /// lower bound of their size fits, so a lone ack near entry 2^32 (64 Mi words, 512 MiB) costs
    /// nothing when it cannot be persisted anyway.
    pub fn to_long_list_map_within(
        &self,
        max_entries: Option<u64>,
        max_bytes: Option<u64>,
    ) -> Vec<(i64, Vec<i64>)> {
        let budget = max_bytes.unwrap_or(u64::MAX);
        let mut used: u64 = 0;
        let mut out = Vec::new();
        for (id, l) in self.long_list_map_ledgers(max_entries) {
            // Each word costs at least 2 bytes (tag + 1-byte varint); the key at least 2 more.
            let floor = 4 + 2 * l.map_or(0, |l| (l.max() as u64) / 64 + 1);
            if used.saturating_add(floor) > budget {
                break;
            }
            let words = l.map_or_else(Vec::new, bitset_words);
            let exact = long_list_map_field(id, &words) as u64;
            if used.saturating_add(exact) > budget {
                break;
            }
            used += exact;
            out.push((id, words));
        }
        out
    }

    /// The ledgers `toRanges(max_entries)` keeps, in order (None: an empty ledger kept by quirks).
    pub(crate) fn long_list_map_ledgers(
        &self,
        max_entries: Option<u64>,
    ) -> Vec<(i64, Option<&LedgerBits>)> {
        let limit = max_entries.unwrap_or(u64::MAX);
        let mut ledgers: Vec<(i64, Option<&LedgerBits>)> = self
            .ledgers
            .iter()
            .map(|(&id, l)| (id, Some(&**l)))
            .collect();
        if self.pulsar_quirks() && !self.empty_quirk_ledgers.is_empty() {
            ledgers.extend(self.empty_quirk_ledgers.iter().map(|&id| (id, None)));
            ledgers.sort_by_key(|&(id, _)| id);
        }
        let mut count: u64 = 0;
        let mut kept = Vec::with_capacity(ledgers.len());
        for (id, l) in ledgers {
            let card = l.map_or(0, LedgerBits::cardinality);
            let keep = if self.pulsar_quirks() {
                count <= limit
            } else {
                count.saturating_add(card) <= limit
            };
            if !keep {
                break;
            }
            count = count.saturating_add(card);
            kept.push((id, l));
        }
        kept
    }

    /// Rebuilds a set from Pulsar's BitSet words (the inverse of [`RangeSet::to_long_list_map`]).
    pub fn from_long_list_map(words: &[(i64, Vec<i64>)], pulsar_quirks: bool) -> Result<Self> {
        let mut decoded = BTreeMap::new();
        for (id, w) in words {
            check_ledger(*id)?;
            if w.len() > MAX_WORDS {
                return Err(CoreError::InvalidPosition(format!(
                    "ledger {id}: {} words address entries beyond 4294967295 (at most {MAX_WORDS} words)",
                    w.len()
                )));
            }
            // roaring takes at most 2^32 - 8 bits per call: the top word goes in on its own.
            let (body, top) = if w.len() == MAX_WORDS {
                w.split_at(MAX_WORDS - 1)
            } else {
                (&w[..], &[][..])
            };
            let bytes: Vec<u8> = body.iter().flat_map(|x| x.to_le_bytes()).collect();
            let mut bits = RoaringBitmap::from_lsb0_bytes(0, &bytes);
            for &word in top {
                let base = ((MAX_WORDS - 1) * 64) as u32;
                bits.extend(
                    (0..64u32)
                        .filter(|b| (word as u64) >> b & 1 == 1)
                        .map(|b| base + b),
                );
            }
            decoded.insert(*id, bits);
        }
        let mut rs = RangeSet::new(pulsar_quirks);
        for (id, bits) in decoded {
            if bits.is_empty() {
                if pulsar_quirks {
                    rs.empty_quirk_ledgers.insert(id);
                }
            } else {
                rs.put_ledger(id, LedgerBits::from_bitmap(bits));
            }
        }
        rs.clear_dirty();
        Ok(rs)
    }
}

fn write_record_header(out: &mut Vec<u8>, id: i64, len: usize) {
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&(len as u32).to_le_bytes());
}

fn corrupt(message: String) -> CoreError {
    CoreError::Corrupt(message)
}

/// Decodes a portable bitmap that must use up exactly `data`.
fn decode_bitmap(data: &[u8]) -> std::result::Result<RoaringBitmap, String> {
    let mut cursor = std::io::Cursor::new(data);
    let bits = RoaringBitmap::deserialize_from(&mut cursor)
        .map_err(|e| format!("bad roaring bitmap: {e}"))?;
    if cursor.position() as usize != data.len() {
        return Err(format!(
            "{} trailing bytes after the bitmap",
            data.len() - cursor.position() as usize
        ));
    }
    Ok(bits)
}

/// The `N` bytes at `at`, or a `Corrupt` error when they run past the end.
fn array<const N: usize>(data: &[u8], at: usize) -> Result<[u8; N]> {
    data.get(at..at.saturating_add(N))
        .and_then(|s| <[u8; N]>::try_from(s).ok())
        .ok_or_else(|| corrupt(format!("{N} bytes at offset {at} run past the end")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RangeSet {
        let mut rs = RangeSet::new(false);
        rs.add_many(&[1, 1, 1, 4, 4], &[0, 1, 63, 64, 1_000_000])
            .unwrap();
        rs
    }

    #[test]
    fn compact_round_trip() {
        let rs = sample();
        let bytes = rs.to_bytes();
        assert_eq!(RangeSet::from_bytes(&bytes).unwrap(), rs);
    }

    #[test]
    fn detects_every_flipped_byte() {
        let bytes = sample().to_bytes();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(
                RangeSet::from_bytes(&bad).is_err(),
                "flip at {i} went unnoticed"
            );
        }
        for n in 0..bytes.len() {
            assert!(
                RangeSet::from_bytes(&bytes[..n]).is_err(),
                "truncation to {n} went unnoticed"
            );
        }
    }

    #[test]
    fn rejects_unknown_version() {
        let mut bytes = sample().to_bytes();
        bytes[4] = 9;
        assert_eq!(
            RangeSet::from_bytes(&bytes),
            Err(CoreError::UnsupportedVersion {
                found: 9,
                supported: 1
            })
        );
    }

    #[test]
    fn long_list_words_match_java_layout() {
        let map = sample().to_long_list_map(None);
        assert_eq!(map[0], (1, vec![(1i64 | 2) | i64::MIN]));
        assert_eq!(map[1].1.len(), 1_000_000 / 64 + 1);
        assert_eq!(map[1].1[1], 1);
        let back = RangeSet::from_long_list_map(&map, false).unwrap();
        assert_eq!(back, sample());
    }

    #[test]
    fn long_list_byte_budget_stops_before_building_huge_words() {
        let mut rs = RangeSet::new(false);
        rs.add(1, 3).unwrap();
        rs.add(2, 4_294_967_295).unwrap();
        let within = rs.to_long_list_map_within(None, Some(5_000_000));
        assert_eq!(within.len(), 1);
        assert_eq!(within[0], (1, vec![8]));
        assert!(rs.to_long_list_map_within(None, Some(3)).is_empty());
    }

    #[test]
    fn long_list_truncation_rules() {
        let rs = sample(); // ledger 1 holds 3 entries, ledger 4 holds 2
        assert_eq!(rs.to_long_list_map(Some(3)).len(), 1);
        assert_eq!(rs.to_long_list_map(Some(2)).len(), 0);
        let mut q = RangeSet::new(true);
        q.add_many(&[1, 1, 1, 4, 4], &[0, 1, 63, 64, 1_000_000])
            .unwrap();
        assert_eq!(q.to_long_list_map(Some(2)).len(), 1);
        assert_eq!(q.to_long_list_map(Some(3)).len(), 2);
    }

    #[test]
    fn a_long_list_map_past_its_word_budget_is_refused_before_it_is_built() {
        let mut rs = RangeSet::new(false);
        rs.add_many(&[1, 1], &[0, 1 << 20]).unwrap(); // 2^14 + 1 words
        let words = rs.long_list_map_word_count(None);
        assert_eq!(words, (1 << 14) + 1);
        assert!(matches!(
            rs.to_long_list_map_budgeted(None, None, words - 1),
            Err(CoreError::Budget(_))
        ));
        let all = rs.to_long_list_map_budgeted(None, None, words).unwrap();
        assert_eq!(all, rs.to_long_list_map(None));
        // With a byte budget the word budget does not apply: the bytes bound the build instead.
        assert!(rs
            .to_long_list_map_budgeted(None, Some(16), 1)
            .unwrap()
            .is_empty());
    }
}
