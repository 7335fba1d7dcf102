//! What dispatch reads of a stored entry's metadata: when it is due and its key.
//!
//! The bytes were checked in full when they arrived and come back under the log's checksum, so
//! this read skips every field but three; bytes that do not parse read as metadata with none.

use super::reader::{Reader, LEN, VARINT};

/// A stored entry's `deliver_at_time` (0 when absent) and key (`ordering_key`, else
/// `partition_key`, else empty), from `metadataSize | MessageMetadata | payload`.
pub fn entry_fields(stored: &[u8]) -> (i64, &[u8]) {
    read(stored).unwrap_or((0, &[]))
}

fn read(stored: &[u8]) -> Option<(i64, &[u8])> {
    let size = u32::from_be_bytes(stored.get(..4)?.try_into().ok()?) as usize;
    let meta = stored.get(4..)?;
    let meta = meta.get(..size.min(meta.len()))?;
    let mut r = Reader::new(meta);
    let (mut due, mut ordering, mut partition) = (0i64, None, None);
    while !r.done() {
        match r.key()? {
            (19, VARINT) => due = r.varint()? as i64,
            (18, LEN) => ordering = Some(r.bytes()?),
            (6, LEN) => partition = Some(r.bytes()?),
            (_, wire) => r.skip(wire)?,
        }
    }
    Some((due, ordering.or(partition).unwrap_or(&[])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ordering_key_wins_and_damage_reads_as_nothing() {
        // producer_name "p", partition_key "pk", ordering_key "ok", deliver_at_time 5, a fixed64
        let meta =
            b"\x0a\x01p\x32\x02pk\x92\x01\x02ok\x98\x01\x05\x19\x01\x02\x03\x04\x05\x06\x07\x08";
        let mut stored = (meta.len() as u32).to_be_bytes().to_vec();
        stored.extend_from_slice(meta);
        stored.extend_from_slice(b"payload");
        assert_eq!(entry_fields(&stored), (5, &b"ok"[..]));
        let partition_only = b"\x00\x00\x00\x04\x32\x02pk";
        assert_eq!(entry_fields(partition_only), (0, &b"pk"[..]));
        assert_eq!(entry_fields(b"\x00\x00\x00\x02\x32\x09"), (0, &b""[..]));
        assert_eq!(entry_fields(b"\x00"), (0, &b""[..]));
    }
}
