//! `BatchAcks`: the still-unacknowledged message indexes of one batch entry (Pulsar's ack set).
//!
//! A set bit means the index is still UNacked, as in Pulsar's `batchDeletedIndexes`, so the words
//! are exactly what `BatchedEntryDeletionIndexInfo.deleteSet` carries.

use crate::error::{CoreError, Result};

/// Largest batch a cursor accepts (Pulsar's clients cap batches far lower; this bounds memory).
pub const MAX_BATCH_SIZE: u32 = 1 << 20;

/// The unacked indexes of one partially acknowledged batch entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchAcks {
    /// Number of messages in the batch; 0 when unknown (decoded from Pulsar's words, which omit it).
    size: u32,
    /// Bit `i` of word `i / 64` set = index `i` not yet acknowledged.
    words: Vec<u64>,
    unacked: u32,
}

impl BatchAcks {
    /// A batch of `size` messages with none acknowledged.
    pub fn new(size: u32) -> Result<Self> {
        check_size(size)?;
        let mut words = vec![u64::MAX; size.div_ceil(64) as usize];
        if !size.is_multiple_of(64) {
            *words.last_mut().expect("size > 0") = (1u64 << (size % 64)) - 1;
        }
        Ok(Self {
            size,
            words,
            unacked: size,
        })
    }

    /// Rebuilds from unacked-index words; `size` 0 means unknown (Pulsar's encodings omit it).
    pub fn from_words(size: u32, words: &[u64]) -> Result<Self> {
        if size != 0 {
            check_size(size)?;
        }
        let mut words = words.to_vec();
        while words.last() == Some(&0) {
            words.pop();
        }
        let high_bit = words.last().map_or(0, |w| {
            (words.len() as u64 - 1) * 64 + 63 - u64::from(w.leading_zeros())
        });
        if words.len() as u64 * 64 > u64::from(MAX_BATCH_SIZE) + 63
            || (size != 0 && !words.is_empty() && high_bit >= u64::from(size))
        {
            return Err(CoreError::Corrupt(format!(
                "batch bitset marks index {high_bit} unacked in a batch of {size} messages"
            )));
        }
        let unacked = words.iter().map(|w| w.count_ones()).sum();
        Ok(Self {
            size,
            words,
            unacked,
        })
    }

    /// Number of messages in the batch (0 when unknown).
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Number of indexes still unacknowledged.
    pub fn unacked(&self) -> u32 {
        self.unacked
    }

    /// The unacked-index words, trailing zero words trimmed (Java's `BitSet.toLongArray`).
    pub fn words(&self) -> &[u64] {
        let n = self
            .words
            .iter()
            .rposition(|&w| w != 0)
            .map_or(0, |i| i + 1);
        &self.words[..n]
    }

    /// Whether `index` is still unacknowledged.
    pub fn is_unacked(&self, index: u32) -> bool {
        self.words
            .get((index / 64) as usize)
            .is_some_and(|w| w & (1 << (index % 64)) != 0)
    }

    /// Checks `index` against `size` and this batch's known size (adopting `size` if unknown).
    pub(crate) fn check(&mut self, index: u32, size: u32) -> Result<()> {
        check_size(size)?;
        if index >= size {
            return Err(CoreError::InvalidArgument(format!(
                "batch index {index} is outside a batch of {size} messages"
            )));
        }
        if self.size == 0 {
            let highest = self.words().len() as u64 * 64;
            let fits = self
                .words()
                .last()
                .is_none_or(|w| highest - u64::from(w.leading_zeros()) <= u64::from(size));
            if !fits {
                return Err(CoreError::InvalidArgument(format!(
                    "batch size {size} is smaller than the recorded unacked indexes"
                )));
            }
            self.size = size;
        } else if self.size != size {
            return Err(CoreError::InvalidArgument(format!(
                "batch size {size} differs from the size {} recorded for this entry",
                self.size
            )));
        }
        Ok(())
    }

    /// Marks `index` acknowledged; returns whether it was unacked.
    pub(crate) fn ack(&mut self, index: u32) -> bool {
        let Some(w) = self.words.get_mut((index / 64) as usize) else {
            return false;
        };
        let bit = 1u64 << (index % 64);
        let was = *w & bit != 0;
        *w &= !bit;
        self.unacked -= u32::from(was);
        was
    }

