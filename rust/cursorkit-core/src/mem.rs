//! Memory helpers shared by every domain: a fast hasher for integer keys and the heap bytes of a
//! hash map or a roaring bitmap (what the structures' `memory_usage` figures are made of).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::mem::size_of;

use roaring::RoaringBitmap;

/// A multiply-fold hasher for integer keys (ledger ids, bucket keys): one 64×64→128 multiply.
/// Not DoS-resistant; the keys come from the broker, not from clients.
#[derive(Default, Clone, Copy)]
pub(crate) struct FoldHasher(u64);

impl Hasher for FoldHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        let p = u128::from(v ^ self.0 ^ 0x243F_6A88_85A3_08D3) * 0x9E37_79B9_7F4A_7C15_u128;
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }

    #[inline]
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
}

/// A `HashMap` with [`FoldHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FoldHasher>>;

/// Heap bytes of a `FastMap` with this capacity (hashbrown: one slot and one control byte per
/// bucket plus a 16-byte control group; buckets are a power of two holding 7/8 of it).
pub(crate) fn map_bytes<K, V>(map: &FastMap<K, V>) -> usize {
    let cap = map.capacity();
    if cap == 0 {
        return 0;
    }
    let buckets = (cap * 8 / 7).next_power_of_two();
    buckets * (size_of::<(K, V)>() + 1) + 16
}

/// Heap bytes of a roaring bitmap (containers, their payloads and the container vector).
pub(crate) fn bitmap_bytes(bits: &RoaringBitmap) -> usize {
    let s = bits.statistics();
    // roaring reports array capacity in u32s (it stores u16s) and bitmaps in bits; use real sizes.
    let payload = s.n_bytes_array_containers / 2
        + s.n_bytes_run_containers
        + u64::from(s.n_bitset_containers) * 8192;
    payload as usize + s.n_containers as usize * 32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hasher_spreads_low_and_high_bits() {
        let h = |v: u64| {
            let mut s = FoldHasher::default();
            s.write_u64(v);
            s.finish()
        };
        let lows: std::collections::HashSet<u64> =
            (0..1024u64).map(|v| h(v << 32) & 1023).collect();
        assert!(lows.len() > 600);
    }
}
