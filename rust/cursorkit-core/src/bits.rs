//! Bit words: the set bits of a word array, in order (used wherever a mask is kept 64 to a word).

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
}
