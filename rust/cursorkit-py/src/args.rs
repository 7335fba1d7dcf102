//! Argument extraction: integer ids, id columns (numpy/Arrow/sequences, zero-copy for int64),
//! and ledger-size mappings, each failing with a `cursorkit.errors` class that names the value.

use std::collections::BTreeMap;

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyInt, PyList, PyMapping, PyMemoryView, PyString, PyTuple,
};

use crate::errors::{InvalidArgument, InvalidInputType, InvalidPosition};

/// One integer argument; a non-integer is `InvalidInputType`, an out-of-int64 one `InvalidPosition`.
#[inline]
pub fn int_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<i64> {
    // An exact `int` (never a bool, a subclass) is the per-call case: one type compare.
    if let Ok(i) = obj.cast_exact::<PyInt>() {
        if let Ok(v) = i.extract::<i64>() {
            return Ok(v);
        }
    }
    match obj.extract::<i64>() {
        Ok(v) if !obj.is_instance_of::<PyBool>() => Ok(v),
        _ => Err(int_arg_error(obj, what)),
    }
}

#[cold]
fn int_arg_error(obj: &Bound<'_, PyAny>, what: &str) -> PyErr {
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        InvalidPosition::new_err(format!(
            "{what} {obj} does not fit in a signed 64-bit integer"
        ))
    } else {
        let type_name = type_name(obj);
        let shown = obj
            .repr()
            .map_or_else(|_| "?".to_owned(), |r| r.to_string());
        InvalidInputType::new_err(format!("{what} must be an int, got {type_name} {shown}"))
    }
}

/// An optional non-negative limit (`None` means unlimited).
pub fn limit_arg(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<u64>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o)
            if o.is_instance_of::<PyInt>()
                && !o.is_instance_of::<PyBool>()
                && o.extract::<u64>().is_ok_and(|v| v > i64::MAX as u64) =>
        {
            Ok(Some(u64::MAX)) // beyond any count a set can hold: no limit
        }
        Some(o) => {
            let v = int_arg(o, what)?;
            u64::try_from(v)
                .map(Some)
                .map_err(|_| InvalidArgument::new_err(format!("{what} must be >= 0, got {v}")))
        }
    }
}

/// An int64 column: borrowed from a contiguous int64 array, or converted once by numpy.
pub enum Column<'py> {
    /// Zero-copy view of the caller's array.
    Borrowed(PyReadonlyArray1<'py, i64>),
    /// Converted values (other dtypes, sequences, object arrays).
    Owned(Vec<i64>),
}

impl Column<'_> {
    /// The ids as a slice.
    pub fn as_slice(&self) -> &[i64] {
        match self {
            Column::Borrowed(a) => a.as_slice().unwrap_or(&[]),
            Column::Owned(v) => v,
        }
    }
}

impl<'py> Column<'py> {
    /// The caller's own array when it was read without a copy (so it can be handed on as is).
    pub fn borrowed(&self) -> Option<Bound<'py, PyAny>> {
        match self {
            Column::Borrowed(a) => Some(a.as_any().clone()),
            Column::Owned(_) => None,
        }
    }
}

fn contiguous_i64<'py>(obj: &Bound<'py, PyAny>) -> Option<PyReadonlyArray1<'py, i64>> {
    let arr = obj.cast::<PyArray1<i64>>().ok()?;
    let ro = arr.readonly();
    ro.as_slice().is_ok().then_some(ro)
}

/// The values of a plain int64 ndarray: exactly `numpy.ndarray` (no subclass), one dimension,
/// native int64, aligned and C-contiguous; None for anything else (the general readers take it).
/// Four field reads instead of a checked cast's type, dimension and dtype-equivalence calls.
///
/// # Safety
/// The slice aliases the array's buffer: read it with the GIL held and before any Python code
/// runs (nothing else can write it meanwhile), and do not keep it.
#[inline]
pub(crate) unsafe fn plain_i64<'a>(obj: &'a Bound<'_, PyAny>) -> Option<&'a [i64]> {
    use numpy::npyffi::{
        get_type_object, NpyTypes, PyArrayObject, NPY_ARRAY_ALIGNED, NPY_ARRAY_C_CONTIGUOUS,
    };
    use numpy::{Element, PyArrayDescrMethods};
    static INT64: pyo3::sync::PyOnceLock<usize> = pyo3::sync::PyOnceLock::new();
    let py = obj.py();
    let ptr = obj.as_ptr();
    // SAFETY: `ptr` is a live object; its fields are read only once its type is numpy's ndarray.
    unsafe {
        if pyo3::ffi::Py_TYPE(ptr) != get_type_object(py, NpyTypes::PyArray_Type) {
            return None;
        }
        let array = &(*ptr.cast::<PyArrayObject>()).fields;
        let int64 = *INT64.get_or_init(py, || i64::get_dtype(py).as_dtype_ptr() as usize);
        let wanted = NPY_ARRAY_ALIGNED | NPY_ARRAY_C_CONTIGUOUS;
        if array.nd != 1 || array.descr as usize != int64 || array.flags & wanted != wanted {
            return None;
        }
        let len = usize::try_from(*array.dimensions).ok()?;
        if len == 0 {
            return Some(&[]);
        }
        Some(std::slice::from_raw_parts(array.data.cast::<i64>(), len))
    }
}

/// Arrays up to this long are copied rather than borrowed: a copy costs less than a borrow's
/// bookkeeping (a per-event call's columns are a handful of ids).
const COPY_BELOW: usize = 256;

