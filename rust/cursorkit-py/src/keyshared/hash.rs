//! Key_Shared hashing functions of `cursorkit._core`: Pulsar's sticky-key hash per key and in
//! bulk, and the selectors' slot functions.
//!
//! `hash_many` reads every Arrow binary-like layout (`binary`, `large_binary`, `fixed_size_binary`,
//! `string`, `large_string`, `binary_view`, `string_view`, and dictionaries of any of them) and
//! chunked arrays through the Arrow PyCapsule interface (`__arrow_c_array__`, `__arrow_c_stream__`) without
//! copying them, and lists, tuples and numpy arrays of `bytes`/`str` by gathering the keys into one
//! buffer; the hashing loop runs with the GIL released. An Arrow null is `InvalidArgument` naming
//! its index (and `None` in a list `InvalidInputType`): Pulsar never hashes a missing key, it
//! resolves the message's sticky key first (`NONE_KEY` at the end of the chain).

use std::borrow::Cow;

use cursorkit_core::{SlotKind, DEFAULT_RANGE_SIZE, MAX_RANGE_SIZE, MAX_STICKY_KEY_HASH};
use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyList, PyMemoryView, PyString, PyTuple};

use crate::args::{column, str_arg};
use crate::errors::{IntoPy, InvalidArgument, InvalidInputType};

use crate::arrow::{ArrowInput, KeyColumn};

/// The name of an object's type, for messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// The bytes of one key: `bytes` and `str` (UTF-8) borrowed, `bytearray`/`memoryview` copied;
/// any other type (`None` too) is `InvalidInputType`, a str that cannot be UTF-8 `InvalidArgument`.
fn key_bytes<'a>(obj: &'a Bound<'_, PyAny>, what: &dyn Fn() -> String) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return s
            .to_str()
            .map(|s| Cow::Borrowed(s.as_bytes()))
            .map_err(|e| {
                InvalidArgument::new_err(format!(
                    "{} is a str that is not valid UTF-8 ({e})",
                    what()
                ))
            });
    }
    if obj.is_instance_of::<PyByteArray>() || obj.is_instance_of::<PyMemoryView>() {
        let b = obj.py().get_type::<PyBytes>().call1((obj,))?;
        return Ok(Cow::Owned(b.cast::<PyBytes>()?.as_bytes().to_vec()));
    }
    Err(bad_key(obj, what))
}

#[cold]
fn bad_key(obj: &Bound<'_, PyAny>, what: &dyn Fn() -> String) -> PyErr {
    let hint = if obj.is_none() {
        " (a message without a key hashes its sticky key: see sticky_key())"
    } else {
        ""
    };
    InvalidInputType::new_err(format!(
        "{} must be bytes or str, got {}{hint}",
        what(),
        type_name(obj)
    ))
}

/// An integer argument in `[lo, hi]`: a non-integer (or a bool) is `InvalidInputType`, an integer
/// outside the bounds `InvalidArgument`. numpy integer scalars are accepted.
fn bounded_int(obj: &Bound<'_, PyAny>, what: &str, lo: i64, hi: i64) -> PyResult<i64> {
    let py = obj.py();
    let out_of_range =
        || InvalidArgument::new_err(format!("{what} must be in [{lo}, {hi}], got {obj}"));
    if obj.is_instance_of::<PyBool>() {
        return Err(InvalidInputType::new_err(format!(
            "{what} must be an int, got bool"
        )));
    }
    match obj.extract::<i64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        Ok(_) => Err(out_of_range()),
        Err(e) if e.is_instance_of::<PyOverflowError>(py) => Err(out_of_range()),
        Err(_) => Err(InvalidInputType::new_err(format!(
            "{what} must be an int, got {}",
            type_name(obj)
        ))),
    }
}

/// The slot function named by `selector_kind` for `range_size` (default `DEFAULT_RANGE_SIZE`).
fn slot_kind(
    selector_kind: &Bound<'_, PyAny>,
    range_size: Option<&Bound<'_, PyAny>>,
) -> PyResult<SlotKind> {
    let py = selector_kind.py();
    let name = str_arg(selector_kind, "selector_kind")?;
    let size = match range_size.filter(|r| !r.is_none()) {
        None => DEFAULT_RANGE_SIZE,
        Some(r) => bounded_int(r, "range_size", 1, i64::from(MAX_RANGE_SIZE))? as u32,
    };
    SlotKind::from_name(&name, size).py_err(py)
}

/// Pulsar's sticky-key hash of one key (`bytes`, or `str` as UTF-8): Murmur3 x86_32, seed 0,
/// masked to 31 bits.
#[pyfunction]
pub fn sticky_key_hash(key: &Bound<'_, PyAny>) -> PyResult<u32> {
    let bytes = key_bytes(key, &|| "key".to_owned())?;
    Ok(cursorkit_core::sticky_key_hash(&bytes))
}

