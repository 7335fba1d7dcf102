//! # cursorkit-core
//!
//! The subscription state of a message broker, in pure Rust and without I/O: which positions of a
//! topic a cursor has acknowledged, kept the way Apache Pulsar's broker keeps them but faster and
//! smaller. Python reaches it through the `cursorkit` package; a Rust broker depends on this crate.
//!
//! * [`Position`]: a `(ledger, entry)` address.
//! * [`RangeSet`]: acknowledged positions as per-ledger roaring bitmaps, reported as Pulsar's
//!   open-closed ranges, with an O(1) range count, dirty-ledger tracking, and byte forms
//!   (compact, roaring portable per ledger, Pulsar's `LongListMap` words).
//! * [`Cursor`]: mark-delete + [`RangeSet`] + [`BatchAcks`] per partial batch, with Pulsar's
//!   individual, cumulative and batch-index acks, roll-forward, backlog and read-path look-ups.
//! * [`DelayQueue`]: delayed message indexes `(deliver_at, ledger, entry)`, unique by position,
//!   popped in exact order from 4.096 s calendar buckets of packed `u64`s (5–15 B an index).
//! * [`InMemoryTracker`]: Pulsar's `InMemoryDelayedDeliveryTracker` rules (tick rounding, strict
//!   mode, fixed-delay pause, dedup) over a [`DelayQueue`], with `now` passed in.
//! * [`sticky_key_hash`]: Pulsar's Key_Shared hash (Murmur3 x86_32, seed 0, 31 bits) and the
//!   selectors' slot functions ([`SlotKind`]), per key or over Arrow-layout key columns.
//! * [`AutoSplitSelector`], [`ConsistentHashingSelector`], [`ExclusiveRangeSelector`]: Key_Shared's
//!   hash-range selectors with Pulsar's rules, a flat owner-per-slot table for `select`, and the
//!   exact [`Impact`] (ranges lost and gained per consumer) of every membership change.
//! * [`DrainingHashes`]: PIP-379's draining hashes (owner, reference count, blocked attempts per
//!   hash; 8–10 B a hash) and [`PendingAcks`]: one consumer's sent, unacked entries with their
//!   batch size and hash (about 12 B an entry).
//!
//! Pulsar's quirks that its own tests assert (a cross-ledger removal keeps the lower ledger's last
//! entry; an empty `(L:x..L:x]` add records ledger `L`; `Integer.MAX_VALUE` entries act as a
//! sentinel in cross-ledger adds) are reproduced by `RangeSet::new(true)`; the default is correct.
//!
//! ```
//! use cursorkit_core::{Position, RangeSet};
//! let mut acked = RangeSet::new(false);
//! acked.add_open_closed(0, 4, 0, 75, None).unwrap();
//! acked.add_open_closed(0, 96, 0, 105, None).unwrap();
//! assert_eq!(acked.to_string(), "[(0:4..0:75],(0:96..0:105]]");
//! assert_eq!(acked.first_range(), Some((Position::new(0, 4).unwrap(), Position::new(0, 75).unwrap())));
//! assert_eq!(acked.cardinality(0, 0, 0, 100).unwrap(), 71 + 4);
//! ```

//! The modules are grouped by domain, like the Python package: [`ackstate`], [`delayed`],
//! [`keyshared`]; the crate root re-exports every public item, so `cursorkit_core::RangeSet`
//! and `cursorkit_core::ackstate::rangeset::RangeSet` name the same type.

pub mod ackstate;
pub mod delayed;
mod error;
pub mod keyshared;

pub use ackstate::batch::{BatchAcks, MAX_BATCH_SIZE};
pub use ackstate::codec::{FORMAT_VERSION, MAGIC};
pub use ackstate::cursor::{Cursor, CursorCounters, MAX_NEXT_UNACKED};
pub use ackstate::position::{check_bound, check_entry, check_ledger, Position, MAX_ENTRY_ID};
pub use ackstate::rangeset::{Range, RangeSet, MAX_DECODED_CHUNKS};
pub use ackstate::wire::{
    long_list_map_field, message_range_field, parse_message_ranges, varint_len,
};
pub use delayed::delay_queue::{DelayQueue, Popped, MAX_LIVE_LEDGERS};
pub use delayed::snapshot::{
    bitmap_cardinality, cut_segments, decode_segment, encode_segment, segment_bitmaps,
    sort_indexes, UNLIMITED_INDEXES,
};
pub use delayed::tracker::{precision_bits, InMemoryTracker, TrackerCounters};
pub use error::{CoreError, Result};
pub use keyshared::dispatch::{
    AckOutcome, BlockReason, Blocked, ConsumerFigures, Delivery, DispatchCore, DispatchMode, SLOTS,
};
pub use keyshared::draining::{
    ConsumerDrainingStats, DrainingCounters, DrainingHash, DrainingHashes, RemovedHashes,
};
pub use keyshared::hash::{
    hash_many, key_slots_many, murmur3_x86_32, slot_consistent, slot_range, slots_many,
    sticky_key_hash, Offset, SlotKind, DEFAULT_RANGE_SIZE, MAX_RANGE_SIZE, MAX_STICKY_KEY_HASH,
    NONE_KEY, STICKY_KEY_HASH_NOT_SET,
};
pub use keyshared::pending_acks::{PendingAck, PendingAcks};
pub use keyshared::selector::{
    diff, ranges_by_consumer, Assignment, AutoSplitSelector, BeyondTable,
    ConsistentHashingSelector, ExclusiveRangeSelector, HashRange, Impact, SlotTable,
    StickyKeySelector, CONSISTENT_HASHING_KEY_RANGE, DEFAULT_POINTS_PER_CONSUMER, MAX_CONSUMER_ID,
    MAX_POINTS_PER_CONSUMER, MAX_SELECTOR_RANGE_SIZE,
};
