//! The bulk-add paths of `RangeSet::add_many` (dense word arrays, long runs from a permutation,
//! small merges into a large set, appends) against a plain `BTreeSet` model: contents and the
//! O(1) range count after every batch.

use std::collections::BTreeSet;

use cursorkit_core::RangeSet;

mod common;
use common::Rng;

/// Ranges of a sorted set of entries (one ledger).
fn runs(model: &BTreeSet<u32>) -> u64 {
    let mut n = 0;
    let mut prev: Option<u32> = None;
    for &e in model {
        if prev.is_none_or(|p| p + 1 != e) {
            n += 1;
        }
        prev = Some(e);
    }
    n
}

/// A batch of one of the shapes bulk acks take, around `at`.
fn batch(rng: &mut Rng, at: u32) -> Vec<u32> {
    let len = 1 + rng.below(5_000) as u32;
    let mut out: Vec<u32> = match rng.below(5) {
        0 => (at..at + len).collect(),                // in order, one run
        1 => (at..at + 2 * len).step_by(2).collect(), // alternating holes
        2 => (0..len)
            .map(|_| at + rng.below(u64::from(len) * 3) as u32)
            .collect(), // dense random
        3 => (0..len).map(|_| at + rng.below(1 << 20) as u32).collect(), // sparse
        _ => (0..len).map(|_| at + rng.below(200) as u32).collect(), // duplicates, short span
    };
    if rng.below(2) == 0 {
        for i in (1..out.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            out.swap(i, j);
        }
    }
    out
}

#[test]
fn bulk_adds_match_a_set_model() {
    for seed in 0..40u64 {
        let mut rng = Rng(seed);
        let mut set = RangeSet::new(false);
        let mut model: BTreeSet<u32> = BTreeSet::new();
        for _ in 0..30 {
            // Near what is held (overlaps, neighbours) or somewhere new, across container edges.
            let at = match rng.below(3) {
                0 => model
                    .iter()
                    .next_back()
                    .map_or(0, |&m| m.saturating_sub(rng.below(3000) as u32)),
                1 => (rng.below(8) as u32) << 16,
                _ => rng.below(1 << 22) as u32,
            };
            let mut b = batch(&mut rng, at);
            if rng.below(4) == 0 {
                // Ending right below the first held entry: a right-hand neighbour to join.
                if let Some(&first) = model.iter().next() {
                    let k = 1 + rng.below(u64::from(first.min(4000))) as u32;
                    let step = 1 + rng.below(2) as usize;
                    b = (first.saturating_sub(k)..first)
                        .rev()
                        .step_by(step)
                        .collect();
                    if rng.below(2) == 0 {
                        for i in (1..b.len()).rev() {
                            let j = rng.below(i as u64 + 1) as usize;
                            b.swap(i, j);
                        }
                    }
                }
            }
            let ledgers = vec![7i64; b.len()];
            let entries: Vec<i64> = b.iter().map(|&e| i64::from(e)).collect();
            let before = model.len();
            model.extend(b.iter().copied());
            let added = set.add_many(&ledgers, &entries).unwrap();
            assert_eq!(added as usize, model.len() - before, "seed {seed}: added");
            assert_eq!(set.len(), runs(&model), "seed {seed}: range count");
            assert_eq!(
                set.total_cardinality(),
                model.len() as u64,
                "seed {seed}: cardinality"
            );
        }
        let probes: Vec<i64> = (0..20_000).map(|_| rng.below(1 << 22) as i64).collect();
        let got = set.contains_many(&vec![7; probes.len()], &probes).unwrap();
        for (p, g) in probes.iter().zip(got) {
            assert_eq!(g, model.contains(&(*p as u32)), "seed {seed}: contains {p}");
        }
        let flat: Vec<(i64, i64)> = set
            .ranges()
            .iter()
            .map(|(lower, upper)| (lower.entry_id + 1, upper.entry_id))
            .collect();
        let expected: u64 = flat.iter().map(|(a, b)| (b - a + 1) as u64).sum();
        assert_eq!(
            expected,
            model.len() as u64,
            "seed {seed}: ranges cover the model"
        );
    }
}
