//! The exclusive (`STICKY`) selector: consumers bring their own hash ranges (Pulsar's
//! `HashRangeExclusiveStickyKeyConsumerSelector`, 4.x validation).
//!
//! Ranges may not overlap, neither a consumer's own nor another's; what nobody claims stays
//! unowned (a message hashing there has no consumer). A slot is `hash % range_size`; ranges are
//! not checked against `range_size` (as in Pulsar), so a part beyond it is never selected.

use std::collections::{BTreeMap, HashMap};

use super::{
    check_new_id, unknown, Assignment, BeyondTable, HashRange, Impact, SlotTable, Snapshot,
    StickyKeySelector, MAX_SELECTOR_RANGE_SIZE,
};
use crate::error::{CoreError, Result};

/// Consumer-supplied, non-overlapping inclusive hash ranges.
///
/// ```
/// use cursorkit_core::{CoreError, ExclusiveRangeSelector, StickyKeySelector};
/// let mut sel = ExclusiveRangeSelector::new(65536).unwrap();
/// sel.add_consumer(1, "c1", &[(0, 99), (200, 299)]).unwrap();
/// assert_eq!(sel.select(250), Some(1));
/// assert_eq!(sel.select(150), None);
/// let err = sel.add_consumer(2, "c2", &[(90, 120)]).unwrap_err();
/// assert!(matches!(err, CoreError::ConsumerAssign(_)));
/// ```
#[derive(Clone, Debug)]
pub struct ExclusiveRangeSelector {
    range_size: u32,
    /// Range start -> (end, consumer).
    ranges: BTreeMap<u32, (u32, u32)>,
    /// Consumer -> (name, its ranges sorted by start).
    consumers: HashMap<u32, (String, Vec<HashRange>)>,
    snapshot: Snapshot,
}

fn overlap(a: HashRange, b: HashRange) -> bool {
    a.0.max(b.0) <= a.1.min(b.1)
}

fn assign_error(message: String) -> CoreError {
    CoreError::ConsumerAssign(message)
}

impl ExclusiveRangeSelector {
    /// An empty selector whose slots are `hash % range_size`; `range_size` must be in
    /// `1..=65536` (`InvalidArgument` otherwise). Pulsar's default is 65536.
    pub fn new(range_size: u32) -> Result<Self> {
        if range_size == 0 || range_size > MAX_SELECTOR_RANGE_SIZE {
            return Err(CoreError::InvalidArgument(format!(
                "range_size must be in 1..={MAX_SELECTOR_RANGE_SIZE}, got {range_size}"
            )));
        }
        Ok(Self {
            range_size,
            ranges: BTreeMap::new(),
            consumers: HashMap::new(),
            snapshot: Snapshot::new(range_size, BeyondTable::Modulo),
        })
    }

    /// The modulus applied to hashes.
    pub fn range_size(&self) -> u32 {
        self.range_size
    }

    /// The ranges consumer `id` registered (sorted by start), or None.
    pub fn ranges_of(&self, id: u32) -> Option<&[HashRange]> {
        self.consumers.get(&id).map(|(_, r)| &r[..])
    }

    /// The first registered consumer whose range overlaps one of `ranges` (checked in the order
    /// given), with that range: the holder Pulsar pings before rejecting a newcomer.
    pub fn conflicting_consumer(&self, ranges: &[HashRange]) -> Option<(u32, HashRange)> {
        ranges.iter().find_map(|&r| {
            let before = self.ranges.range(..=r.0).next_back();
            let after = self.ranges.range(r.0..).next();
            [before, after]
                .into_iter()
                .flatten()
                .map(|(&start, &(end, c))| (c, (start, end)))
                .find(|&(_, held)| overlap(r, held))
        })
    }

    /// Pulsar's checks, in its order: non-empty, then each range (sorted by start) has
    /// `start <= end` and does not overlap the next, then no overlap with another consumer.
    fn validate(&self, ranges: &[HashRange]) -> Result<Vec<HashRange>> {
        if ranges.is_empty() {
            return Err(assign_error(
                "Ranges for KeyShared policy must not be empty.".to_owned(),
            ));
        }
        let mut sorted = ranges.to_vec();
        sorted.sort_by_key(|r| r.0);
        for (i, &(start, end)) in sorted.iter().enumerate() {
            if start > end {
                return Err(assign_error(format!(
                    "Fixed hash range start > end for range: [{start},{end}]"
                )));
            }
            if let Some(&next) = sorted.get(i + 1) {
                if overlap((start, end), next) {
                    return Err(assign_error(format!(
                        "Consumer's own ranges conflict: [{start},{end}] overlaps with [{},{}]",
                        next.0, next.1
                    )));
                }
            }
        }
        if let Some((holder, held)) = self.conflicting_consumer(ranges) {
            let wanted = ranges
                .iter()
                .find(|&&r| overlap(r, held))
                .copied()
                .unwrap_or(held);
            let name = self.consumers.get(&holder).map_or("", |(n, _)| n.as_str());
            return Err(assign_error(format!(
                "Range conflict with consumer {name:?} (id {holder}): [{},{}] overlaps its range [{},{}]",
                wanted.0, wanted.1, held.0, held.1
            )));
        }
        Ok(sorted)
    }

