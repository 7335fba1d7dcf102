//! `cursorkit._core`: the PyO3 binding of `cursorkit-core`. It converts types, maps errors to
//! `cursorkit.errors`, takes numpy/Arrow columns without copying, and releases the GIL for bulk work.
// Everything here handles values that came from Python: no unwrap/expect/panic/unchecked indexing.
#![deny(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

// Laid out like the core and the Python package: one folder per domain, and at the root the
// shared shapes every binding uses (argument extraction, error mapping, locking and the guard).
mod ackstate;
mod alloc;
mod args;
mod arrow;
mod broker;
mod delayed;
mod errors;
mod keyshared;
mod shared;
mod sync;
mod views;

use ackstate::{cursor, position, rangeset, redeliveries};
use delayed::{delay_queue, snapshot, tracker};
use keyshared::{dispatch, dispatcher, draining, hash, selector};

use pyo3::prelude::*;

/// The native module; the public API is re-exported by the `cursorkit` package.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<position::PyPosition>()?;
    m.add_class::<rangeset::PyRangeSet>()?;
    m.add_class::<cursor::PyCursorState>()?;
    m.add_class::<redeliveries::PyRedeliveryCounts>()?;
    m.add_class::<delay_queue::PyDelayQueue>()?;
    m.add_class::<tracker::PyInMemoryTrackerState>()?;
    m.add_class::<draining::PyDrainingHashes>()?;
    m.add_class::<dispatch::PyDispatchCore>()?;
    m.add_class::<dispatcher::PyKeySharedBase>()?;
    m.add_class::<shared::core::PySharedCore>()?;
    m.add_class::<broker::scanner::PyFrameScanner>()?;
    m.add_function(wrap_pyfunction!(broker::scanner::batch_fits, m)?)?;
    m.add_function(wrap_pyfunction!(broker::checksum::crc32c, m)?)?;
    m.add_function(wrap_pyfunction!(broker::frames::message_frames, m)?)?;
    m.add_function(wrap_pyfunction!(broker::frames::send_receipts, m)?)?;
    m.add_function(wrap_pyfunction!(broker::frames::entry_fields, m)?)?;
    m.add_function(wrap_pyfunction!(broker::records::encode_records, m)?)?;
    m.add_function(wrap_pyfunction!(broker::records::decode_records, m)?)?;
    m.add_function(wrap_pyfunction!(alloc::heap_allocated, m)?)?;
    m.add_function(wrap_pyfunction!(alloc::heap_peak, m)?)?;
    m.add_function(wrap_pyfunction!(alloc::reset_heap_peak, m)?)?;
    m.add_function(wrap_pyfunction!(sync::_guard_selftest, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot::cut_segments, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot::sort_indexes, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot::encode_segment, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot::decode_segment, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot::segment_bitmaps, m)?)?;
    m.add_function(wrap_pyfunction!(snapshot::bitmap_cardinality, m)?)?;
    m.add_function(wrap_pyfunction!(hash::sticky_key_hash, m)?)?;
    m.add_function(wrap_pyfunction!(hash::hash_many, m)?)?;
    m.add_function(wrap_pyfunction!(hash::slots_many, m)?)?;
    m.add_function(wrap_pyfunction!(hash::slot_for, m)?)?;
    m.add_class::<selector::PyAutoSplitSelectorState>()?;
    m.add_class::<selector::PyConsistentHashingSelectorState>()?;
    m.add_class::<selector::PyExclusiveRangeSelectorState>()?;
    Ok(())
}
