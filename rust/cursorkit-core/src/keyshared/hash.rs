//! Key_Shared sticky-key hashing, exactly as Pulsar's broker does it.
//!
//! * The hash of a sticky key is Murmur3 x86_32 with seed 0, masked to 31 bits
//!   ([`sticky_key_hash`]); Pulsar's `Murmur3_32Hash` is the same function.
//! * A selector maps the hash to a *slot* of its hash range (Pulsar 4.0's `makeStickyKeyHash`):
//!   `h % range.size + range.start`, where a slot of 0 (`STICKY_KEY_HASH_NOT_SET`) becomes 1.
//!   Consistent hashing covers `[1, 65535]` ([`slot_consistent`]); auto-split and exclusive
//!   selectors cover `[0, range_size - 1]` ([`slot_range`]).
//! * [`hash_many`] and [`key_slots_many`] hash many keys stored the way Arrow stores binary and
//!   string columns: one values buffer and `n + 1` offsets (`i32` or `i64`) into it.
//!
//! ```
//! use cursorkit_core::{slot_consistent, slot_range, sticky_key_hash, DEFAULT_RANGE_SIZE};
//! let h = sticky_key_hash(b"key1");
//! assert_eq!(h, 462_881_061);
//! assert_eq!(slot_consistent(h), 7_357);
//! assert_eq!(slot_range(h, DEFAULT_RANGE_SIZE), 293);
//! ```

use crate::error::{CoreError, Result};

/// Pulsar's `DEFAULT_RANGE_SIZE` (`2 << 15`): the hash range of the Key_Shared selectors.
pub const DEFAULT_RANGE_SIZE: u32 = 65536;

/// Pulsar's `STICKY_KEY_HASH_NOT_SET`: a slot value that means "no hash", so a computed 0 becomes 1.
pub const STICKY_KEY_HASH_NOT_SET: u32 = 0;

/// The sticky key of a message with no ordering key, partition key or producer fallback.
pub const NONE_KEY: &[u8] = b"NONE_KEY";

/// The largest range size a selector takes (Pulsar's range sizes are Java `int`s).
pub const MAX_RANGE_SIZE: u32 = i32::MAX as u32;

/// The largest sticky-key hash: hashes are masked to 31 bits.
pub const MAX_STICKY_KEY_HASH: u32 = 0x7FFF_FFFF;

const C1: u32 = 0xcc9e_2d51;
const C2: u32 = 0x1b87_3593;

#[inline(always)]
fn mix_k(k: u32) -> u32 {
    k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2)
}

/// Murmur3 x86_32 (Austin Appleby's reference `MurmurHash3_x86_32`): 4-byte blocks read
/// little-endian, tail bytes little-endian, then the `fmix32` finaliser.
#[inline]
pub fn murmur3_x86_32(data: &[u8], seed: u32) -> u32 {
    let mut h = seed;
    let mut blocks = data.chunks_exact(4);
    for block in &mut blocks {
        let k = u32::from_le_bytes([block[0], block[1], block[2], block[3]]);
        h = (h ^ mix_k(k))
            .rotate_left(13)
            .wrapping_mul(5)
            .wrapping_add(0xe654_6b64);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let k = tail
            .iter()
            .rev()
            .fold(0u32, |k, &byte| (k << 8) | u32::from(byte));
        h ^= mix_k(k);
    }
    // The reference takes the length as a 32-bit int: longer inputs use its low 32 bits.
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// Pulsar's sticky-key hash: Murmur3 x86_32 of the key with seed 0, masked to 31 bits.
#[inline]
pub fn sticky_key_hash(key: &[u8]) -> u32 {
    murmur3_x86_32(key, 0) & MAX_STICKY_KEY_HASH
}

/// The consistent-hashing slot of a hash (Pulsar 4.0): `h % 65535 + 1`, in `[1, 65535]`.
#[inline]
pub fn slot_consistent(h: u32) -> u32 {
    h % (DEFAULT_RANGE_SIZE - 1) + 1
}

/// The auto-split / exclusive slot of a hash (Pulsar 4.0): `h % range_size`, with 0 turned into 1
/// (0 is `STICKY_KEY_HASH_NOT_SET`), in `[1, range_size - 1]` (or 1 when `range_size` is 1).
///
/// # Panics
/// When `range_size` is 0, like an integer division by zero; [`SlotKind::range`] checks it.
#[inline]
pub fn slot_range(h: u32, range_size: u32) -> u32 {
    match h % range_size {
        STICKY_KEY_HASH_NOT_SET => 1,
        slot => slot,
    }
}

/// A selector's slot function, with its range size checked once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotKind {
    /// Consistent hashing over `[1, max]`: `h % max + 1` (Pulsar's `rangeMaxValue`, 65535 by default).
    Consistent {
        /// The largest slot (`range_size - 1`).
        max: u32,
    },
    /// Auto-split and exclusive selectors over `[0, size - 1]`: `h % size`, then 0 → 1.
    Range {
        /// The range size (`DEFAULT_RANGE_SIZE` by default).
        size: u32,
    },
}

