//! Consistent hashing (Pulsar 4's `ConsistentHashingStickyKeyConsumerSelector`, the default).
//!
//! Each consumer puts `points_per_consumer` points on a ring of slots `1..=65535`. Point `i` of a
//! consumer is `slot_consistent(sticky_key_hash(name + "\0" + name_index + "\0" + i))`, where
//! `name_index` is the lowest index not used by another registered consumer of the same name
//! (freed on removal, so a quick rejoin gets the same points). A point already on the ring keeps
//! its owner; the newcomer queues behind it (FIFO) and takes the point over when the owner leaves.
//! A slot belongs to the first point at or after it, wrapping to the first point.
//!
//! A join or leave touches only the arcs of the consumer's own points: the slot table and the
//! [`Impact`] are updated arc by arc, each point's neighbours found in a two-level bitset of the
//! ring's slots, and the assignment list is rebuilt from the ring only when someone reads it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

use crate::mem::FastMap;

use super::{
    check_new_id, no_ranges, push_merged, unknown, Assignment, BeyondTable, HashRange, Impact,
    SlotTable, StickyKeySelector, NO_OWNER,
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

/// Words of the ring's occupancy bitset: one bit per slot `0..65536`.
const WORDS: usize = (DEFAULT_RANGE_SIZE as usize) / 64;

/// The ring's points by slot, with a bitset of the occupied slots (and a summary bit per word) so
/// that a point's neighbours are a few word scans away, whatever the ring's size.
#[derive(Clone, Debug)]
struct Ring {
    points: FastMap<u32, Point>,
    occupied: Box<[u64]>,
    /// Bit `w`: word `w` of `occupied` is not zero.
    summary: Box<[u64]>,
}

impl Ring {
    fn new() -> Self {
        Self {
            points: FastMap::default(),
            occupied: vec![0; WORDS].into_boxed_slice(),
            summary: vec![0; WORDS / 64].into_boxed_slice(),
        }
    }

    fn len(&self) -> usize {
        self.points.len()
    }

    fn get(&self, p: u32) -> Option<&Point> {
        self.points.get(&p)
    }

    fn get_mut(&mut self, p: u32) -> Option<&mut Point> {
        self.points.get_mut(&p)
    }

    /// Puts a new point at slot `p` (`p` < 65536, not on the ring).
    fn insert(&mut self, p: u32, point: Point) {
        let w = p as usize / 64;
        self.occupied[w] |= 1 << (p % 64);
        self.summary[w / 64] |= 1 << (w % 64);
        self.points.insert(p, point);
    }

    fn remove(&mut self, p: u32) {
        let w = p as usize / 64;
        self.occupied[w] &= !(1 << (p % 64));
        if self.occupied[w] == 0 {
            self.summary[w / 64] &= !(1 << (w % 64));
        }
        self.points.remove(&p);
    }

    /// The last point before slot `p`.
    fn before(&self, p: u32) -> Option<u32> {
        let q = p.checked_sub(1)?.min(DEFAULT_RANGE_SIZE - 1) as usize; // the last slot to look at
        let (w, b) = (q / 64, q % 64);
        let bits = self.occupied[w] & (u64::MAX >> (63 - b));
        if bits != 0 {
            return Some((w * 64 + 63 - bits.leading_zeros() as usize) as u32);
        }
        let (sw, sb) = (w / 64, w % 64);
        let below = self.summary[sw] & ((1u64 << sb) - 1);
        let word = if below != 0 {
            sw * 64 + 63 - below.leading_zeros() as usize
        } else {
            let i = (0..sw).rev().find(|&i| self.summary[i] != 0)?;
            i * 64 + 63 - self.summary[i].leading_zeros() as usize
        };
        Some((word * 64 + 63 - self.occupied[word].leading_zeros() as usize) as u32)
    }

    /// The first point at or after slot `p`.
    fn at_or_after(&self, p: u32) -> Option<u32> {
        let q = p as usize;
        if q >= WORDS * 64 {
            return None;
        }
        let (w, b) = (q / 64, q % 64);
        let bits = self.occupied[w] & (u64::MAX << b);
        if bits != 0 {
            return Some((w * 64 + bits.trailing_zeros() as usize) as u32);
        }
        let (sw, sb) = (w / 64, w % 64);
        let above = if sb == 63 {
            0
        } else {
            self.summary[sw] & (u64::MAX << (sb + 1))
        };
        let word = if above != 0 {
            sw * 64 + above.trailing_zeros() as usize
        } else {
            let i = (sw + 1..WORDS / 64).find(|&i| self.summary[i] != 0)?;
            i * 64 + self.summary[i].trailing_zeros() as usize
        };
        Some((word * 64 + self.occupied[word].trailing_zeros() as usize) as u32)
    }

    fn first(&self) -> Option<u32> {
        self.at_or_after(0)
    }

    fn last(&self) -> Option<u32> {
        self.before(DEFAULT_RANGE_SIZE)
    }

    /// The points in slot order.
    fn iter(&self) -> impl Iterator<Item = (u32, &Point)> + '_ {
        std::iter::successors(self.first(), |&p| self.at_or_after(p + 1))
            .map(|p| (p, &self.points[&p]))
    }
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
    ring: Ring,
    members: HashMap<u32, Member>,
    /// Name -> the name indexes in use.
    name_indexes: HashMap<String, BTreeSet<u32>>,
    /// The owner of every slot, kept in step with the ring.
    table: SlotTable,
    /// The assignment list, built from the ring on first read after a change.
    assignments: OnceLock<Vec<Assignment>>,
}

