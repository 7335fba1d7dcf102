//! The frames a broker sends per message, built in one call for many: MESSAGE frames for a
//! consumer's dispatch round and SEND_RECEIPT frames for a group commit; and what dispatch reads
//! of stored entries (due time and key) for a whole read.

use cursorkit_core::broker::{
    entry_fields as core_entry_fields, put_message_frame, put_send_receipt,
};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyInt, PyList};

use crate::ackstate::position::position_arg;
use crate::args::{int_arg, wrong_type};
use crate::errors::{InvalidArgument, LengthMismatch};

fn u64_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        return Err(wrong_type(obj, what, "an int"));
    }
    obj.extract::<u64>()
        .map_err(|_| InvalidArgument::new_err(format!("{what} must be in 0..2^64, got {obj}")))
}

fn same_length(what: &str, a: usize, b: usize) -> PyResult<()> {
    if a == b {
        Ok(())
    } else {
        Err(LengthMismatch::new_err(format!(
            "{what}: {a} and {b} items"
        )))
    }
}

/// The MESSAGE frames delivering ``datas`` (stored bytes) at ``positions`` to ``consumer_id``,
/// each with its redelivery count and, for a partly acked batch, its ``ack_set`` words (``None``
/// for none), concatenated; ids name ``partition`` when it is one of a partitioned topic (None or
/// negative: not a partition).
#[pyfunction]
#[pyo3(signature = (consumer_id, positions, redelivery_counts, datas, ack_sets = None, partition = None))]
pub fn message_frames<'py>(
    py: Python<'py>,
    consumer_id: &Bound<'py, PyAny>,
    positions: &Bound<'py, PyList>,
    redelivery_counts: &Bound<'py, PyList>,
    datas: &Bound<'py, PyList>,
    ack_sets: Option<&Bound<'py, PyList>>,
    partition: Option<i32>,
) -> PyResult<Bound<'py, PyBytes>> {
    let partition = partition.unwrap_or(-1);
    let consumer_id = u64_arg(consumer_id, "consumer_id")?;
    let n = positions.len();
    same_length(
        "positions and redelivery_counts",
        n,
        redelivery_counts.len(),
    )?;
    same_length("positions and datas", n, datas.len())?;
    if let Some(sets) = ack_sets {
        same_length("positions and ack_sets", n, sets.len())?;
    }
    let mut out = Vec::new();
    let mut words = Vec::new();
    for i in 0..n {
        let p = position_arg(&positions.get_item(i)?, "positions[i]")?;
        let count = int_arg(&redelivery_counts.get_item(i)?, "redelivery_counts[i]")?;
        let count = u32::try_from(count).map_err(|_| {
            InvalidArgument::new_err(format!("redelivery count {count} is not in 0..2^32"))
        })?;
        let data = datas.get_item(i)?;
        let stored = data.cast::<PyBytes>()?.as_bytes();
        words.clear();
        if let Some(sets) = ack_sets {
            let set = sets.get_item(i)?;
            if !set.is_none() {
                for w in set.try_iter()? {
                    words.push(int_arg(&w?, "ack_set word")?);
                }
            }
        }
        put_message_frame(
            &mut out,
            consumer_id,
            p.ledger_id,
            p.entry_id,
            partition,
            count,
            &words,
            stored,
        );
    }
    Ok(PyBytes::new(py, &out))
}

/// The SEND_RECEIPT frames of ``producer_id``'s ``sequence_ids``, stored at ``positions``,
/// concatenated.
#[pyfunction]
pub fn send_receipts<'py>(
    py: Python<'py>,
    producer_id: &Bound<'py, PyAny>,
    sequence_ids: &Bound<'py, PyList>,
    positions: &Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyBytes>> {
    let producer_id = u64_arg(producer_id, "producer_id")?;
    same_length(
        "sequence_ids and positions",
        sequence_ids.len(),
        positions.len(),
    )?;
    let mut out = Vec::with_capacity(sequence_ids.len() * 32);
    for (sequence, position) in sequence_ids.iter().zip(positions.iter()) {
        let sequence = u64_arg(&sequence, "sequence id")?;
        let p = position_arg(&position, "positions[i]")?;
        put_send_receipt(&mut out, producer_id, sequence, p.ledger_id, p.entry_id);
    }
    Ok(PyBytes::new(py, &out))
}

/// Each stored entry's ``deliver_at_time`` (0 when absent) and key (``ordering_key``, else
/// ``partition_key``, else ``b""``): the two metadata fields dispatch reads, for a whole read.
#[pyfunction]
pub fn entry_fields<'py>(
    py: Python<'py>,
    datas: &Bound<'py, PyList>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
    let due = PyList::empty(py);
    let keys = PyList::empty(py);
    for data in datas.iter() {
        let stored = data.cast::<PyBytes>()?;
        let (at, key) = core_entry_fields(stored.as_bytes());
        due.append(at)?;
        keys.append(PyBytes::new(py, key))?;
    }
    Ok((due, keys))
}
