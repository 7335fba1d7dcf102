//! Consistent hashing (Pulsar 4's `ConsistentHashingStickyKeyConsumerSelector`, the default).
//!
//! Each consumer puts `points_per_consumer` points on a ring of slots `1..=65535`. Point `i` of a
//! consumer is `slot_consistent(sticky_key_hash(name + "\0" + name_index + "\0" + i))`, where
//! `name_index` is the lowest index not used by another registered consumer of the same name
//! (freed on removal, so a quick rejoin gets the same points). A point already on the ring keeps
//! its owner; the newcomer queues behind it (FIFO) and takes the point over when the owner leaves.
//! A slot belongs to the first point at or after it, wrapping to the first point.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{
    check_new_id, no_ranges, unknown, Assignment, BeyondTable, HashRange, Impact, SlotTable,
    Snapshot, StickyKeySelector,
};
use crate::error::{CoreError, Result};
use crate::keyshared::hash::{slot_consistent, sticky_key_hash, DEFAULT_RANGE_SIZE};

/// Pulsar's `subscriptionKeySharedConsistentHashingReplicaPoints` default.
pub const DEFAULT_POINTS_PER_CONSUMER: u32 = 100;

/// The largest `points_per_consumer`: the ring has no more distinct points than this.
pub const MAX_POINTS_PER_CONSUMER: u32 = DEFAULT_RANGE_SIZE - 1;

/// The slots consistent hashing covers (`STICKY_KEY_HASH_NOT_SET + 1 ..= DEFAULT_RANGE_SIZE - 1`).
pub const CONSISTENT_HASHING_KEY_RANGE: HashRange = (1, DEFAULT_RANGE_SIZE - 1);

/// One point of the ring: its owner and the consumers whose points collided with it, in order.
#[derive(Clone, Debug)]
struct Point {
    selected: u32,
    colliding: Vec<u32>,
}

/// A registered consumer: its name, name index and the point of each index `i`.
#[derive(Clone, Debug)]
struct Member {
    name: String,
    name_index: u32,
    points: Vec<u32>,
}

/// Consumers placed on a hash ring by their names (Pulsar 4 point naming).
///
/// ```
/// use cursorkit_core::{ConsistentHashingSelector, StickyKeySelector};
/// let mut sel = ConsistentHashingSelector::new(100).unwrap();
/// sel.add_consumer(1, "consumer-a", &[]).unwrap();
/// let impact = sel.add_consumer(2, "consumer-b", &[]).unwrap();
/// assert_eq!(impact.removed.len(), 1); // only consumer 1 lost hashes
/// assert_eq!(sel.points(2).unwrap().len(), 100);
/// assert!(sel.select(12345).is_some());
/// ```
#[derive(Clone, Debug)]
pub struct ConsistentHashingSelector {
    points_per_consumer: u32,
    ring: BTreeMap<u32, Point>,
    members: HashMap<u32, Member>,
    /// Name -> the name indexes in use.
    name_indexes: HashMap<String, BTreeSet<u32>>,
    snapshot: Snapshot,
}

impl ConsistentHashingSelector {
    /// An empty ring; `points_per_consumer` must be in `1..=65535` (`InvalidArgument` otherwise).
    /// Pulsar's default is [`DEFAULT_POINTS_PER_CONSUMER`].
    pub fn new(points_per_consumer: u32) -> Result<Self> {
        if points_per_consumer == 0 || points_per_consumer > MAX_POINTS_PER_CONSUMER {
            return Err(CoreError::InvalidArgument(format!(
                "points_per_consumer must be in 1..={MAX_POINTS_PER_CONSUMER}, got {points_per_consumer}"
            )));
        }
        Ok(Self {
            points_per_consumer,
            ring: BTreeMap::new(),
            members: HashMap::new(),
            name_indexes: HashMap::new(),
            snapshot: Snapshot::new(DEFAULT_RANGE_SIZE, BeyondTable::Wrap),
        })
    }

    /// Points each consumer puts on the ring.
    pub fn points_per_consumer(&self) -> u32 {
        self.points_per_consumer
    }

    /// The ring point of index `i` for a consumer name and name index.
    pub fn point(name: &str, name_index: u32, i: u32) -> u32 {
        let key = format!("{name}\0{name_index}\0{i}");
        slot_consistent(sticky_key_hash(key.as_bytes()))
    }

    /// The points of consumer `id` by point index (owned or queued behind a collision), or None.
    pub fn points(&self, id: u32) -> Option<&[u32]> {
        self.members.get(&id).map(|m| &m.points[..])
    }

    /// The name index of consumer `id`, or None.
    pub fn name_index(&self, id: u32) -> Option<u32> {
        self.members.get(&id).map(|m| m.name_index)
    }

