//! One calendar bucket of a delay queue (4.096 s of delivery times) and the packed index it holds:
//! flat while its indexes are spread, grouped by `(deliver_at, ledger)` pair when they cluster.

use std::mem::size_of;

/// Low bits of `deliver_at` kept inside an index; the rest is the bucket key (4.096 s buckets).
pub(super) const BUCKET_BITS: u32 = 12;
pub(super) const DELTA_MASK: i64 = (1 << BUCKET_BITS) - 1;
/// Bits of the ledger slot inside an index.
pub(super) const SLOT_BITS: u32 = 20;
pub(super) const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// Smallest bucket checked for clustering; checks happen as a flat bucket's length reaches
/// each power of two from here (so they cost O(1) amortised an index).
pub(super) const CLUSTER_MIN_LEN: usize = 256;
/// A bucket is clustered when it holds at least this many indexes per (deliver_at, ledger) pair.
pub(super) const CLUSTER_FACTOR: usize = 8;

#[inline]
pub(super) fn pack(delta: u64, slot: u32, entry: u32) -> u64 {
    (delta << (64 - BUCKET_BITS)) | (u64::from(slot) << 32) | u64::from(entry)
}

#[inline]
pub(super) fn delta_of(item: u64) -> i64 {
    (item >> (64 - BUCKET_BITS)) as i64
}

#[inline]
pub(super) fn slot_of(item: u64) -> usize {
    ((item >> 32) & SLOT_MASK) as usize
}

#[inline]
pub(super) fn entry_of(item: u64) -> u32 {
    item as u32
}

/// The `(delta, slot)` pair of an index: the unit of grouping.
#[inline]
pub(super) fn group_of(item: u64) -> u32 {
    (item >> 32) as u32
}

#[inline]
pub(super) fn with_slot(item: u64, slot: u32) -> u64 {
    (item & !(SLOT_MASK << 32)) | (u64::from(slot) << 32)
}

/// A bucket's clustered indexes: `groups` holds `(delta << 20 | slot) << 32 | end`, where `end`
/// is one past the group's last entry in `entries`. Group keys are distinct; neither the groups
/// nor the entries of a group are in any order (a bucket is sorted when it becomes the head).
#[derive(Debug, Clone, Default)]
pub(super) struct Grouped {
    pub(super) groups: Vec<u64>,
    pub(super) entries: Vec<u32>,
}

impl Grouped {
    /// The indexes of `old` plus `items`, grouped by counting (no sort), or `None` as soon as they
    /// take more than `cap` groups.
    pub(super) fn regroup(old: Option<&Grouped>, items: &[u64], cap: usize) -> Option<Self> {
        let mut table = GroupTable::new(cap);
        let mut counts: Vec<u32> = Vec::new();
        if let Some(g) = old {
            let mut start = 0;
            for &w in &g.groups {
                let end = w as u32;
                table.id((w >> 32) as u32);
                counts.push(end - start);
                start = end;
            }
        }
        let mut ids = Vec::with_capacity(items.len());
        for &item in items {
            let id = table.id(group_of(item)) as usize;
            if id == counts.len() {
                if id == cap {
                    return None;
                }
                counts.push(0);
            }
            counts[id] += 1;
            ids.push(id as u32);
        }
        // Start offsets, then fill: old groups by copy, new items by scatter.
        let mut pos = Vec::with_capacity(counts.len());
        let mut total = 0u32;
        for &c in &counts {
            pos.push(total);
            total += c;
        }
        let mut entries = vec![0u32; total as usize];
        if let Some(g) = old {
            let mut start = 0;
            for (id, &w) in g.groups.iter().enumerate() {
                let end = (w as u32) as usize;
                let at = pos[id] as usize;
                entries[at..at + end - start].copy_from_slice(&g.entries[start..end]);
                pos[id] += (end - start) as u32;
                start = end;
            }
        }
        for (&item, &id) in items.iter().zip(&ids) {
            let slot = &mut pos[id as usize];
            entries[*slot as usize] = entry_of(item);
            *slot += 1;
        }
        let groups = table
            .keys
            .iter()
            .zip(&pos)
            .map(|(&key, &end)| (u64::from(key) << 32) | u64::from(end))
            .collect();
        Some(Self { groups, entries })
    }

    /// Calls `f` with every index, in no particular order.
    pub(super) fn for_each(&self, mut f: impl FnMut(u64)) {
        let mut start = 0;
        for &g in &self.groups {
            let (key, end) = (g >> 32, (g as u32) as usize);
            for &e in &self.entries[start..end] {
                f((key << 32) | u64::from(e));
            }
            start = end;
        }
    }

