use super::*;
use crate::ackstate::wire::put_varint;
use crate::testing::Rng;

fn field_varint(out: &mut Vec<u8>, field: u64, value: u64) {
    put_varint(out, field << 3);
    put_varint(out, value);
}

fn field_bytes(out: &mut Vec<u8>, field: u64, value: &[u8]) {
    put_varint(out, (field << 3) | 2);
    put_varint(out, value.len() as u64);
    out.extend_from_slice(value);
}

fn frame(kind: u64, sub: &[u8], section: &[u8]) -> Vec<u8> {
    let mut command = Vec::new();
    field_varint(&mut command, 1, kind);
    field_bytes(&mut command, kind, sub);
    let mut out = ((4 + command.len() + section.len()) as u32)
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(&(command.len() as u32).to_be_bytes());
    out.extend_from_slice(&command);
    out.extend_from_slice(section);
    out
}

fn metadata(name: &[u8], batch: Option<u64>, extra: &[u8]) -> Vec<u8> {
    let mut meta = Vec::new();
    field_bytes(&mut meta, 1, name);
    field_varint(&mut meta, 2, 9);
    field_varint(&mut meta, 3, 1_700_000_000_000);
    if let Some(n) = batch {
        field_varint(&mut meta, 11, n);
    }
    meta.extend_from_slice(extra);
    let mut stored = (meta.len() as u32).to_be_bytes().to_vec();
    stored.extend_from_slice(&meta);
    stored.extend_from_slice(b"payload");
    if let Some(n) = batch.filter(|&n| n < 1 << 20) {
        // room for the batch's messages (each at least MIN_BATCHED_MESSAGE_BYTES)
        stored.resize(stored.len() + 6 * n as usize, 0);
    }
    stored
}

fn send_frame(producer: u64, sequence: u64, stored: &[u8], checksum: Option<u32>) -> Vec<u8> {
    let mut sub = Vec::new();
    field_varint(&mut sub, 1, producer);
    field_varint(&mut sub, 2, sequence);
    let mut section = Vec::new();
    if let Some(crc) = checksum {
        section.extend_from_slice(&[0x0E, 0x01]);
        section.extend_from_slice(&crc.to_be_bytes());
    }
    section.extend_from_slice(stored);
    frame(TYPE_SEND, &sub, &section)
}

fn ack_frame(consumer: u64, ack_type: u64, ids: &[(u64, u64)], ack_set: bool) -> Vec<u8> {
    let mut sub = Vec::new();
    field_varint(&mut sub, 1, consumer);
    field_varint(&mut sub, 2, ack_type);
    for &(l, e) in ids {
        let mut id = Vec::new();
        field_varint(&mut id, 1, l);
        field_varint(&mut id, 2, e);
        field_varint(&mut id, 3, u64::MAX); // partition -1
        if ack_set {
            field_varint(&mut id, 5, 3);
        }
        field_bytes(&mut sub, 3, &id);
    }
    frame(TYPE_ACK, &sub, &[])
}

fn flow_frame(consumer: u64, permits: u64) -> Vec<u8> {
    let mut sub = Vec::new();
    field_varint(&mut sub, 1, consumer);
    field_varint(&mut sub, 2, permits);
    frame(TYPE_FLOW, &sub, &[])
}

fn scan_one(bytes: &[u8]) -> Frame<'static> {
    let mut scanner = FrameScanner::new(1 << 20).unwrap();
    let frames = scanner.feed(bytes).unwrap();
    assert_eq!(frames.len(), 1);
    owned(&frames[0])
}