    /// How many ring points consumer `id` currently owns (0 when all of its points collided).
    pub fn owned_points(&self, id: u32) -> usize {
        self.ring.values().filter(|p| p.selected == id).count()
    }

    /// Whether consumer `id` owns at least one ring point (stops at the first).
    pub fn owns_points(&self, id: u32) -> bool {
        self.ring.values().any(|p| p.selected == id)
    }

    /// Number of distinct points on the ring.
    pub fn ring_len(&self) -> usize {
        self.ring.len()
    }

    /// The lowest name index no registered consumer of `name` uses.
    fn free_name_index(&self, name: &str) -> u32 {
        let used = self.name_indexes.get(name);
        (0..)
            .find(|i| used.is_none_or(|u| !u.contains(i)))
            .unwrap_or(0)
    }

    /// Point `p` owns `[previous point + 1, p]` (the first from 1); the tail after the last point
    /// wraps to the first point's owner; touching ranges of one owner are joined.
    fn rebuild(&mut self) -> Impact {
        let (lo, hi) = CONSISTENT_HASHING_KEY_RANGE;
        let mut list: Vec<Assignment> = Vec::new();
        let mut start = lo;
        let extend = |list: &mut Vec<Assignment>, start: u32, end: u32, consumer: u32| match list
            .last_mut()
        {
            Some(last) if last.consumer == consumer && last.end + 1 == start => last.end = end,
            _ => list.push(Assignment {
                start,
                end,
                consumer,
            }),
        };
        for (&p, point) in &self.ring {
            extend(&mut list, start, p, point.selected);
            start = p + 1;
        }
        if let Some(first) = self.ring.values().next() {
            if start <= hi {
                extend(&mut list, start, hi, first.selected);
            }
        }
        self.snapshot.replace(list)
    }
}

impl StickyKeySelector for ConsistentHashingSelector {
    fn add_consumer(&mut self, id: u32, name: &str, ranges: &[HashRange]) -> Result<Impact> {
        check_new_id(id, self.members.contains_key(&id))?;
        no_ranges("consistent-hashing", ranges)?;
        let name_index = self.free_name_index(name);
        let points: Vec<u32> = (0..self.points_per_consumer)
            .map(|i| Self::point(name, name_index, i))
            .collect();
        for &p in &points {
            self.ring
                .entry(p)
                .and_modify(|point| point.colliding.push(id))
                .or_insert(Point {
                    selected: id,
                    colliding: Vec::new(),
                });
        }
        self.name_indexes
            .entry(name.to_owned())
            .or_default()
            .insert(name_index);
        self.members.insert(
            id,
            Member {
                name: name.to_owned(),
                name_index,
                points,
            },
        );
        Ok(self.rebuild())
    }