    /// Keeps the groups whose slot passes `keep`; false when nothing is left.
    pub(super) fn retain_slots(&mut self, keep: impl Fn(usize) -> bool) -> bool {
        let mut groups = Vec::new();
        let mut entries = Vec::new();
        let mut start = 0;
        for &g in &self.groups {
            let end = (g as u32) as usize;
            if keep(((g >> 32) & SLOT_MASK) as usize) {
                entries.extend_from_slice(&self.entries[start..end]);
                groups.push(((g >> 32) << 32) | entries.len() as u64);
            }
            start = end;
        }
        groups.shrink_to_fit();
        entries.shrink_to_fit();
        self.groups = groups;
        self.entries = entries;
        !self.entries.is_empty()
    }

    pub(super) fn memory_usage(&self) -> usize {
        size_of::<Self>() + self.groups.capacity() * 8 + self.entries.capacity() * 4
    }
}

/// The indexes of one 4.096 s window.
#[derive(Debug, Clone, Default)]
pub(super) struct Bucket {
    /// Flat indexes; for a grouped bucket, the adds since it was grouped.
    pub(super) items: Vec<u64>,
    /// `items` are sorted descending by `(delta, ledger id, entry)` (the head bucket).
    pub(super) sorted: bool,
    pub(super) grouped: Option<Box<Grouped>>,
}

impl Bucket {
    pub(super) fn len(&self) -> usize {
        self.items.len() + self.grouped.as_ref().map_or(0, |g| g.entries.len())
    }

    pub(super) fn memory_usage(&self) -> usize {
        self.items.capacity() * 8 + self.grouped.as_ref().map_or(0, |g| g.memory_usage())
    }

    /// Every index as a flat vector (grouped ones expanded), unsorted.
    pub(super) fn take_all(&mut self) -> Vec<u64> {
        let mut all = std::mem::take(&mut self.items);
        if let Some(g) = self.grouped.take() {
            all.reserve_exact(g.entries.len());
            g.for_each(|item| all.push(item));
        }
        self.sorted = false;
        all
    }
}

/// Distinct group keys → dense ids, by open addressing sized for at most `cap + 1` keys.
pub(super) struct GroupTable {
    /// `key << 32 | id + 1`; 0 marks a free cell.
    cells: Vec<u64>,
    shift: u32,
    keys: Vec<u32>,
}

impl GroupTable {
    pub(super) fn new(cap: usize) -> Self {
        let size = ((cap + 1) * 2).next_power_of_two().max(16);
        Self {
            cells: vec![0; size],
            shift: 64 - size.trailing_zeros(),
            keys: Vec::new(),
        }
    }

    /// The id of `key`, given the next id when it is new.
    #[inline]
    pub(super) fn id(&mut self, key: u32) -> u32 {
        let mask = self.cells.len() - 1;
        let mut i =
            ((u64::from(key) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
        loop {
            let cell = self.cells[i];
            if cell == 0 {
                let id = self.keys.len() as u32;
                self.keys.push(key);
                self.cells[i] = (u64::from(key) << 32) | u64::from(id + 1);
                return id;
            }
            if (cell >> 32) as u32 == key {
                return (cell as u32) - 1;
            }
            i = (i + 1) & mask;
        }
    }
}

/// Converts a flat bucket to the grouped form when it is clustered.
pub(super) fn maybe_group(bucket: &mut Bucket) {
    let cap = bucket.items.len() / CLUSTER_FACTOR;
    if let Some(g) = Grouped::regroup(None, &bucket.items, cap) {
        bucket.items = Vec::new();
        bucket.grouped = Some(Box::new(g));
    }
}

/// Folds a grouped bucket's pending adds into its groups (or flattens it when no longer clustered).
pub(super) fn merge_pending(bucket: &mut Bucket) {
    let old = bucket.grouped.take().expect("a grouped bucket");
    let cap = (old.entries.len() + bucket.items.len()) / CLUSTER_FACTOR;
    match Grouped::regroup(Some(&old), &bucket.items, cap) {
        Some(g) => {
            bucket.grouped = Some(Box::new(g));
            bucket.items = Vec::new();
        }
        None => {
            bucket.items.reserve_exact(old.entries.len());
            old.for_each(|item| bucket.items.push(item));
        }
    }
}