/// Sticky-key hashes of many keys as a uint32 array: a list/tuple/numpy array of bytes or str, or
/// an Arrow binary/string array or chunked array (read zero-copy). Arrow nulls are `InvalidArgument`.
#[pyfunction]
pub fn hash_many<'py>(keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let py = keys.py();
    let hashes = if keys.is_instance_of::<PyList>() || keys.is_instance_of::<PyTuple>() {
        hash_gathered(keys)?
    } else if let Some(input) = ArrowInput::open(keys)? {
        let columns = input.columns(py)?;
        let hashed = py.detach(|| {
            let mut out = Vec::with_capacity(columns.iter().map(KeyColumn::len).sum());
            for (chunk, col) in columns.iter().enumerate() {
                out.extend(col.hash().map_err(|e| (chunk, e))?);
            }
            Ok(out)
        });
        hashed.map_err(|(chunk, e)| {
            let e = if columns.len() > 1 {
                cursorkit_core::CoreError::InvalidArgument(format!("Arrow chunk {chunk}: {e}"))
            } else {
                e
            };
            crate::errors::to_py(py, e)
        })?
    } else if let Ok(arr) = keys.cast::<PyUntypedArray>() {
        if arr.ndim() != 1 {
            return Err(InvalidInputType::new_err(format!(
                "keys must be one-dimensional, got {} dimensions",
                arr.ndim()
            )));
        }
        hash_gathered(keys)?
    } else {
        return Err(InvalidInputType::new_err(format!(
            "keys must be a list, tuple or numpy array of bytes/str, or an Arrow \
                 binary/string array or chunked array, got {}",
            type_name(keys)
        )));
    };
    Ok(PyArray1::from_vec(py, hashes))
}

/// Copies the keys of a sequence into one buffer (GIL held), then hashes them with it released.
fn hash_gathered(keys: &Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
    let py = keys.py();
    let n = keys.len()?;
    let mut values: Vec<u8> = Vec::with_capacity(n * 16);
    let mut offsets: Vec<usize> = Vec::with_capacity(n + 1);
    offsets.push(0);
    let mut gather = |i: usize, item: &Bound<'_, PyAny>| -> PyResult<()> {
        values.extend_from_slice(&key_bytes(item, &|| format!("key {i}"))?);
        offsets.push(values.len());
        Ok(())
    };
    if let Ok(list) = keys.cast::<PyList>() {
        // Indexing (not an iterator) so a list mutated by another thread cannot be read past its end.
        let mut i = 0;
        while let Ok(item) = list.get_item(i) {
            gather(i, &item)?;
            i += 1;
        }
    } else {
        for (i, item) in keys.try_iter()?.enumerate() {
            gather(i, &item?)?;
        }
    }
    py.detach(|| cursorkit_core::hash_many(&values, &offsets))
        .py_err(py)
}

/// Hashes as a slice of `u32` (zero-copy from a contiguous uint32 array) or of `i64` (any other
/// integer column, through `args::column`).
enum Hashes<'py> {
    U32(PyReadonlyArray1<'py, u32>),
    I64(crate::args::Column<'py>),
}

fn hashes_column<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Hashes<'py>> {
    if let Ok(arr) = obj.cast::<PyArray1<u32>>() {
        let ro = arr.readonly();
        if ro.as_slice().is_ok() {
            return Ok(Hashes::U32(ro));
        }
    }
    column(obj, "hashes").map(Hashes::I64)
}

/// Slots of many hashes under a selector's slot function, as a uint32 array: `"consistent"`
/// (`h % (range_size - 1) + 1`, Pulsar's `[1, 65535]`) or `"range"` (auto-split and exclusive:
/// `h % range_size`, 0 becomes 1). A hash outside `[0, 2^31 - 1]` is `InvalidArgument`.
#[pyfunction]
#[pyo3(signature = (hashes, selector_kind, range_size = None))]
pub fn slots_many<'py>(
    hashes: &Bound<'py, PyAny>,
    selector_kind: &Bound<'py, PyAny>,
    range_size: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyArray1<u32>>> {
    let py = hashes.py();
    let kind = slot_kind(selector_kind, range_size)?;
    let column = hashes_column(hashes)?;
    let slots = match &column {
        Hashes::U32(a) => {
            let a = a.as_slice().unwrap_or(&[]);
            py.detach(|| cursorkit_core::slots_many(a, kind))
        }
        Hashes::I64(c) => {
            let c = c.as_slice();
            py.detach(|| cursorkit_core::slots_many(c, kind))
        }
    }
    .py_err(py)?;
    Ok(PyArray1::from_vec(py, slots))
}

/// The slot of one hash under a selector's slot function (see `slots_many`).
#[pyfunction]
#[pyo3(signature = (hash, selector_kind, range_size = None))]
pub fn slot_for(
    hash: &Bound<'_, PyAny>,
    selector_kind: &Bound<'_, PyAny>,
    range_size: Option<&Bound<'_, PyAny>>,
) -> PyResult<u32> {
    let kind = slot_kind(selector_kind, range_size)?;
    let h = bounded_int(hash, "hash", 0, i64::from(MAX_STICKY_KEY_HASH))?;
    Ok(kind.slot(h as u32))
}