    fn remove_consumer(&mut self, id: u32) -> Result<Impact> {
        let member = self.members.remove(&id).ok_or_else(|| unknown(id))?;
        for p in &member.points {
            let Some(point) = self.ring.get_mut(p) else {
                continue; // unreachable: every point of a member is on the ring
            };
            if point.selected == id {
                if point.colliding.is_empty() {
                    self.ring.remove(p);
                } else {
                    point.selected = point.colliding.remove(0);
                }
            } else {
                point.colliding.retain(|&c| c != id);
            }
        }
        if let Some(used) = self.name_indexes.get_mut(&member.name) {
            used.remove(&member.name_index);
            if used.is_empty() {
                self.name_indexes.remove(&member.name);
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
        CONSISTENT_HASHING_KEY_RANGE
    }

    fn consumer_ids(&self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.members.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    fn contains(&self, id: u32) -> bool {
        self.members.contains_key(&id)
    }

    fn len(&self) -> usize {
        self.members.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    #[test]
    fn points_follow_pulsar_4_naming() {
        // "name\0index\0i": the separator keeps "consumer1"+"10" apart from "consumer11"+"0" (#22050).
        let p = ConsistentHashingSelector::point("consumer1", 0, 10);
        let h = sticky_key_hash(b"consumer1\x000\x0010");
        assert_eq!(p, h % 65535 + 1);
        assert_ne!(
            ConsistentHashingSelector::point("consumer1", 0, 10),
            ConsistentHashingSelector::point("consumer11", 0, 0)
        );
        let mut sel = ConsistentHashingSelector::new(5).unwrap();
        sel.add_consumer(3, "c", &[]).unwrap();
        let want: Vec<u32> = (0..5)
            .map(|i| ConsistentHashingSelector::point("c", 0, i))
            .collect();
        assert_eq!(sel.points(3), Some(&want[..]));
        check_consistent(&sel);
    }

    #[test]
    fn same_name_consumers_get_distinct_indexes_reused_after_leaving() {
        let mut sel = ConsistentHashingSelector::new(10).unwrap();
        for id in 0..3 {
            sel.add_consumer(id, "same", &[]).unwrap();
        }
        assert_eq!(
            (0..3)
                .map(|i| sel.name_index(i).unwrap())
                .collect::<Vec<_>>(),
            [0, 1, 2]
        );
        let before = sel.assignments().to_vec();
        let points = sel.points(1).unwrap().to_vec();
        sel.remove_consumer(1).unwrap();
        sel.add_consumer(7, "same", &[]).unwrap();
        assert_eq!(sel.name_index(7), Some(1));
        assert_eq!(sel.points(7).unwrap(), &points[..]);
        // A quick rejoin restores the same ring, with the new id in the old one's place.
        let renamed: Vec<Assignment> = before
            .iter()
            .map(|a| Assignment {
                consumer: if a.consumer == 1 { 7 } else { a.consumer },
                ..*a
            })
            .collect();
        assert_eq!(sel.assignments(), &renamed[..]);
        sel.add_consumer(8, "other", &[]).unwrap();
        assert_eq!(sel.name_index(8), Some(0));
    }

    #[test]
    fn a_single_point_owns_the_whole_ring() {
        let mut sel = ConsistentHashingSelector::new(1).unwrap();
        sel.add_consumer(1, "n", &[]).unwrap();
        assert_eq!(sel.owned_points(1), 1);
        assert_eq!(sel.ring_len(), 1);
        assert_eq!(sel.consumer_key_hash_ranges(), vec![(1, vec![(1, 65535)])]);
        assert_eq!(sel.select(0), Some(1));
        check_consistent(&sel);
    }

    /// `k` names whose point 0 at name index 0 is the same slot (found by search over "n0", "n1", ...).
    fn colliding_names(k: usize) -> Vec<String> {
        let mut seen: HashMap<u32, Vec<String>> = HashMap::new();
        for i in 0.. {
            let name = format!("n{i}");
            let names = seen
                .entry(ConsistentHashingSelector::point(&name, 0, 0))
                .or_default();
            names.push(name);
            if names.len() == k {
                return names.clone();
            }
        }
        unreachable!()
    }

    #[test]
    fn all_points_colliding_gets_nothing_until_the_owner_leaves() {
        let names = colliding_names(2);
        let mut sel = ConsistentHashingSelector::new(1).unwrap();
        sel.add_consumer(1, &names[0], &[]).unwrap();
        let impact = sel.add_consumer(2, &names[1], &[]).unwrap();
        assert!(impact.is_empty());
        assert_eq!(sel.owned_points(2), 0);
        assert_eq!(sel.consumer_key_hash_ranges(), vec![(1, vec![(1, 65535)])]);
        sel.add_consumer(3, &names[1], &[]).unwrap(); // name index 1: elsewhere on the ring
        let before = sel.assignments().to_vec();
        let impact = sel.remove_consumer(1).unwrap();
        // Consumer 2, first in the queue, takes the point over.
        assert_eq!(sel.owned_points(2), 1);
        assert_eq!(
            impact.removed.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
            [1]
        );
        assert_eq!(impact.impacted(), [1, 2]); // 3 keeps its arc
        check_impact(&before, sel.assignments(), &impact, 65535);
        check_consistent(&sel);
    }

    #[test]
    fn collisions_queue_fifo() {
        let names = colliding_names(4);
        let p = ConsistentHashingSelector::point(&names[0], 0, 0);
        let mut sel = ConsistentHashingSelector::new(1).unwrap();
        for (id, name) in (1..).zip(&names[..3]) {
            sel.add_consumer(id, name, &[]).unwrap();
        }
        assert_eq!(sel.ring_len(), 1);
        assert_eq!(sel.select(p), Some(1));
        sel.remove_consumer(2).unwrap(); // leaves the queue: [3]
        sel.add_consumer(4, &names[3], &[]).unwrap(); // queue: [3, 4]
        sel.remove_consumer(1).unwrap();
        assert_eq!(sel.select(p), Some(3));
        assert_eq!(sel.consumer_key_hash_ranges(), vec![(3, vec![(1, 65535)])]);
        let impact = sel.remove_consumer(3).unwrap();
        assert_eq!(impact.removed, vec![(3, vec![(1, 65535)])]);
        assert_eq!(impact.added, vec![(4, vec![(1, 65535)])]);
        sel.remove_consumer(4).unwrap();
        assert_eq!(sel.ring_len(), 0);
        assert_eq!(sel.select(p), None);
    }

    #[test]
    fn a_consumers_own_points_may_collide() {
        // With many points one consumer hits its own points; removal must still clear the ring.
        let mut sel = ConsistentHashingSelector::new(MAX_POINTS_PER_CONSUMER).unwrap();
        sel.add_consumer(1, "self", &[]).unwrap();
        assert!(sel.ring_len() < MAX_POINTS_PER_CONSUMER as usize);
        sel.add_consumer(2, "other", &[]).unwrap();
        check_consistent(&sel);
        sel.remove_consumer(1).unwrap();
        assert_eq!(sel.owned_points(2), sel.ring_len());
        sel.remove_consumer(2).unwrap();
        assert_eq!(sel.ring_len(), 0);
    }

    #[test]
    fn select_wraps_and_tail_goes_to_first_owner() {
        let mut sel = ConsistentHashingSelector::new(3).unwrap();
        sel.add_consumer(1, "x", &[]).unwrap();
        sel.add_consumer(2, "y", &[]).unwrap();
        let first = *sel.ring.keys().next().unwrap();
        let last = *sel.ring.keys().next_back().unwrap();
        let first_owner = sel.ring[&first].selected;
        assert_eq!(sel.select(0), Some(first_owner));
        assert_eq!(sel.select(first), Some(first_owner));
        if last < 65535 {
            assert_eq!(sel.select(last + 1), Some(first_owner));
            assert_eq!(sel.select(65535), Some(first_owner));
        }
        assert_eq!(sel.select(1 << 30), Some(first_owner));
        check_consistent(&sel);
        let a = sel.assignments();
        assert_eq!(a.first().unwrap().start, 1);
        assert_eq!(a.last().unwrap().end, 65535);
    }

    #[test]
    fn errors_keep_state() {
        assert!(ConsistentHashingSelector::new(0).is_err());
        assert!(ConsistentHashingSelector::new(65536).is_err());
        let mut sel = ConsistentHashingSelector::new(DEFAULT_POINTS_PER_CONSUMER).unwrap();
        sel.add_consumer(1, "a", &[]).unwrap();
        let before = sel.assignments().to_vec();
        assert!(matches!(
            sel.add_consumer(1, "b", &[]),
            Err(CoreError::InvalidArgument(_))
        ));
        assert!(matches!(
            sel.add_consumer(2, "b", &[(0, 5)]),
            Err(CoreError::InvalidArgument(_))
        ));
        assert!(matches!(
            sel.remove_consumer(2),
            Err(CoreError::UnknownConsumer(_))
        ));
        assert_eq!(sel.assignments(), &before[..]);
        assert_eq!(sel.consumer_ids(), vec![1]);
        let impact = sel.remove_consumer(1).unwrap();
        assert_eq!(impact.removed, vec![(1, vec![(1, 65535)])]);
        assert_eq!(sel.select(5), None);
        assert!(sel.name_indexes.is_empty());
    }

    /// Pulsar's ring as a model: BTreeMap point -> [owner, queued...] in insertion order.
    #[test]
    fn random_against_model() {
        let mut rng = Rng(6791);
        for round in 0..12 {
            let n = 1 + rng.below(40) as u32;
            let names = ["a", "b", "consumer1", "consumer11", ""];
            let mut sel = ConsistentHashingSelector::new(n).unwrap();
            let mut ring: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            let mut live: Vec<(u32, String, u32)> = Vec::new(); // (id, name, name index)
            for step in 0..40u32 {
                let before = sel.assignments().to_vec();
                let impact = if live.is_empty() || rng.below(3) > 0 {
                    let name = names[rng.below(names.len() as u64) as usize].to_owned();
                    let index = (0..)
                        .find(|i| !live.iter().any(|(_, n, x)| *n == name && x == i))
                        .unwrap();
                    for i in 0..n {
                        let p = ConsistentHashingSelector::point(&name, index, i);
                        ring.entry(p).or_default().push(step);
                    }
                    live.push((step, name.clone(), index));
                    sel.add_consumer(step, &name, &[]).unwrap()
                } else {
                    let (id, name, index) = live.remove(rng.below(live.len() as u64) as usize);
                    for i in 0..n {
                        let p = ConsistentHashingSelector::point(&name, index, i);
                        let q = ring.get_mut(&p).unwrap();
                        if q[0] == id {
                            q.remove(0);
                        } else {
                            q.retain(|&c| c != id);
                        }
                        if q.is_empty() {
                            ring.remove(&p);
                        }
                    }
                    sel.remove_consumer(id).unwrap()
                };
                check_impact(&before, sel.assignments(), &impact, 65535);
                let first = ring.values().next().map(|q| q[0]);
                for h in (0..70000).step_by(97).chain([0, 1, 65535]) {
                    let want = ring.range(h..).next().map(|(_, q)| q[0]).or(first);
                    assert_eq!(sel.select(h), want, "round {round} slot {h}");
                }
                for (&p, q) in &ring {
                    assert_eq!(sel.select(p), Some(q[0]));
                }
            }
            check_consistent(&sel);
        }
    }
}