/// A frame with its borrowed bytes leaked, to compare across scanners.
fn owned(f: &Frame<'_>) -> Frame<'static> {
    match f {
        Frame::Send {
            producer_id,
            sequence_id,
            stored,
            publish_time,
            num_messages,
            checksummed,
        } => Frame::Send {
            producer_id: *producer_id,
            sequence_id: *sequence_id,
            stored: Box::leak(stored.to_vec().into_boxed_slice()),
            publish_time: *publish_time,
            num_messages: *num_messages,
            checksummed: *checksummed,
        },
        Frame::Ack {
            consumer_id,
            cumulative,
            ids,
        } => Frame::Ack {
            consumer_id: *consumer_id,
            cumulative: *cumulative,
            ids: ids.clone(),
        },
        Frame::Flow {
            consumer_id,
            permits,
        } => Frame::Flow {
            consumer_id: *consumer_id,
            permits: *permits,
        },
        Frame::Other(b) => Frame::Other(Box::leak(b.to_vec().into_boxed_slice())),
    }
}

#[test]
fn a_checksummed_send_is_decoded() {
    let stored = metadata(b"p-0", Some(5), &[]);
    let got = scan_one(&send_frame(3, 41, &stored, Some(crc32c::crc32c(&stored))));
    let want = Frame::Send {
        producer_id: 3,
        sequence_id: 41,
        stored: &stored,
        publish_time: 1_700_000_000_000,
        num_messages: 5,
        checksummed: true,
    };
    assert_eq!(owned(&want), got);
    let unchecked = scan_one(&send_frame(3, 41, &stored, None));
    assert!(matches!(
        unchecked,
        Frame::Send {
            checksummed: false,
            num_messages: 5,
            ..
        }
    ));
}

#[test]
fn sends_the_hot_decoder_cannot_vouch_for_go_whole() {
    let good = metadata(b"p-0", None, &[]);
    let crc = crc32c::crc32c(&good);
    let mut unknown_field = Vec::new();
    field_varint(&mut unknown_field, 20, 1); // marker_type: not read here
    let mut bad_compression = Vec::new();
    field_varint(&mut bad_compression, 8, 9);
    let mut bad_property = Vec::new();
    field_bytes(&mut bad_property, 4, b"\x0a\x01k"); // a KeyValue without its value
    for (why, bytes) in [
        ("checksum fails", send_frame(1, 1, &good, Some(crc ^ 1))),
        (
            "name not UTF-8",
            send_frame(1, 1, &metadata(b"\xff", None, &[]), None),
        ),
        (
            "unknown field",
            send_frame(1, 1, &metadata(b"p", None, &unknown_field), None),
        ),
        (
            "bad enum",
            send_frame(1, 1, &metadata(b"p", None, &bad_compression), None),
        ),
        (
            "bad nested",
            send_frame(1, 1, &metadata(b"p", None, &bad_property), None),
        ),
        ("no section", frame(TYPE_SEND, b"\x08\x01\x10\x01", &[])),
        ("no sequence", frame(TYPE_SEND, b"\x08\x01", &good)),
        (
            "metadata overruns",
            send_frame(1, 1, &[0, 0, 0, 99, 1, 2], None),
        ),
    ] {
        assert!(matches!(scan_one(&bytes), Frame::Other(_)), "{why}");
    }
}

/// A batch count the payload cannot hold is left to the full decoder (whose caller refuses it);
/// a compressed payload may hold more, up to its stated uncompressed size.
#[test]
fn a_batch_its_payload_cannot_hold_goes_whole() {
    let huge = metadata(b"p", Some(1 << 20), &[]); // a million messages in 7 payload bytes
    assert!(matches!(
        scan_one(&send_frame(1, 1, &huge, None)),
        Frame::Other(_)
    ));
    let mut zstd = Vec::new();
    field_varint(&mut zstd, 8, 3);
    field_varint(&mut zstd, 9, 6000); // uncompressed_size: room for 1,000 messages
    for (count, hot) in [(1000, true), (1001, false)] {
        let mut extra = zstd.clone();
        field_varint(&mut extra, 11, count);
        let got = scan_one(&send_frame(1, 1, &metadata(b"p", None, &extra), None));
        assert_eq!(matches!(got, Frame::Send { .. }), hot, "{count} messages");
    }
}

#[test]
fn a_batch_count_below_one_counts_as_one() {
    let stored = metadata(b"p", Some(u64::MAX), &[]); // int32 -1
    assert!(matches!(
        scan_one(&send_frame(1, 1, &stored, None)),
        Frame::Send {
            num_messages: 1,
            ..
        }
    ));
}

#[test]
fn acks_and_flows_are_decoded_and_odd_ones_go_whole() {
    assert_eq!(
        scan_one(&ack_frame(4, 0, &[(5, 6), (5, 8)], false)),
        Frame::Ack {
            consumer_id: 4,
            cumulative: false,
            ids: vec![(5, 6), (5, 8)]
        }
    );
    assert!(matches!(
        scan_one(&ack_frame(4, 1, &[(5, 6)], false)),
        Frame::Ack {
            cumulative: true,
            ..
        }
    ));
    assert!(matches!(
        scan_one(&ack_frame(4, 0, &[(5, 6)], true)),
        Frame::Other(_)
    ));
    assert!(matches!(
        scan_one(&ack_frame(4, 2, &[(5, 6)], false)),
        Frame::Other(_)
    ));
    assert!(matches!(
        scan_one(&ack_frame(4, 0, &[(u64::MAX, 6)], false)),
        Frame::Other(_)
    ));
    assert_eq!(
        scan_one(&flow_frame(2, 1000)),
        Frame::Flow {
            consumer_id: 2,
            permits: 1000
        }
    );
    assert!(matches!(
        scan_one(&frame(TYPE_FLOW, b"\x08\x02", &[])),
        Frame::Other(_)
    ));
    // an ACK without its required consumer id and type, and a type naming another sub-command
    assert!(matches!(
        scan_one(&frame(TYPE_ACK, b"", &[])),
        Frame::Other(_)
    ));
    let mut command = Vec::new();
    field_varint(&mut command, 1, TYPE_FLOW);
    field_bytes(&mut command, TYPE_ACK, b"\x08\x01\x10\x00");
    let mut mismatched = ((4 + command.len()) as u32).to_be_bytes().to_vec();
    mismatched.extend_from_slice(&(command.len() as u32).to_be_bytes());
    mismatched.extend_from_slice(&command);
    assert!(matches!(scan_one(&mismatched), Frame::Other(_)));
}

#[test]
fn any_split_of_a_stream_gives_the_same_frames() {
    let stored = metadata(b"p", Some(2), &[]);
    let mut stream = Vec::new();
    let mut want = Vec::new();
    for i in 0..20u64 {
        let bytes = match i % 4 {
            0 => send_frame(1, i, &stored, Some(crc32c::crc32c(&stored))),
            1 => ack_frame(2, 0, &[(1, i)], false),
            2 => flow_frame(2, i),
            _ => frame(18, b"", &[]), // PING
        };
        want.push(scan_one(&bytes));
        stream.extend_from_slice(&bytes);
    }
    let mut rng = Rng(7);
    for _ in 0..200 {
        let mut scanner = FrameScanner::new(1 << 20).unwrap();
        let mut got = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            let step = 1 + rng.below(64) as usize;
            let end = (at + step).min(stream.len());
            got.extend(scanner.feed(&stream[at..end]).unwrap().iter().map(owned));
            at = end;
        }
        assert_eq!(got, want);
        assert_eq!(scanner.buffered(), 0);
    }
}

