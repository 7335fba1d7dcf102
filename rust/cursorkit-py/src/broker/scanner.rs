//! `cursorkit._core.FrameScanner`: a client's byte stream into frames, SEND/ACK/FLOW decoded.
//!
//! `feed` returns one tuple per frame, its first item the command type (0 for a frame left whole):
//! `(6, producer_id, sequence_id, stored, publish_time, num_messages)` for a SEND,
//! `(10, consumer_id, cumulative, [Position])` for an ACK, `(11, consumer_id, permits)` for a
//! FLOW, `(0, frame)` for any other frame (its bytes after `totalSize`, for the full decoder).
//! A SEND whose batch count its payload cannot hold is left whole: `batch_fits` is the rule, for
//! the full decoder's caller to refuse it by.

use std::sync::Mutex;

use cursorkit_core::broker::{batch_fits as core_batch_fits, Frame};
use cursorkit_core::{FrameScanner, Position};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::ackstate::position::untracked_position;
use crate::args::{int_arg, limit_arg};
use crate::errors::to_py;
use crate::sync::Shared;

/// A client's byte stream into frames (see `cursorkit_core::broker::FrameScanner`).
#[pyclass(name = "FrameScanner", module = "cursorkit._core", frozen)]
pub struct PyFrameScanner {
    inner: Mutex<FrameScanner>,
}

crate::shared!(PyFrameScanner, FrameScanner, "FrameScanner");

fn frame_tuple<'py>(py: Python<'py>, frame: &Frame<'_>) -> PyResult<Bound<'py, PyTuple>> {
    match frame {
        Frame::Send {
            producer_id,
            sequence_id,
            stored,
            publish_time,
            num_messages,
            ..
        } => (
            6u8,
            *producer_id,
            *sequence_id,
            PyBytes::new(py, stored),
            *publish_time,
            *num_messages,
        )
            .into_pyobject(py),
        Frame::Ack {
            consumer_id,
            cumulative,
            ids,
        } => {
            let positions = PyList::empty(py);
            for &(ledger, entry) in ids {
                // the scanner takes only ids that fit a Position
                let p = Position::new(ledger as i64, entry as i64).map_err(|e| to_py(py, e))?;
                positions.append(untracked_position(py, p)?)?;
            }
            (10u8, *consumer_id, *cumulative, positions).into_pyobject(py)
        }
        Frame::Flow {
            consumer_id,
            permits,
        } => (11u8, *consumer_id, *permits).into_pyobject(py),
        Frame::Other(body) => (0u8, PyBytes::new(py, body)).into_pyobject(py),
    }
}

#[pymethods]
impl PyFrameScanner {
    /// A scanner refusing frames whose ``totalSize`` passes ``max_frame_size`` (at least 8).
    #[new]
    fn new(max_frame_size: &Bound<'_, PyAny>) -> PyResult<Self> {
        let py = max_frame_size.py();
        let size = int_arg(max_frame_size, "max_frame_size")?;
        let scanner =
            FrameScanner::new(u64::try_from(size).unwrap_or(0)).map_err(|e| to_py(py, e))?;
        Ok(Self {
            inner: Mutex::new(scanner),
        })
    }

    /// Bytes held of a frame not yet complete.
    #[getter]
    fn buffered(&self, py: Python<'_>) -> usize {
        self.lock(py).buffered()
    }

    /// The frames ``data`` completes, in stream order, as tuples (see the module).
    ///
    /// Raises ``ProtocolError`` for a size over the limit or one that does not fit; the stream has
    /// no frame boundary left then, and every later feed raises it again.
    fn feed<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        let mut scanner = self.lock(py);
        let frames = scanner.feed(data).map_err(|e| to_py(py, e))?;
        let out = PyList::empty(py);
        for frame in &frames {
            out.append(frame_tuple(py, frame)?)?;
        }
        Ok(out)
    }

    /// :meth:`feed`, with each run of consecutive SENDs from one producer as one item:
    /// ``(6, producer_id, [sequence_id], [(stored, publish_time, num_messages)])``, the rows a
    /// group commit takes. Runs are grouped within one feed (a run a read cuts is two items).
    fn feed_runs<'py>(&self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyList>> {
        let mut scanner = self.lock(py);
        let frames = scanner.feed(data).map_err(|e| to_py(py, e))?;
        let out = PyList::empty(py);
        let mut run: Option<(u64, Bound<'py, PyList>, Bound<'py, PyList>)> = None;
        for frame in &frames {
            if let Frame::Send {
                producer_id,
                sequence_id,
                stored,
                publish_time,
                num_messages,
                ..
            } = frame
            {
                if let Some((id, ids, rows)) = run.take_if(|(id, _, _)| id != producer_id) {
                    out.append((6u8, id, ids, rows))?;
                }
                let (_, ids, rows) =
                    run.get_or_insert_with(|| (*producer_id, PyList::empty(py), PyList::empty(py)));
                ids.append(*sequence_id)?;
                rows.append((PyBytes::new(py, stored), *publish_time, *num_messages))?;
                continue;
            }
            if let Some((id, ids, rows)) = run.take() {
                out.append((6u8, id, ids, rows))?;
            }
            out.append(frame_tuple(py, frame)?)?;
        }
        if let Some((id, ids, rows)) = run.take() {
            out.append((6u8, id, ids, rows))?;
        }
        Ok(out)
    }
}

/// Whether a batch payload of ``payload_bytes`` (after the metadata) can hold ``num_messages``
/// messages: 6 bytes each at least, uncompressed; a compressed payload by its codec's largest
/// expansion and its stated ``uncompressed_size``. A count of 1 or less always fits.
#[pyfunction]
#[pyo3(signature = (num_messages, payload_bytes, compression = None, uncompressed_size = None))]
pub fn batch_fits(
    num_messages: &Bound<'_, PyAny>,
    payload_bytes: &Bound<'_, PyAny>,
    compression: Option<&Bound<'_, PyAny>>,
    uncompressed_size: Option<&Bound<'_, PyAny>>,
) -> PyResult<bool> {
    let n = int_arg(num_messages, "num_messages")?;
    let bytes = limit_arg(Some(payload_bytes), "payload_bytes")?.unwrap_or(0);
    let codec = limit_arg(compression, "compression")?.unwrap_or(0);
    let stated = limit_arg(
        uncompressed_size.filter(|u| !u.is_none()),
        "uncompressed_size",
    )?;
    Ok(core_batch_fits(
        n,
        bytes,
        u32::try_from(codec).unwrap_or(u32::MAX),
        stated,
    ))
}
