//! Randomised decoder tests: every decoder of bytes from a disk or a peer, fed random bytes, every
//! single-byte flip and truncation of valid encodings, and crafted length fields. Each call must
//! return a value or an error: a panic fails the test. `CURSORKIT_FUZZ=long` (`make fuzz`) runs
//! a hundred times as many random cases.

use std::time::{Duration, Instant};

use cursorkit_core::{
    bitmap_cardinality, decode_segment, encode_segment, parse_message_ranges, Cursor, Position,
    RangeSet, MAX_DECODED_CHUNKS,
};

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn bytes(&mut self, max_len: u64) -> Vec<u8> {
        let n = self.below(max_len + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn random_cases() -> u64 {
    if std::env::var("CURSORKIT_FUZZ").as_deref() == Ok("long") {
        200_000
    } else {
        2_000
    }
}

/// Runs `decode` on every mutation of `seeds` and on random inputs; returns how many ran.
fn hammer(name: &str, seeds: &[Vec<u8>], decode: impl Fn(&[u8])) -> u64 {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ name.len() as u64);
    let mut worst = Duration::ZERO;
    let mut cases = 0u64;
    let mut run = |data: &[u8]| {
        let t0 = Instant::now();
        decode(data);
        worst = worst.max(t0.elapsed());
        cases += 1;
    };
    for seed in seeds {
        run(seed);
        for cut in 0..seed.len() {
            run(&seed[..cut]);
        }
        for at in 0..seed.len() {
            for flip in [0xFF, 0x80, 0x01] {
                let mut m = seed.clone();
                m[at] ^= flip;
                run(&m);
            }
            // A crafted length or count: the largest varint / little-endian values.
            let mut m = seed.clone();
            m.splice(
                at..at,
                [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
            );
            run(&m);
        }
    }
    for _ in 0..random_cases() {
        let data = rng.bytes(96);
        run(&data);
        if let Some(seed) = seeds.get(rng.below(seeds.len() as u64) as usize) {
            let mut m = seed.clone();
            for _ in 0..=rng.below(4) {
                if !m.is_empty() {
                    let at = rng.below(m.len() as u64) as usize;
                    m[at] = rng.next() as u8;
                }
            }
            run(&m);
        }
    }
    assert!(
        worst < Duration::from_secs(1),
        "{name}: a case took {worst:?}"
    );
    eprintln!("{name}: {cases} cases, none panicked, worst {worst:?}");
    cases
}

fn sample_set() -> RangeSet {
    let mut rs = RangeSet::new(false);
    rs.add_open_closed(1, -1, 1, 5, None).unwrap();
    rs.add_open_closed(1, 9, 1, 70_000, None).unwrap();
    rs.add_open_closed(3, 4, 3, 200_000, None).unwrap();
    rs.add_open_closed(4, 4_294_967_200, 4, 4_294_967_295, None)
        .unwrap();
    rs.add_open_closed(7, 100, 7, 200, None).unwrap();
    rs
}

#[test]
fn rangeset_compact_bytes() {
    let seeds = vec![sample_set().to_bytes(), RangeSet::new(true).to_bytes()];
    let n = hammer("RangeSet::from_bytes", &seeds, |d| {
        let _ = RangeSet::from_bytes(d);
    });
    assert!(n > 1_000);
}

#[test]
fn message_range_lists() {
    let seeds = vec![
        sample_set().message_range_field_bytes(None),
        sample_set().message_range_field_bytes(Some(1)),
    ];
    let n = hammer("parse_message_ranges", &seeds, |d| {
        if let Ok(rows) = parse_message_ranges(d, 3) {
            let mut rs = RangeSet::new(false);
            let _ = rs.add_ranges_within(&rows, None, MAX_DECODED_CHUNKS);
        }
    });
    assert!(n > 1_000);
}

#[test]
fn snapshot_segments() {
    let seeds = vec![
        encode_segment(&[5, 6, 6, 90], &[1, 1, 2, 3], &[0, 4, 1, 4_294_967_295]).unwrap(),
        encode_segment(&[], &[], &[]).unwrap(),
    ];
    let n = hammer("decode_segment", &seeds, |d| {
        let _ = decode_segment(d);
    });
    assert!(n > 1_000);
}

#[test]
fn roaring_portable_bitmaps() {
    let rs = sample_set();
    let seeds: Vec<Vec<u8>> = [1, 3, 4, 7]
        .iter()
        .filter_map(|&l| rs.ledger_to_bytes(l))
        .collect();
    let n = hammer("bitmap_cardinality", &seeds, |d| {
        let _ = bitmap_cardinality(d);
        let _ = RangeSet::new(false).union_ledger_bytes(1, d);
    });
    assert!(n > 1_000);
}

#[test]
fn long_list_map_words() {
    // Words decoded from bytes: lengths up to the 2^26-word maximum, and the top word set.
    let mut rng = Rng(7);
    for _ in 0..random_cases() / 10 {
        let n = rng.below(64) as usize;
        let words: Vec<i64> = (0..n).map(|_| rng.next() as i64).collect();
        let _ = RangeSet::from_long_list_map(&[(rng.below(4) as i64, words)], rng.below(2) == 1);
    }
    let mut top = vec![0i64; 1 << 26];
    top[(1 << 26) - 1] = i64::MIN;
    let rs = RangeSet::from_long_list_map(&[(1, top)], false).unwrap();
    assert!(rs.contains(1, 4_294_967_295).unwrap());
    assert!(RangeSet::from_long_list_map(&[(1, vec![0; (1 << 26) + 1])], false).is_err());
}

#[test]
fn cursor_restore_with_any_bounds() {
    // A restore from decoded parts never panics: mark-delete and batch positions are checked.
    let entries = [
        -2,
        -1,
        0,
        1,
        4_294_967_295,
        4_294_967_296,
        i64::MAX,
        i64::MIN,
    ];
    for &md in &entries {
        for &ledger in &[-1, 0, 1, i64::MAX] {
            let Ok(p) = Position::new(ledger, md) else {
                continue;
            };
            let _ = Cursor::from_parts(p, sample_set(), Vec::new());
            let mut c = Cursor::new(Position::new(1, -1).unwrap(), false);
            let _ = c.restore(p, sample_set(), Vec::new());
        }
    }
}