#[test]
fn bad_sizes_fail_the_stream_for_good() {
    let mut scanner = FrameScanner::new(100).unwrap();
    let err = scanner.feed(&101u32.to_be_bytes()).unwrap_err();
    assert!(err.to_string().contains("over the limit"));
    assert!(scanner
        .feed(&flow_frame(1, 1))
        .unwrap_err()
        .to_string()
        .contains("already failed"));
    let mut scanner = FrameScanner::new(100).unwrap();
    assert!(scanner
        .feed(&3u32.to_be_bytes())
        .unwrap_err()
        .to_string()
        .contains("no room"));
    let mut scanner = FrameScanner::new(100).unwrap();
    let mut bytes = 10u32.to_be_bytes().to_vec();
    bytes.extend_from_slice(&7u32.to_be_bytes());
    assert!(scanner
        .feed(&bytes)
        .unwrap_err()
        .to_string()
        .contains("does not fit"));
    assert!(FrameScanner::new(7).is_err());
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(11);
    let stored = metadata(b"p", None, &[]);
    let good = send_frame(1, 1, &stored, Some(crc32c::crc32c(&stored)));
    for _ in 0..2000 {
        let mut bytes = good.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(bytes.len() as u64) as usize;
            bytes[at] ^= 1 << rng.below(8);
        }
        let mut scanner = FrameScanner::new(1 << 20).unwrap();
        let _ = scanner.feed(&bytes);
    }
}
