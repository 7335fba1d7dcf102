//! The message log's records in bulk: a group commit's entries checked and encoded into one blob,
//! and a read's records checked against their CRCs and handed back as entry tuples.

use cursorkit_core::broker::{put_record, read_records, MAX_ENTRY_BYTES, RECORD_HEADER};
use cursorkit_core::Position;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyInt, PyList, PyMemoryView, PyTuple};

use crate::ackstate::position::untracked_position;
use crate::args::int_arg;
use crate::errors::{to_py, InvalidArgument, InvalidInputType};

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

fn int_field(i: usize, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(InvalidInputType::new_err(format!(
            "entry {i}: {name} must be an int, got {}",
            type_name(value)
        )));
    }
    Ok(())
}

/// The records of ``entries`` (``(data, publish_time_ms, num_messages)`` tuples) as one blob,
/// each record's offset in it, and each entry's publish time. Every entry is checked first:
/// ``InvalidInputType`` or ``InvalidArgument`` naming the entry, and nothing is encoded.
#[pyfunction]
pub fn encode_records<'py>(
    py: Python<'py>,
    entries: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyBytes>, Vec<usize>, Vec<i64>)> {
    let mut blob = Vec::new();
    let mut offsets = Vec::new();
    let mut times = Vec::new();
    for (i, item) in entries.try_iter()?.enumerate() {
        let item = item?;
        let row = match item.cast::<PyTuple>() {
            Ok(t) if t.len() == 3 => t,
            _ => {
                return Err(InvalidInputType::new_err(format!(
                    "entry {i}: expected (data, publish_time_ms, num_messages)"
                )))
            }
        };
        let (data, when, count) = (row.get_item(0)?, row.get_item(1)?, row.get_item(2)?);
        let copied;
        let bytes: &[u8] = if let Ok(b) = data.cast::<PyBytes>() {
            b.as_bytes()
        } else if data.is_instance_of::<PyByteArray>() || data.is_instance_of::<PyMemoryView>() {
            copied = py
                .get_type::<PyBytes>()
                .call1((&data,))?
                .cast_into::<PyBytes>()?;
            copied.as_bytes()
        } else {
            return Err(InvalidInputType::new_err(format!(
                "entry {i}: data must be bytes, got {}",
                type_name(&data)
            )));
        };
        int_field(i, "publish_time_ms", &when)?;
        int_field(i, "num_messages", &count)?;
        if bytes.len() > MAX_ENTRY_BYTES {
            return Err(InvalidArgument::new_err(format!(
                "entry {i}: {} bytes (at most {MAX_ENTRY_BYTES})",
                bytes.len()
            )));
        }
        let when: i64 = when.extract().map_err(|_| {
            InvalidArgument::new_err(format!(
                "entry {i}: publish_time_ms {when} does not fit in 64 bits"
            ))
        })?;
        let count = count
            .extract::<u32>()
            .ok()
            .filter(|&c| c >= 1)
            .ok_or_else(|| {
                InvalidArgument::new_err(format!(
                    "entry {i}: num_messages {count} is not in 1..2^32-1"
                ))
            })?;
        offsets.push(blob.len());
        times.push(when);
        blob.reserve(RECORD_HEADER + bytes.len());
        put_record(&mut blob, bytes, when, count);
    }
    Ok((PyBytes::new(py, &blob), offsets, times))
}

/// The entries of the consecutive records ``data`` holds, the first being entry ``first`` of
/// ``ledger_id``, as ``(Position, data, publish_time_ms, num_messages)`` tuples;
/// ``CorruptSnapshot`` naming the entry that is cut short or fails its checksum.
#[pyfunction]
pub fn decode_records<'py>(
    py: Python<'py>,
    ledger_id: &Bound<'py, PyAny>,
    first: &Bound<'py, PyAny>,
    data: &[u8],
) -> PyResult<Bound<'py, PyList>> {
    let ledger_id = int_arg(ledger_id, "ledger_id")?;
    let first = int_arg(first, "first")?;
    let records = read_records(ledger_id, first, data).map_err(|e| to_py(py, e))?;
    let out = PyList::empty(py);
    for (i, r) in records.iter().enumerate() {
        let p = Position::new(ledger_id, first + i as i64).map_err(|e| to_py(py, e))?;
        let row = (
            untracked_position(py, p)?,
            PyBytes::new(py, r.data),
            r.publish_time,
            r.num_messages,
        );
        out.append(row)?;
    }
    Ok(out)
}