impl SlotKind {
    /// Consistent hashing for a range of `range_size` hashes: slots `[1, range_size - 1]`.
    /// `range_size` must be in `[2, MAX_RANGE_SIZE]`.
    pub fn consistent(range_size: u32) -> Result<Self> {
        check_range_size(range_size, 2, "consistent")?;
        Ok(SlotKind::Consistent {
            max: range_size - 1,
        })
    }

    /// The auto-split / exclusive slot function for `range_size` in `[1, MAX_RANGE_SIZE]`.
    pub fn range(range_size: u32) -> Result<Self> {
        check_range_size(range_size, 1, "range")?;
        Ok(SlotKind::Range { size: range_size })
    }

    /// `"consistent"` or `"range"` with `range_size`; any other name is `InvalidArgument`.
    pub fn from_name(name: &str, range_size: u32) -> Result<Self> {
        match name {
            "consistent" => Self::consistent(range_size),
            "range" => Self::range(range_size),
            other => Err(CoreError::InvalidArgument(format!(
                "selector kind must be \"consistent\" or \"range\", got {other:?}"
            ))),
        }
    }

    /// The slot of hash `h`.
    #[inline]
    pub fn slot(self, h: u32) -> u32 {
        match self {
            SlotKind::Consistent { max } => h % max + 1,
            SlotKind::Range { size } => slot_range(h, size),
        }
    }
}

fn check_range_size(range_size: u32, min: u32, kind: &str) -> Result<()> {
    if (min..=MAX_RANGE_SIZE).contains(&range_size) {
        Ok(())
    } else {
        Err(CoreError::InvalidArgument(format!(
            "range_size for the {kind} slot function must be in [{min}, {MAX_RANGE_SIZE}], got {range_size}"
        )))
    }
}

/// The slots of many hashes; a hash outside `[0, MAX_STICKY_KEY_HASH]` is `InvalidArgument`
/// naming its index (it cannot come from [`sticky_key_hash`]), and nothing is returned.
pub fn slots_many<T: Copy>(hashes: &[T], kind: SlotKind) -> Result<Vec<u32>>
where
    i64: From<T>,
{
    let mut out = Vec::with_capacity(hashes.len());
    for (i, &h) in hashes.iter().enumerate() {
        let h = i64::from(h);
        match u32::try_from(h) {
            Ok(h) if h <= MAX_STICKY_KEY_HASH => out.push(kind.slot(h)),
            _ => {
                return Err(CoreError::InvalidArgument(format!(
                    "hash {h} at index {i} is not a sticky-key hash (0..=2^31-1)"
                )))
            }
        }
    }
    Ok(out)
}

/// An Arrow offset type (`i32` for `binary`/`string`, `i64` for the `large_` variants).
pub trait Offset: Copy + Send + Sync {
    /// The offset as an index, or `None` when it is negative or does not fit.
    fn index(self) -> Option<usize>;
}