    fn rebuild(&mut self) -> Impact {
        let list = self
            .ranges
            .iter()
            .map(|(&start, &(end, consumer))| Assignment {
                start,
                end,
                consumer,
            })
            .collect();
        self.snapshot.replace(list)
    }
}

impl StickyKeySelector for ExclusiveRangeSelector {
    fn add_consumer(&mut self, id: u32, name: &str, ranges: &[HashRange]) -> Result<Impact> {
        check_new_id(id, self.consumers.contains_key(&id))?;
        let sorted = self.validate(ranges)?;
        for &(start, end) in &sorted {
            self.ranges.insert(start, (end, id));
        }
        self.consumers.insert(id, (name.to_owned(), sorted));
        Ok(self.rebuild())
    }

    fn remove_consumer(&mut self, id: u32) -> Result<Impact> {
        let (_, ranges) = self.consumers.remove(&id).ok_or_else(|| unknown(id))?;
        for (start, _) in ranges {
            self.ranges.remove(&start);
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
        let mut ids: Vec<u32> = self.consumers.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    fn contains(&self, id: u32) -> bool {
        self.consumers.contains_key(&id)
    }

    fn len(&self) -> usize {
        self.consumers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    fn assign_message(r: Result<Impact>) -> String {
        match r {
            Err(CoreError::ConsumerAssign(m)) => m,
            other => panic!("expected ConsumerAssign, got {other:?}"),
        }
    }

    #[test]
    fn validation_messages_and_unchanged_state() {
        let mut sel = ExclusiveRangeSelector::new(65536).unwrap();
        sel.add_consumer(1, "alpha", &[(100, 199), (0, 9)]).unwrap();
        assert_eq!(sel.ranges_of(1), Some(&[(0, 9), (100, 199)][..]));
        let before = sel.assignments().to_vec();
        assert_eq!(
            assign_message(sel.add_consumer(2, "b", &[])),
            "Ranges for KeyShared policy must not be empty."
        );
        assert_eq!(
            assign_message(sel.add_consumer(2, "b", &[(300, 299)])),
            "Fixed hash range start > end for range: [300,299]"
        );
        assert_eq!(
            assign_message(sel.add_consumer(2, "b", &[(400, 500), (300, 400)])),
            "Consumer's own ranges conflict: [300,400] overlaps with [400,500]"
        );
        assert_eq!(
            assign_message(sel.add_consumer(2, "b", &[(300, 310), (150, 250)])),
            "Range conflict with consumer \"alpha\" (id 1): [150,250] overlaps its range [100,199]"
        );
        assert_eq!(
            assign_message(sel.add_consumer(2, "b", &[(5, 5)])),
            "Range conflict with consumer \"alpha\" (id 1): [5,5] overlaps its range [0,9]"
        );
        assert_eq!(
            assign_message(sel.add_consumer(2, "b", &[(50, 100)])),
            "Range conflict with consumer \"alpha\" (id 1): [50,100] overlaps its range [100,199]"
        );
        assert_eq!(sel.conflicting_consumer(&[(10, 99)]), None);
        assert_eq!(
            sel.conflicting_consumer(&[(10, 99), (199, 199)]),
            Some((1, (100, 199)))
        );
        assert!(matches!(
            sel.add_consumer(1, "again", &[(500, 600)]),
            Err(CoreError::InvalidArgument(_))
        ));
        assert!(matches!(
            sel.remove_consumer(2),
            Err(CoreError::UnknownConsumer(_))
        ));
        assert_eq!(sel.assignments(), &before[..]);
        assert_eq!(sel.len(), 1);
    }

    #[test]
    fn select_is_floor_then_contains_modulo_size() {
        let mut sel = ExclusiveRangeSelector::new(100).unwrap();
        sel.add_consumer(7, "", &[(10, 19), (90, 150)]).unwrap();
        sel.add_consumer(8, "", &[(20, 20)]).unwrap();
        assert_eq!(sel.select(15), Some(7));
        assert_eq!(sel.select(20), Some(8));
        assert_eq!(sel.select(21), None);
        assert_eq!(sel.select(115), Some(7)); // 115 % 100
        assert_eq!(sel.select(99), Some(7));
        assert_eq!(sel.select(5), None);
        assert_eq!(
            sel.consumer_key_hash_ranges(),
            vec![(7, vec![(10, 19), (90, 150)]), (8, vec![(20, 20)])]
        );
        check_consistent(&sel);
        let impact = sel.remove_consumer(7).unwrap();
        assert_eq!(impact.removed, vec![(7, vec![(10, 19), (90, 150)])]);
        assert!(impact.added.is_empty());
        assert_eq!(sel.select(15), None);
        let impact = sel.add_consumer(9, "", &[(0, 19)]).unwrap();
        assert!(impact.removed.is_empty());
        assert_eq!(impact.added, vec![(9, vec![(0, 19)])]);
        assert_eq!(
            sel.consumer_key_hash_ranges(),
            vec![(9, vec![(0, 19)]), (8, vec![(20, 20)])]
        );
        let mut one = ExclusiveRangeSelector::new(1).unwrap();
        one.add_consumer(1, "", &[(0, 0)]).unwrap();
        assert_eq!(one.select(u32::MAX), Some(1));
        assert!(ExclusiveRangeSelector::new(0).is_err());
        assert!(ExclusiveRangeSelector::new(MAX_SELECTOR_RANGE_SIZE + 1).is_err());
    }

    #[test]
    fn touching_ranges_of_one_consumer_merge_in_reports() {
        let mut sel = ExclusiveRangeSelector::new(65536).unwrap();
        sel.add_consumer(1, "", &[(0, 9), (10, 19), (30, 39)])
            .unwrap();
        assert_eq!(
            sel.consumer_key_hash_ranges(),
            vec![(1, vec![(0, 19), (30, 39)])]
        );
        // Ranges beyond range_size are kept and reported as given, never selected.
        sel.add_consumer(2, "", &[(65530, 70000)]).unwrap();
        assert_eq!(sel.select(65535), Some(2));
        assert_eq!(sel.select(65536), Some(1)); // 0
        check_consistent(&sel);
    }

    #[test]
    fn random_against_model() {
        let mut rng = Rng(15);
        for round in 0..60 {
            let size = 1 + rng.below(120) as u32;
            let mut sel = ExclusiveRangeSelector::new(size).unwrap();
            let mut model: Vec<(u32, Vec<HashRange>)> = Vec::new();
            for step in 0..50u32 {
                let before = sel.assignments().to_vec();
                if model.is_empty() || rng.below(3) > 0 {
                    let n = rng.below(4) as usize;
                    let ranges: Vec<HashRange> = (0..n)
                        .map(|_| {
                            let s = rng.below(140) as u32;
                            (
                                s,
                                s + rng.below(12) as u32 - rng.below(2) as u32 * (s > 0) as u32,
                            )
                        })
                        .collect();
                    let mut sorted = ranges.clone();
                    sorted.sort();
                    let valid = !ranges.is_empty()
                        && ranges.iter().all(|r| r.0 <= r.1)
                        && sorted.windows(2).all(|w| !overlap(w[0], w[1]))
                        && model.iter().all(|(_, held)| {
                            held.iter().all(|&h| ranges.iter().all(|&r| !overlap(h, r)))
                        });
                    let got = sel.add_consumer(step, "", &ranges);
                    assert_eq!(got.is_ok(), valid, "round {round} {ranges:?} {model:?}");
                    if valid {
                        model.push((step, sorted));
                        check_impact(&before, sel.assignments(), &got.unwrap(), 200);
                    } else {
                        assert_eq!(sel.assignments(), &before[..]);
                    }
                } else {
                    let (id, _) = model.remove(rng.below(model.len() as u64) as usize);
                    let impact = sel.remove_consumer(id).unwrap();
                    check_impact(&before, sel.assignments(), &impact, 200);
                }
                let mut want: Vec<Assignment> = model
                    .iter()
                    .flat_map(|(c, rs)| {
                        rs.iter().map(move |&(start, end)| Assignment {
                            start,
                            end,
                            consumer: *c,
                        })
                    })
                    .collect();
                want.sort_by_key(|a| a.start);
                assert_eq!(sel.assignments(), &want[..]);
                for h in 0..300 {
                    assert_eq!(sel.select(h), owner_of(&want, h % size), "slot {h}");
                }
                check_consistent(&sel);
            }
        }
    }
}