/// Slot ranges that changed owner during one join or leave, by previous and by new owner.
#[derive(Default)]
struct Moves {
    removed: BTreeMap<u32, Vec<HashRange>>,
    added: BTreeMap<u32, Vec<HashRange>>,
}

impl Moves {
    /// The exact impact: each owner's ranges sorted and merged where they touch.
    fn into_impact(self) -> Impact {
        let merged = |ranges: Vec<HashRange>| {
            let mut ranges = ranges;
            ranges.sort_unstable();
            let mut out: Vec<HashRange> = Vec::with_capacity(ranges.len());
            for (start, end) in ranges {
                push_merged(&mut out, start, end);
            }
            out
        };
        Impact {
            removed: self
                .removed
                .into_iter()
                .map(|(c, r)| (c, merged(r)))
                .collect(),
            added: self
                .added
                .into_iter()
                .map(|(c, r)| (c, merged(r)))
                .collect(),
        }
    }
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
            ring: Ring::new(),
            members: HashMap::new(),
            name_indexes: HashMap::new(),
            table: SlotTable::new(DEFAULT_RANGE_SIZE, BeyondTable::Wrap),
            assignments: OnceLock::new(),
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
        self.ring
            .points
            .values()
            .filter(|p| p.selected == id)
            .count()
    }

    /// Whether consumer `id` owns at least one ring point (looks at its own points only).
    pub fn owns_points(&self, id: u32) -> bool {
        self.members.get(&id).is_some_and(|m| {
            m.points
                .iter()
                .any(|&p| self.ring.get(p).is_some_and(|point| point.selected == id))
        })
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
    fn build_assignments(&self) -> Vec<Assignment> {
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
        for (p, point) in self.ring.iter() {
            extend(&mut list, start, p, point.selected);
            start = p + 1;
        }
        if let Some(first) = self.ring.iter().next().map(|(_, point)| point) {
            if start <= hi {
                extend(&mut list, start, hi, first.selected);
            }
        }
        list
    }

    /// The slots of point `p`'s arc on the current ring: `[previous point + 1, p]`, or for the first
    /// point `[1, p]` plus the tail after the last point.
    fn arc(&self, p: u32) -> [Option<HashRange>; 2] {
        let (lo, hi) = CONSISTENT_HASHING_KEY_RANGE;
        match self.ring.before(p) {
            Some(q) => [Some((q + 1, p)), None],
            None => {
                let last = self.ring.last().map_or(p, |l| l.max(p));
                [Some((lo, p)), (last < hi).then(|| (last + 1, hi))]
            }
        }
    }

    /// Gives the slots of `arc` to `owner` (`NO_OWNER`: nobody) in the table, noting what moved.
    /// Every slot of an arc has one owner before the move (the ring's invariant).
    fn move_arc(&mut self, arc: [Option<HashRange>; 2], owner: u32, moves: &mut Moves) {
        for (start, end) in arc.into_iter().flatten() {
            let was = self.table.owners[start as usize];
            if was == owner {
                continue;
            }
            if was != NO_OWNER {
                moves.removed.entry(was).or_default().push((start, end));
            }
            if owner != NO_OWNER {
                moves.added.entry(owner).or_default().push((start, end));
            }
            self.table.owners[start as usize..=end as usize].fill(owner);
        }
    }

    /// Ends a join or leave: slot 0 (below the first point) wraps to the first point's owner, the
    /// assignment list is rebuilt on its next read, and the impact is returned. Under `cfg(test)`
    /// the table and impact are checked against a full rebuild and diff from `before`.
    fn finish(&mut self, moves: Moves, #[allow(unused)] before: &[Assignment]) -> Impact {
        self.table.owners[0] = self.owner_at_or_after(0);
        self.assignments = OnceLock::new();
        let impact = moves.into_impact();
        #[cfg(test)]
        {
            let after = self.assignments().to_vec();
            let mut full = self.table.clone();
            full.rebuild(&after);
            assert!(
                full == self.table,
                "incremental slot table differs from a rebuild"
            );
            assert_eq!(
                impact,
                super::diff(before, &after),
                "incremental impact differs"
            );
        }
        impact
    }

    /// The owner of the first point at or after slot `p`, wrapping to the first point; `NO_OWNER`
    /// on an empty ring.
    fn owner_at_or_after(&self, p: u32) -> u32 {
        self.ring
            .at_or_after(p)
            .or_else(|| self.ring.first())
            .and_then(|q| self.ring.get(q))
            .map_or(NO_OWNER, |q| q.selected)
    }

    /// The assignment list before a change, kept for the checks of `finish` in tests only.
    fn before(&self) -> Vec<Assignment> {
        if cfg!(test) {
            self.assignments().to_vec()
        } else {
            Vec::new()
        }
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
        let before = self.before();
        let mut moves = Moves::default();
        for &p in &points {
            if let Some(point) = self.ring.get_mut(p) {
                point.colliding.push(id); // queued behind the owner: nothing moves
                continue;
            }
            self.ring.insert(
                p,
                Point {
                    selected: id,
                    colliding: Vec::new(),
                },
            );
            let arc = self.arc(p);
            self.move_arc(arc, id, &mut moves);
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
        Ok(self.finish(moves, &before))
    }

    fn remove_consumer(&mut self, id: u32) -> Result<Impact> {
        let member = self.members.remove(&id).ok_or_else(|| unknown(id))?;
        let before = self.before();
        let mut moves = Moves::default();
        for &p in &member.points {
            let Some(point) = self.ring.get_mut(p) else {
                continue; // unreachable: every point of a member is on the ring
            };
            if point.selected != id {
                point.colliding.retain(|&c| c != id);
            } else if !point.colliding.is_empty() {
                // The first consumer queued behind the point takes it over, arc and all.
                let next = point.colliding.remove(0);
                point.selected = next;
                let arc = self.arc(p);
                self.move_arc(arc, next, &mut moves);
            } else {
                // The point goes; its arc joins the next point's (wrapping to the first).
                let arc = self.arc(p);
                self.ring.remove(p);
                let heir = self.owner_at_or_after(p);
                self.move_arc(arc, heir, &mut moves);
            }
        }
        if let Some(used) = self.name_indexes.get_mut(&member.name) {
            used.remove(&member.name_index);
            if used.is_empty() {
                self.name_indexes.remove(&member.name);
            }
        }
        Ok(self.finish(moves, &before))
    }

    fn assignments(&self) -> &[Assignment] {
        self.assignments.get_or_init(|| self.build_assignments())
    }

    fn table(&self) -> &SlotTable {
        &self.table
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
        let first = sel.ring.first().unwrap();
        let last = sel.ring.last().unwrap();
        let first_owner = sel.ring.get(first).unwrap().selected;
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

    /// The ring's neighbour queries against a sorted set, from empty through sparse to dense.
    #[test]
    fn ring_neighbours_match_a_sorted_set() {
        let mut rng = Rng(77);
        let mut ring = Ring::new();
        let mut model: BTreeSet<u32> = BTreeSet::new();
        let point = |id| Point {
            selected: id,
            colliding: Vec::new(),
        };
        for step in 0..6000u32 {
            let p = match step % 3 {
                0 => rng.below(65536) as u32,
                1 => [0, 1, 63, 64, 4095, 4096, 65471, 65472, 65535][rng.below(9) as usize],
                _ => (rng.below(40) * 64 + rng.below(3)) as u32,
            };
            let grow = (step / 1500) % 2 == 0;
            if model.contains(&p) {
                if !grow || rng.below(4) == 0 {
                    ring.remove(p);
                    model.remove(&p);
                }
            } else if grow || rng.below(4) == 0 {
                ring.insert(p, point(step));
                model.insert(p);
            }
            for q in [p, p + 1, rng.below(65537) as u32, 0, 65535, 65536] {
                assert_eq!(
                    ring.before(q),
                    model.range(..q).next_back().copied(),
                    "before {q}"
                );
                assert_eq!(
                    ring.at_or_after(q),
                    model.range(q..).next().copied(),
                    "after {q}"
                );
            }
            assert_eq!(ring.first(), model.first().copied());
            assert_eq!(ring.last(), model.last().copied());
            assert_eq!(ring.len(), model.len());
            if step % 500 == 0 {
                assert!(ring.iter().map(|(p, _)| p).eq(model.iter().copied()));
            }
        }
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
