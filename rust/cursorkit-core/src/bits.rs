//! Bit words: a mask kept 64 to a word, made from a predicate and walked by its set bits.

/// `keep` over `items`, 64 to a word (bit `b` of word `k` is item `64k + b`), computed without a
/// branch per item; returns the words and how many bits are set.
pub fn pack_bits<T>(items: &[T], keep: impl Fn(&T) -> bool) -> (Vec<u64>, usize) {
    let words: Vec<u64> = items
        .chunks(64)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .fold(0u64, |w, (b, item)| w | (u64::from(keep(item)) << b))
        })
        .collect();
    let set = words.iter().map(|w| w.count_ones() as usize).sum();
    (words, set)
}

/// The indexes of the set bits of `words` (bit `b` of word `k` is index `64k + b`), ascending.
pub fn set_bits(words: &[u64]) -> impl Iterator<Item = usize> + '_ {
    words.iter().enumerate().flat_map(|(k, &w)| {
        let mut rest = w;
        std::iter::from_fn(move || {
            (rest != 0).then(|| {
                let b = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                k * 64 + b
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_every_set_bit_in_order() {
        assert_eq!(set_bits(&[]).count(), 0);
        assert_eq!(set_bits(&[0, 0]).count(), 0);
        let got: Vec<usize> = set_bits(&[1 | 1 << 63, 0, 1 << 5]).collect();
        assert_eq!(got, vec![0, 63, 133]);
        assert_eq!(
            set_bits(&[u64::MAX]).collect::<Vec<_>>(),
            (0..64).collect::<Vec<_>>()
        );
    }

    #[test]
    fn packs_a_predicate_and_walks_it_back() {
        let items: Vec<u32> = (0..150).collect();
        let (words, set) = pack_bits(&items, |&v| v % 7 == 3);
        assert_eq!(words.len(), 3);
        let want: Vec<usize> = (0..150).filter(|v| v % 7 == 3).collect();
        assert_eq!(set, want.len());
        assert_eq!(set_bits(&words).collect::<Vec<_>>(), want);
        assert_eq!(pack_bits(&[] as &[u32], |_| true), (vec![], 0));
    }
}
