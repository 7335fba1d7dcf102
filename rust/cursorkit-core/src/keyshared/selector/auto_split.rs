//! PIP-34's auto-split selector (Pulsar's `HashRangeAutoSplitStickyKeyConsumerSelector`).
//!
//! The state is a map `upper bound -> consumer`: a consumer with bound `k` owns `(previous bound, k]`,
//! the first from 0, so ranges read `[prev + 1, k]` and the top bound is always `range_size`.
//! A joiner splits the first strictly widest range and takes its lower half; a leaver's range
//! merges into the next higher one, except the top bound, which the consumer just below takes over.

use std::collections::{BTreeMap, HashMap};

use super::{
    check_new_id, no_ranges, unknown, Assignment, BeyondTable, HashRange, Impact, SlotTable,
    Snapshot, StickyKeySelector, MAX_SELECTOR_RANGE_SIZE,
};
use crate::error::{CoreError, Result};

/// Consumers split the hash space in halves as they join (PIP-34).
///
/// ```
/// use cursorkit_core::{AutoSplitSelector, StickyKeySelector};
/// let mut sel = AutoSplitSelector::new(65536).unwrap();
/// for id in 1..=4 {
///     sel.add_consumer(id, "", &[]).unwrap();
/// }
/// assert_eq!(
///     sel.consumer_key_hash_ranges(),
///     vec![(3, vec![(0, 16384)]), (2, vec![(16385, 32768)]), (4, vec![(32769, 49152)]),
///          (1, vec![(49153, 65536)])]
/// );
/// ```
#[derive(Clone, Debug)]
pub struct AutoSplitSelector {
    range_size: u32,
    /// Upper bound -> consumer.
    bounds: BTreeMap<u32, u32>,
    /// Consumer -> its upper bound.
    by_consumer: HashMap<u32, u32>,
    snapshot: Snapshot,
}

impl AutoSplitSelector {
    /// An empty selector over slots `0..range_size`; `range_size` must be a power of two in
    /// `2..=65536` (`InvalidArgument` otherwise). Pulsar's default is 65536.
    pub fn new(range_size: u32) -> Result<Self> {
        if range_size < 2 || !range_size.is_power_of_two() || range_size > MAX_SELECTOR_RANGE_SIZE {
            return Err(CoreError::InvalidArgument(format!(
                "range_size must be a power of two in 2..={MAX_SELECTOR_RANGE_SIZE}, got {range_size}"
            )));
        }
        Ok(Self {
            range_size,
            bounds: BTreeMap::new(),
            by_consumer: HashMap::new(),
            snapshot: Snapshot::new(range_size, BeyondTable::Reject),
        })
    }

    /// The size of the hash space (the top upper bound).
    pub fn range_size(&self) -> u32 {
        self.range_size
    }

    /// The upper bound a joiner would take: the split point of the first strictly widest range.
    fn split_point(&self) -> Result<u32> {
        let (mut lower, mut upper, mut widest) = (0, self.range_size, 0);
        let mut prev = 0;
        for &bound in self.bounds.keys() {
            if bound - prev > widest {
                (lower, upper, widest) = (prev, bound, bound - prev);
            }
            prev = bound;
        }
        if widest <= 1 {
            return Err(CoreError::ConsumerAssign(format!(
                "No more range can be assigned to new consumer, assigned consumers {}",
                self.bounds.len()
            )));
        }
        Ok(upper - ((upper - lower) >> 1))
    }

    fn rebuild(&mut self) -> Impact {
        let mut list = Vec::with_capacity(self.bounds.len());
        let mut start = 0;
        for (&bound, &consumer) in &self.bounds {
            list.push(Assignment {
                start,
                end: bound,
                consumer,
            });
            start = bound + 1;
        }
        self.snapshot.replace(list)
    }
}

impl StickyKeySelector for AutoSplitSelector {
    fn add_consumer(&mut self, id: u32, _name: &str, ranges: &[HashRange]) -> Result<Impact> {
        check_new_id(id, self.by_consumer.contains_key(&id))?;
        no_ranges("auto-split", ranges)?;
        let bound = if self.bounds.is_empty() {
            self.range_size
        } else {
            self.split_point()?
        };
        self.bounds.insert(bound, id);
        self.by_consumer.insert(id, bound);
        Ok(self.rebuild())
    }