/// A short contiguous int64 array, copied (no borrow taken).
fn short_i64(obj: &Bound<'_, PyAny>) -> Option<Vec<i64>> {
    // SAFETY: copied at once, with the GIL held and no Python code run in between.
    if let Some(v) = unsafe { plain_i64(obj) } {
        return (v.len() <= COPY_BELOW).then(|| v.to_vec());
    }
    let arr = obj.cast::<PyArray1<i64>>().ok()?;
    if PyUntypedArrayMethods::len(arr) > COPY_BELOW {
        return None;
    }
    arr.to_vec().ok()
}

/// Extracts one id column from numpy, Arrow, or any sequence of ints.
pub fn column<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Column<'py>> {
    if let Some(v) = short_i64(obj) {
        return Ok(Column::Owned(v));
    }
    if let Some(ro) = contiguous_i64(obj) {
        return Ok(Column::Borrowed(ro));
    }
    let py = obj.py();
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        // Python ints already exist one by one; reading them directly keeps exact errors
        // (numpy would infer float64 for a list mixing -1 and 2**63).
        let mut out = Vec::with_capacity(obj.len()?);
        for item in obj.try_iter()? {
            out.push(int_arg(&item?, what)?);
        }
        return Ok(Column::Owned(out));
    }
    let np = py.import("numpy")?;
    let arr = np.call_method1("asarray", (obj,)).map_err(|e| {
        InvalidInputType::new_err(format!(
            "{what} must be an integer array or sequence of ints ({e})"
        ))
    })?;
    let ndim: usize = arr.getattr("ndim")?.extract()?;
    if ndim != 1 {
        return Err(InvalidInputType::new_err(format!(
            "{what} must be one-dimensional, got {ndim} dimensions"
        )));
    }
    let size: usize = arr.getattr("size")?.extract()?;
    if size == 0 {
        return Ok(Column::Owned(Vec::new()));
    }
    let dtype = arr.getattr("dtype")?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    match kind.as_str() {
        "i" | "u" => {
            if kind == "u" && dtype.getattr("itemsize")?.extract::<usize>()? == 8 {
                let top: u64 = arr.call_method0("max")?.extract()?;
                if top > i64::MAX as u64 {
                    return Err(InvalidPosition::new_err(format!(
                        "{what} holds {top}, beyond the int64 range"
                    )));
                }
            }
            let converted = np.call_method1("ascontiguousarray", (arr, "int64"))?;
            contiguous_i64(&converted)
                .map(Column::Borrowed)
                .ok_or_else(|| {
                    InvalidInputType::new_err(format!("{what} could not be viewed as int64"))
                })
        }
        "O" => {
            let mut out = Vec::with_capacity(size);
            for item in arr.try_iter()? {
                out.push(int_arg(&item?, what)?);
            }
            Ok(Column::Owned(out))
        }
        _ => {
            let shown = dtype.str().map_or_else(|_| kind.clone(), |s| s.to_string());
            Err(InvalidInputType::new_err(format!(
                "{what} must hold integers, got dtype {shown}"
            )))
        }
    }
}

/// `{ledger_id: entry_count}` from any mapping, or `None`.
pub fn ledger_sizes(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<BTreeMap<i64, u64>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(None);
    };
    let mapping = obj.cast::<PyMapping>().map_err(|_| {
        InvalidInputType::new_err(
            "ledger_sizes must be a mapping {ledger_id: entry_count}".to_owned(),
        )
    })?;
    let mut out = BTreeMap::new();
    for item in mapping.items()?.try_iter()? {
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item?.extract()?;
        let ledger = int_arg(&k, "ledger id in ledger_sizes")?;
        let size = int_arg(&v, "ledger size")?;
        let size = u64::try_from(size).map_err(|_| {
            InvalidArgument::new_err(format!("ledger {ledger} has negative size {size}"))
        })?;
        out.insert(ledger, size);
    }
    Ok(Some(out))
}

/// Bytes from `bytes`, `bytearray` or `memoryview`; anything else is `InvalidInputType`.
pub fn bytes_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if obj.is_instance_of::<PyByteArray>() || obj.is_instance_of::<PyMemoryView>() {
        let b = obj.py().get_type::<PyBytes>().call1((obj,))?;
        return Ok(b.cast::<PyBytes>()?.as_bytes().to_vec());
    }
    Err(wrong_type(obj, what, "bytes"))
}

/// A `str` argument; anything else is `InvalidInputType`.
pub fn str_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    match obj.cast::<PyString>() {
        Ok(s) => Ok(s.to_str()?.to_owned()),
        Err(_) => Err(wrong_type(obj, what, "a str")),
    }
}

/// A `bool` argument; anything else is `InvalidInputType`.
pub fn bool_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<bool> {
    match obj.cast::<PyBool>() {
        Ok(b) => Ok(b.is_true()),
        Err(_) => Err(wrong_type(obj, what, "a bool")),
    }
}

/// A batch index or size: a non-negative int below 2^32, else `InvalidArgument`.
pub fn u32_arg(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<u32> {
    let v = int_arg(obj, what)?;
    u32::try_from(v)
        .map_err(|_| InvalidArgument::new_err(format!("{what} must be in 0..2^32, got {v}")))
}

/// The name of an object's type, for messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// `InvalidInputType`: `what` must be `expected`, and names the type it got.
#[cold]
pub(crate) fn wrong_type(obj: &Bound<'_, PyAny>, what: &str, expected: &str) -> PyErr {
    let got = type_name(obj);
    InvalidInputType::new_err(format!("{what} must be {expected}, got {got}"))
}
