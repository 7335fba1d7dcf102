//! How many messages a batch's payload can hold: a SEND whose metadata claims more is refused, so
//! a client cannot make the broker (and every cursor acking the entry index by index) treat a few
//! bytes as a batch of a million messages.
//!
//! A batch payload is `[u32 size][SingleMessageMetadata][bytes]` per message, and the metadata's
//! `payload_size` is required: no message takes fewer than [`MIN_BATCHED_MESSAGE_BYTES`] of the
//! uncompressed payload. A compressed payload is bounded by its codec's largest expansion (and
//! by the `uncompressed_size` the client states, which its consumers need to decompress).

/// Fewest bytes one message of a batch takes: its 4-byte size and a `SingleMessageMetadata` with
/// only `payload_size` (a tag byte and a one-byte varint), its own bytes empty.
pub const MIN_BATCHED_MESSAGE_BYTES: u64 = 6;

/// The most one compressed byte of each of Pulsar's codecs expands to (`CompressionType` order:
/// NONE, LZ4, ZLIB, ZSTD, SNAPPY): an LZ4 block adds 255 bytes per length byte, deflate 258 per
/// 2 bits, a zstd RLE block 128 KiB per 4 bytes, a snappy copy 64 bytes per 3.
const MAX_EXPANSION: [u64; 5] = [1, 255, 1032, 32_768, 22];

/// Whether an uncompressed or compressed payload of `payload_bytes` can hold `num_messages`
/// batched messages. `compression` is the metadata's `CompressionType` (an unknown one counts as
/// the largest expansion), `uncompressed_size` its stated size if any (used for compressed
/// payloads only). A count of 1 or less (a message not batched) always fits.
pub fn batch_fits(
    num_messages: i64,
    payload_bytes: u64,
    compression: u32,
    uncompressed_size: Option<u64>,
) -> bool {
    if num_messages <= 1 {
        return true;
    }
    let room = match compression {
        0 => payload_bytes,
        codec => {
            let most = MAX_EXPANSION
                .get(codec as usize)
                .copied()
                .unwrap_or(MAX_EXPANSION[3]);
            let expanded = payload_bytes.saturating_mul(most);
            uncompressed_size.map_or(expanded, |stated| stated.min(expanded))
        }
    };
    (num_messages as u64).saturating_mul(MIN_BATCHED_MESSAGE_BYTES) <= room
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_takes_six_bytes_uncompressed() {
        assert!(batch_fits(1, 0, 0, None));
        assert!(batch_fits(0, 0, 0, None));
        assert!(batch_fits(-5, 0, 0, None));
        assert!(batch_fits(10, 60, 0, None));
        assert!(!batch_fits(11, 60, 0, None));
        assert!(!batch_fits(i64::MAX, u64::MAX / 2, 0, None));
        // a stated size does not widen an uncompressed payload
        assert!(!batch_fits(11, 60, 0, Some(1 << 20)));
    }

    #[test]
    fn compressed_payloads_are_bounded_by_codec_and_stated_size() {
        assert!(batch_fits(1000, 100, 3, Some(6000)));
        assert!(!batch_fits(1001, 100, 3, Some(6000)), "the stated size");
        assert!(
            !batch_fits(1_000_000, 10, 1, Some(u64::MAX)),
            "LZ4's expansion"
        );
        assert!(batch_fits(425, 10, 1, None));
        assert!(!batch_fits(426, 10, 1, None));
        assert!(
            batch_fits(54_613, 10, 99, None),
            "an unknown codec: zstd's bound"
        );
    }

    /// Real compressed batches fit: 1,000 empty messages (6,000 bytes of zeros' worth) compress to
    /// a few dozen bytes, within every codec's bound.
    #[test]
    fn highly_compressible_batches_fit() {
        for (codec, compressed) in [(1u32, 40u64), (2, 30), (3, 20), (4, 290)] {
            assert!(
                batch_fits(1000, compressed, codec, Some(6000)),
                "codec {codec}"
            );
        }
    }
}