    fn remove_consumer(&mut self, id: u32) -> Result<Impact> {
        let bound = self.by_consumer.remove(&id).ok_or_else(|| unknown(id))?;
        let below = self
            .bounds
            .range(..bound)
            .next_back()
            .map(|(&b, &c)| (b, c));
        match below {
            Some((lower_bound, lower)) if bound == self.range_size => {
                // The top bound stays: the consumer just below takes it over (merge downward).
                self.bounds.remove(&lower_bound);
                self.bounds.insert(bound, lower);
                self.by_consumer.insert(lower, bound);
            }
            _ => {
                self.bounds.remove(&bound);
            }
        }
        Ok(self.rebuild())
    }

    fn assignments(&self) -> &[Assignment] {
        &self.snapshot.assignments
    }

    fn table(&self) -> &SlotTable {
        &self.snapshot.table
    }

    fn key_hash_range(&self) -> HashRange {
        (0, self.range_size - 1)
    }

    fn consumer_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.by_consumer.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    fn contains(&self, id: u32) -> bool {
        self.by_consumer.contains_key(&id)
    }

    fn len(&self) -> usize {
        self.by_consumer.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    fn ranges(sel: &AutoSplitSelector) -> Vec<(u32, Vec<HashRange>)> {
        let mut r = sel.consumer_key_hash_ranges();
        r.sort();
        r
    }

    #[test]
    fn range_size_must_be_a_power_of_two() {
        for bad in [0, 1, 3, 100, 65535, 1 << 17] {
            assert!(matches!(
                AutoSplitSelector::new(bad),
                Err(CoreError::InvalidArgument(_))
            ));
        }
        for good in [2, 4, 64, 65536] {
            assert_eq!(AutoSplitSelector::new(good).unwrap().range_size(), good);
        }
    }

    #[test]
    fn pip34_example() {
        let mut sel = AutoSplitSelector::new(65536).unwrap();
        let i1 = sel.add_consumer(1, "c1", &[]).unwrap();
        assert!(i1.removed.is_empty());
        assert_eq!(i1.added, vec![(1, vec![(0, 65536)])]);
        let i2 = sel.add_consumer(2, "c2", &[]).unwrap();
        assert_eq!(i2.removed, vec![(1, vec![(0, 32768)])]);
        assert_eq!(
            ranges(&sel),
            vec![(1, vec![(32769, 65536)]), (2, vec![(0, 32768)])]
        );
        let i3 = sel.add_consumer(3, "c3", &[]).unwrap();
        assert_eq!(i3.removed, vec![(2, vec![(0, 16384)])]);
        assert_eq!(
            ranges(&sel),
            vec![
                (1, vec![(32769, 65536)]),
                (2, vec![(16385, 32768)]),
                (3, vec![(0, 16384)])
            ]
        );
        let i4 = sel.add_consumer(4, "c4", &[]).unwrap();
        assert_eq!(i4.removed, vec![(1, vec![(32769, 49152)])]);
        assert_eq!(i4.impacted(), vec![1, 4]);
        assert_eq!(
            ranges(&sel),
            vec![
                (1, vec![(49153, 65536)]),
                (2, vec![(16385, 32768)]),
                (3, vec![(0, 16384)]),
                (4, vec![(32769, 49152)])
            ]
        );
        check_consistent(&sel);
    }

    #[test]
    fn pulsar_test_ranges_of_64() {
        // HashRangeAutoSplitStickyKeyConsumerSelectorTest.testGetConsumerKeyHashRanges
        let mut sel = AutoSplitSelector::new(64).unwrap();
        for id in 0..4 {
            sel.add_consumer(id, "", &[]).unwrap();
        }
        assert_eq!(
            ranges(&sel),
            vec![
                (0, vec![(49, 64)]),
                (1, vec![(17, 32)]),
                (2, vec![(0, 16)]),
                (3, vec![(33, 48)])
            ]
        );
    }

    #[test]
    fn remove_top_merges_downward_else_upward() {
        let mut sel = AutoSplitSelector::new(65536).unwrap();
        for id in 1..=4 {
            sel.add_consumer(id, "", &[]).unwrap();
        }
        // c1 holds the top bound: c4 just below takes it over.
        let impact = sel.remove_consumer(1).unwrap();
        assert_eq!(impact.removed, vec![(1, vec![(49153, 65536)])]);
        assert_eq!(impact.added, vec![(4, vec![(49153, 65536)])]);
        assert_eq!(sel.select(65535), Some(4));
        // c3 [0, 16384] merges into the next higher, c2.
        let impact = sel.remove_consumer(3).unwrap();
        assert_eq!(impact.added, vec![(2, vec![(0, 16384)])]);
        assert_eq!(
            ranges(&sel),
            vec![(2, vec![(0, 32768)]), (4, vec![(32769, 65536)])]
        );
        check_consistent(&sel);
        sel.remove_consumer(4).unwrap();
        assert_eq!(ranges(&sel), vec![(2, vec![(0, 65536)])]);
        let impact = sel.remove_consumer(2).unwrap();
        assert_eq!(impact.removed, vec![(2, vec![(0, 65536)])]);
        assert!(sel.assignments().is_empty());
        assert_eq!(sel.select(0), None);
    }

    #[test]
    fn no_more_range_and_errors_keep_state() {
        let mut sel = AutoSplitSelector::new(2).unwrap();
        sel.add_consumer(1, "", &[]).unwrap();
        sel.add_consumer(2, "", &[]).unwrap();
        assert_eq!(ranges(&sel), vec![(1, vec![(2, 2)]), (2, vec![(0, 1)])]);
        let before = sel.assignments().to_vec();
        let err = sel.add_consumer(3, "", &[]).unwrap_err();
        assert!(matches!(err, CoreError::ConsumerAssign(ref m)
            if m == "No more range can be assigned to new consumer, assigned consumers 2"));
        assert!(matches!(
            sel.add_consumer(1, "", &[]),
            Err(CoreError::InvalidArgument(_))
        ));
        assert!(matches!(
            sel.add_consumer(9, "", &[(0, 1)]),
            Err(CoreError::InvalidArgument(_))
        ));
        assert!(matches!(
            sel.add_consumer(u32::MAX, "", &[]),
            Err(CoreError::InvalidArgument(_))
        ));
        assert!(matches!(
            sel.remove_consumer(3),
            Err(CoreError::UnknownConsumer(_))
        ));
        assert_eq!(sel.assignments(), &before[..]);
        assert_eq!(sel.len(), 2);
        assert_eq!(sel.select(0), Some(2));
        assert_eq!(sel.select(1), Some(2));
        assert_eq!(sel.select(2), None); // beyond the key hash range 0..=1
    }

    /// A model of Pulsar's map, kept as a sorted vector of (bound, consumer).
    fn model_add(bounds: &mut Vec<(u32, u32)>, size: u32, id: u32) -> bool {
        if bounds.is_empty() {
            bounds.push((size, id));
            return true;
        }
        let mut best: Option<(u32, u32)> = None;
        let mut prev = 0;
        for &(b, _) in bounds.iter() {
            if best.is_none_or(|(lo, hi)| b - prev > hi - lo) {
                best = Some((prev, b));
            }
            prev = b;
        }
        let (lo, hi) = best.unwrap();
        if hi - lo <= 1 {
            return false;
        }
        bounds.push((hi - ((hi - lo) >> 1), id));
        bounds.sort();
        true
    }

    fn model_remove(bounds: &mut Vec<(u32, u32)>, size: u32, id: u32) {
        let at = bounds.iter().position(|&(_, c)| c == id).unwrap();
        if bounds[at].0 == size && bounds.len() > 1 {
            let lower = bounds[at - 1].1;
            bounds.remove(at - 1);
            bounds.last_mut().unwrap().1 = lower;
        } else {
            bounds.remove(at);
        }
    }

    #[test]
    fn random_against_model() {
        let mut rng = Rng(34);
        for round in 0..40 {
            let size = 1 << (1 + rng.below(9));
            let mut sel = AutoSplitSelector::new(size).unwrap();
            let mut model: Vec<(u32, u32)> = Vec::new();
            let mut next_id = 0;
            for _ in 0..60 {
                let before = sel.assignments().to_vec();
                let impact = if model.is_empty() || rng.below(3) > 0 {
                    next_id += 1;
                    let ok = model_add(&mut model, size, next_id);
                    let got = sel.add_consumer(next_id, "", &[]);
                    assert_eq!(got.is_ok(), ok, "round {round}");
                    match got {
                        Ok(i) => i,
                        Err(_) => continue,
                    }
                } else {
                    let (_, victim) = model[rng.below(model.len() as u64) as usize];
                    model_remove(&mut model, size, victim);
                    sel.remove_consumer(victim).unwrap()
                };
                let expect: Vec<Assignment> = model
                    .iter()
                    .enumerate()
                    .map(|(i, &(b, c))| Assignment {
                        start: if i == 0 { 0 } else { model[i - 1].0 + 1 },
                        end: b,
                        consumer: c,
                    })
                    .collect();
                assert_eq!(sel.assignments(), &expect[..], "round {round}");
                check_impact(&before, sel.assignments(), &impact, size);
                check_consistent(&sel);
            }
        }
    }
}