impl Offset for i32 {
    #[inline]
    fn index(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

impl Offset for i64 {
    #[inline]
    fn index(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

impl Offset for usize {
    #[inline]
    fn index(self) -> Option<usize> {
        Some(self)
    }
}

/// Applies `f` to each key of an Arrow-layout column: key `i` is `values[offsets[i]..offsets[i+1]]`.
/// Offsets that decrease, are negative or pass the end of `values` are `InvalidArgument` (nothing
/// is returned). Empty `offsets` means no keys.
fn map_keys<O: Offset>(values: &[u8], offsets: &[O], f: impl Fn(&[u8]) -> u32) -> Result<Vec<u32>> {
    let Some((&first, rest)) = offsets.split_first() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::with_capacity(rest.len());
    let mut start = first.index().filter(|&s| s <= values.len());
    for (i, &end) in rest.iter().enumerate() {
        let (Some(s), Some(e)) = (start, end.index()) else {
            return Err(bad_offsets(i, values.len()));
        };
        let Some(key) = values.get(s..e) else {
            return Err(bad_offsets(i, values.len()));
        };
        out.push(f(key));
        start = Some(e);
    }
    Ok(out)
}

#[cold]
fn bad_offsets(i: usize, len: usize) -> CoreError {
    CoreError::InvalidArgument(format!(
        "offsets of key {i} are negative, decreasing or beyond the {len} value bytes"
    ))
}

/// [`sticky_key_hash`] of each key of an Arrow-layout column (`n + 1` offsets into `values`).
pub fn hash_many<O: Offset>(values: &[u8], offsets: &[O]) -> Result<Vec<u32>> {
    map_keys(values, offsets, sticky_key_hash)
}

/// The slot of each key of an Arrow-layout column under `kind` (hash and slot in one pass).
pub fn key_slots_many<O: Offset>(values: &[u8], offsets: &[O], kind: SlotKind) -> Result<Vec<u32>> {
    map_keys(values, offsets, |key| kind.slot(sticky_key_hash(key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Research §0: (key, `m & 0x7fffffff`, consistent-hashing slot, auto-split slot).
    const VECTORS: [(&str, u32, u32, u32); 10] = [
        ("0", 1_383_186_559, 4_850, 49_279),
        ("1", 337_030_291, 49_322, 44_179),
        ("2", 19_522_071, 58_177, 57_879),
        ("8", 1_032_978_455, 15_786, 23),
        ("9", 613_148_321, 2_862, 59_041),
        ("key1", 462_881_061, 7_357, 293),
        ("key2", 1_936_800_180, 44_326, 14_772),
        ("NONE_KEY", 504_741_539, 56_505, 48_803),
        ("testKey", 269_048_979, 27_805, 23_699),
        ("a", 1_009_084_850, 42_456, 27_058),
    ];

    #[test]
    fn research_vectors_hold_in_all_three_columns() {
        for (key, hash, ch, auto) in VECTORS {
            let h = sticky_key_hash(key.as_bytes());
            assert_eq!(h, hash, "hash of {key:?}");
            assert_eq!(slot_consistent(h), ch, "CH slot of {key:?}");
            assert_eq!(
                slot_range(h, DEFAULT_RANGE_SIZE),
                auto,
                "auto-split slot of {key:?}"
            );
            let consistent = SlotKind::consistent(DEFAULT_RANGE_SIZE).unwrap();
            let range = SlotKind::range(DEFAULT_RANGE_SIZE).unwrap();
            assert_eq!(consistent.slot(h), ch);
            assert_eq!(range.slot(h), auto);
        }
        assert_eq!(sticky_key_hash(NONE_KEY), 504_741_539);
    }

    #[test]
    fn murmur3_reference_vectors() {
        // SMHasher's verification values and widely published test vectors.
        let cases: [(&[u8], u32, u32); 14] = [
            (b"", 0, 0),
            (b"", 1, 0x514e_28b7),
            (b"", 0xffff_ffff, 0x81f1_6f39),
            (b"\0\0\0\0", 0, 0x2362_f9de),
            (b"\xff\xff\xff\xff", 0, 0x7629_3b50),
            (b"!Ce\x87", 0, 0xf55b_516b),
            (b"!Ce\x87", 0x5082_edee, 0x2362_f9de),
            (b"!Ce", 0, 0x7e4a_8634),
            (b"!C", 0, 0xa0f7_b07a),
            (b"!", 0, 0x7266_1cf4),
            (b"\0\0\0", 0, 0x85f0_b427),
            (b"hello", 0, 0x248b_fa47),
            (b"Hello, world!", 1234, 0xfaf6_cdb3),
            (
                b"The quick brown fox jumps over the lazy dog",
                0x9747_b28c,
                0x2fa8_26cd,
            ),
        ];
        for (data, seed, expected) in cases {
            assert_eq!(
                murmur3_x86_32(data, seed),
                expected,
                "{data:?} seed {seed:#x}"
            );
        }
    }

    #[test]
    fn slot_functions_follow_pulsar() {
        assert_eq!(slot_consistent(0), 1);
        assert_eq!(slot_consistent(65_534), 65_535);
        assert_eq!(slot_consistent(65_535), 1);
        assert_eq!(
            slot_consistent(MAX_STICKY_KEY_HASH),
            MAX_STICKY_KEY_HASH % 65_535 + 1
        );
        assert_eq!(slot_range(0, DEFAULT_RANGE_SIZE), 1); // STICKY_KEY_HASH_NOT_SET -> 1
        assert_eq!(slot_range(65_536, DEFAULT_RANGE_SIZE), 1);
        assert_eq!(slot_range(1, DEFAULT_RANGE_SIZE), 1);
        assert_eq!(slot_range(65_535, DEFAULT_RANGE_SIZE), 65_535);
        assert_eq!(slot_range(65_537, DEFAULT_RANGE_SIZE), 1);
        assert_eq!(slot_range(12_345, 1), 1);
        assert_eq!(SlotKind::consistent(2).unwrap().slot(12_345), 1);
        assert_eq!(SlotKind::consistent(11).unwrap().slot(25), 6);
        assert_eq!(
            SlotKind::from_name("consistent", DEFAULT_RANGE_SIZE).unwrap(),
            SlotKind::Consistent { max: 65_535 }
        );
        assert_eq!(
            SlotKind::from_name("range", 16).unwrap(),
            SlotKind::Range { size: 16 }
        );
    }

    #[test]
    fn bad_range_sizes_and_names_are_rejected() {
        for bad in [0, MAX_RANGE_SIZE + 1, u32::MAX] {
            assert!(matches!(
                SlotKind::range(bad),
                Err(CoreError::InvalidArgument(_))
            ));
        }
        for bad in [0, 1, MAX_RANGE_SIZE + 1] {
            assert!(matches!(
                SlotKind::consistent(bad),
                Err(CoreError::InvalidArgument(_))
            ));
        }
        assert!(SlotKind::range(MAX_RANGE_SIZE).is_ok());
        assert!(SlotKind::consistent(MAX_RANGE_SIZE).is_ok());
        let err = SlotKind::from_name("sticky", DEFAULT_RANGE_SIZE).unwrap_err();
        assert!(err.to_string().contains("\"sticky\""), "{err}");
    }

    #[test]
    fn slots_many_checks_every_hash() {
        let kind = SlotKind::range(DEFAULT_RANGE_SIZE).unwrap();
        let hashes: Vec<u32> = VECTORS.iter().map(|v| v.1).collect();
        let autos: Vec<u32> = VECTORS.iter().map(|v| v.3).collect();
        assert_eq!(slots_many(&hashes, kind).unwrap(), autos);
        let wide: Vec<i64> = hashes.iter().map(|&h| i64::from(h)).collect();
        assert_eq!(slots_many(&wide, kind).unwrap(), autos);
        let err = slots_many(&[1i64, -1], kind).unwrap_err();
        assert!(err.to_string().contains("index 1"), "{err}");
        let err = slots_many(&[0x8000_0000u32], kind).unwrap_err();
        assert!(err.to_string().contains("index 0"), "{err}");
        assert!(slots_many(&[1i64 << 40], kind).is_err());
        assert_eq!(slots_many::<u32>(&[], kind).unwrap(), Vec::<u32>::new());
    }

    fn arrow_layout(keys: &[&[u8]]) -> (Vec<u8>, Vec<i64>) {
        let mut values = Vec::new();
        let mut offsets = vec![0i64];
        for key in keys {
            values.extend_from_slice(key);
            offsets.push(values.len() as i64);
        }
        (values, offsets)
    }

    #[test]
    fn hash_many_reads_arrow_offsets() {
        let keys: Vec<&[u8]> = VECTORS.iter().map(|v| v.0.as_bytes()).collect();
        let (values, offsets) = arrow_layout(&keys);
        let expected: Vec<u32> = VECTORS.iter().map(|v| v.1).collect();
        assert_eq!(hash_many(&values, &offsets).unwrap(), expected);
        let narrow: Vec<i32> = offsets.iter().map(|&o| o as i32).collect();
        assert_eq!(hash_many(&values, &narrow).unwrap(), expected);
        // A slice of the column: offsets start past 0 and stop before the end.
        assert_eq!(hash_many(&values, &offsets[3..7]).unwrap(), expected[3..6]);
        let slots = key_slots_many(&values, &offsets, SlotKind::consistent(65_536).unwrap());
        let ch: Vec<u32> = VECTORS.iter().map(|v| v.2).collect();
        assert_eq!(slots.unwrap(), ch);
        assert_eq!(hash_many::<i32>(&values, &[]).unwrap(), Vec::<u32>::new());
        assert_eq!(hash_many::<i32>(&values, &[4]).unwrap(), Vec::<u32>::new());
        assert_eq!(hash_many::<i64>(&[], &[0, 0]).unwrap(), vec![0]);
    }

    #[test]
    fn hash_many_rejects_bad_offsets() {
        let values = b"abcdef";
        for (offsets, bad_key) in [
            (&[0i64, 3, 2][..], 1),
            (&[0, 7][..], 0),
            (&[-1, 2][..], 0),
            (&[0, 2, -1][..], 1),
            (&[7, 7][..], 0),
        ] {
            let err = hash_many(values, offsets).unwrap_err();
            assert!(
                err.to_string().contains(&format!("key {bad_key} ")),
                "{offsets:?}: {err}"
            );
        }
    }

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

    /// Murmur3 x86_32 written byte by byte from the reference's description, as a model (its
    /// rotations spelled out as shifts, as in the reference C, on purpose).
    #[allow(clippy::manual_rotate)]
    fn model_murmur3(data: &[u8], seed: u32) -> u32 {
        let mut h = seed;
        let blocks = data.len() / 4;
        for b in 0..blocks {
            let mut k = 0u32;
            for j in (0..4).rev() {
                k = (k << 8) | u32::from(data[4 * b + j]);
            }
            k = k.wrapping_mul(C1);
            k = (k << 15) | (k >> 17);
            k = k.wrapping_mul(C2);
            h ^= k;
            h = (h << 13) | (h >> 19);
            h = h.wrapping_mul(5).wrapping_add(0xe654_6b64);
        }
        let tail = &data[4 * blocks..];
        let mut k = 0u32;
        if tail.len() >= 3 {
            k ^= u32::from(tail[2]) << 16;
        }
        if tail.len() >= 2 {
            k ^= u32::from(tail[1]) << 8;
        }
        if !tail.is_empty() {
            k ^= u32::from(tail[0]);
            k = k.wrapping_mul(C1);
            k = (k << 15) | (k >> 17);
            h ^= k.wrapping_mul(C2);
        }
        h ^= data.len() as u32;
        h ^= h >> 16;
        h = h.wrapping_mul(0x85eb_ca6b);
        h ^= h >> 13;
        h = h.wrapping_mul(0xc2b2_ae35);
        h ^ (h >> 16)
    }

    #[test]
    fn murmur3_matches_the_model_on_random_input() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..5_000 {
            let len = rng.below(70) as usize;
            let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let seed = if rng.below(2) == 0 {
                0
            } else {
                rng.next() as u32
            };
            assert_eq!(
                murmur3_x86_32(&data, seed),
                model_murmur3(&data, seed),
                "{data:?}"
            );
        }
    }

    #[test]
    fn bulk_matches_per_key_on_random_columns() {
        let mut rng = Rng(42);
        for round in 0..200 {
            let n = rng.below(50) as usize;
            let keys: Vec<Vec<u8>> = (0..n)
                .map(|_| (0..rng.below(40)).map(|_| rng.next() as u8).collect())
                .collect();
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let (values, offsets) = arrow_layout(&refs);
            let expected: Vec<u32> = refs.iter().map(|k| sticky_key_hash(k)).collect();
            assert_eq!(hash_many(&values, &offsets).unwrap(), expected);
            let narrow: Vec<i32> = offsets.iter().map(|&o| o as i32).collect();
            assert_eq!(hash_many(&values, &narrow).unwrap(), expected);
            let size = 1 + rng.below(100_000) as u32;
            let kind = if round % 2 == 0 {
                SlotKind::range(size).unwrap()
            } else {
                SlotKind::consistent(size.max(2)).unwrap()
            };
            let slots: Vec<u32> = expected.iter().map(|&h| kind.slot(h)).collect();
            assert_eq!(key_slots_many(&values, &offsets, kind).unwrap(), slots);
            assert_eq!(slots_many(&expected, kind).unwrap(), slots);
            for (&h, &s) in expected.iter().zip(&slots) {
                assert!(h <= MAX_STICKY_KEY_HASH);
                match kind {
                    SlotKind::Consistent { max } => assert!((1..=max).contains(&s)),
                    SlotKind::Range { size } => assert!(s >= 1 && (s < size || size == 1)),
                }
            }
        }
    }
}