    /// ANDs Pulsar's ack-set words into the batch (a set bit = still unacked, as here): every index
    /// the words leave unset is acknowledged. Only the words the batch holds are read, so the cost
    /// is O(batch size / 64) whatever `given` holds: words past them and bits past the batch size
    /// change nothing (Java's `BitSet.and` ignores them too), and a word `given` lacks counts as
    /// zero (its indexes are acknowledged). Returns how many indexes were newly acknowledged.
    pub(crate) fn and_words(&mut self, given: &[u64]) -> u32 {
        let mut acked = 0;
        for (i, w) in self.words.iter_mut().enumerate() {
            let kept = *w & given.get(i).copied().unwrap_or(0);
            acked += (*w ^ kept).count_ones();
            *w = kept;
        }
        self.unacked -= acked;
        acked
    }

    /// Marks indexes `0..=index` acknowledged; returns how many were unacked.
    pub(crate) fn ack_through(&mut self, index: u32) -> u32 {
        let mut n = 0;
        for i in 0..=index {
            n += u32::from(self.ack(i));
        }
        n
    }

    /// Heap bytes of the word vector (for memory figures).
    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }

    /// Words held; fixed when the batch is created or decoded (acks and size adoption keep it).
    pub fn word_count(&self) -> usize {
        self.words.len()
    }
}

/// Checks entries' message counts (a batch's `num_messages_in_batch`, 1 for a single message):
/// each in `1..=MAX_BATCH_SIZE`, as many as the positions they go with.
pub fn check_batch_sizes(sizes: &[i64], positions: usize) -> Result<()> {
    if sizes.len() != positions {
        return Err(CoreError::InvalidArgument(format!(
            "{} message counts for {positions} entries",
            sizes.len()
        )));
    }
    match sizes
        .iter()
        .find(|&&m| !(1..=i64::from(MAX_BATCH_SIZE)).contains(&m))
    {
        Some(bad) => Err(CoreError::InvalidArgument(format!(
            "message counts must be in 1..={MAX_BATCH_SIZE}, got {bad}"
        ))),
        None => Ok(()),
    }
}

fn check_size(size: u32) -> Result<()> {
    if size == 0 || size > MAX_BATCH_SIZE {
        return Err(CoreError::InvalidArgument(format!(
            "batch size {size} is outside 1..={MAX_BATCH_SIZE}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_batch_has_every_index_unacked() {
        let b = BatchAcks::new(70).unwrap();
        assert_eq!(b.unacked(), 70);
        assert_eq!(b.words(), &[u64::MAX, 0b11_1111]);
        assert!(b.is_unacked(69));
        assert!(!b.is_unacked(70));
    }

    #[test]
    fn ack_clears_once() {
        let mut b = BatchAcks::new(3).unwrap();
        assert!(b.ack(1));
        assert!(!b.ack(1));
        assert_eq!(b.unacked(), 2);
        assert_eq!(b.words(), &[0b101]);
        assert_eq!(b.ack_through(2), 2);
        assert_eq!(b.unacked(), 0);
        assert!(b.words().is_empty());
    }

    #[test]
    fn and_words_acks_the_unset_bits_of_the_batch_only() {
        let mut b = BatchAcks::new(70).unwrap();
        // Index 1 and 65 stay; bits past 70 and a third word are ignored.
        assert_eq!(b.and_words(&[0b10, (1 << 1) | (1 << 20), u64::MAX]), 68);
        assert_eq!(b.unacked(), 2);
        assert_eq!(b.words(), &[0b10, 0b10]);
        assert_eq!(b.and_words(&[u64::MAX, u64::MAX]), 0);
        // A missing word is zero: its indexes are acknowledged.
        assert_eq!(b.and_words(&[u64::MAX]), 1);
        assert_eq!(b.words(), &[0b10]);
        assert_eq!(b.and_words(&[]), 1);
        assert_eq!(b.unacked(), 0);
    }

    #[test]
    fn sizes_are_checked() {
        assert!(BatchAcks::new(0).is_err());
        assert!(BatchAcks::new(MAX_BATCH_SIZE + 1).is_err());
        let mut b = BatchAcks::new(4).unwrap();
        assert!(b.check(4, 4).is_err());
        assert!(b.check(1, 5).is_err());
        assert!(b.check(3, 4).is_ok());
    }

    #[test]
    fn unknown_size_is_adopted_when_it_fits() {
        let mut b = BatchAcks::from_words(0, &[0b1100, 0]).unwrap();
        assert_eq!(b.unacked(), 2);
        assert!(b.check(0, 3).is_err());
        assert!(b.check(0, 4).is_ok());
        assert_eq!(b.size(), 4);
        assert!(BatchAcks::from_words(3, &[0b1000]).is_err());
    }
}
