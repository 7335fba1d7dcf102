//! ``crc32c``: the core's CRC-32C over any bytes-like object, without a copy.

use cursorkit_core::broker::crc32c as core_crc32c;
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;

use crate::errors::InvalidArgument;

/// Buffers this large are checksummed with the GIL released (a frame's payload, up to 5 MiB).
const DETACH_FROM: usize = 64 * 1024;

/// The CRC-32C of ``data`` (bytes, bytearray, memoryview: any C-contiguous byte buffer),
/// continuing ``value`` (0 to start), as an unsigned 32-bit int.
#[pyfunction]
#[pyo3(signature = (data, value = 0))]
pub fn crc32c(py: Python<'_>, data: &Bound<'_, PyAny>, value: u32) -> PyResult<u32> {
    let buffer = PyBuffer::<u8>::get(data)?;
    if !buffer.is_c_contiguous() {
        return Err(InvalidArgument::new_err(
            "crc32c needs a contiguous byte buffer",
        ));
    }
    // SAFETY: the buffer stays acquired (and its memory alive) until `buffer` drops at the end
    // of this function; it is only read.
    let bytes =
        unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) };
    if bytes.len() < DETACH_FROM {
        return Ok(core_crc32c(value, bytes));
    }
    Ok(py.detach(|| core_crc32c(value, bytes)))
}
