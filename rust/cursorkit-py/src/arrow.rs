//! Reading Arrow binary and string columns through the Arrow C data interface (the PyCapsule
//! protocol: `__arrow_c_array__`/`__arrow_c_stream__`), without pyarrow and without a copy. This
//! file and `alloc.rs` hold the binding's `unsafe` for foreign memory.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::{self, NonNull};

use cursorkit_core::{sticky_key_hash, CoreError, Offset};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

use crate::errors::{InvalidArgument, InvalidInputType};

/// `struct ArrowSchema` of the Arrow C data interface.
#[repr(C)]
struct FfiSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut FfiSchema,
    dictionary: *mut FfiSchema,
    release: Option<unsafe extern "C" fn(*mut FfiSchema)>,
    private_data: *mut c_void,
}

/// `struct ArrowArray` of the Arrow C data interface.
#[repr(C)]
struct FfiArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut FfiArray,
    dictionary: *mut FfiArray,
    release: Option<unsafe extern "C" fn(*mut FfiArray)>,
    private_data: *mut c_void,
}

/// `struct ArrowArrayStream` of the Arrow C stream interface.
#[repr(C)]
struct FfiStream {
    get_schema: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiSchema) -> c_int>,
    get_next: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiArray) -> c_int>,
    get_last_error: Option<unsafe extern "C" fn(*mut FfiStream) -> *const c_char>,
    release: Option<unsafe extern "C" fn(*mut FfiStream)>,
    private_data: *mut c_void,
}

impl FfiSchema {
    fn released() -> Self {
        Self {
            format: ptr::null(),
            name: ptr::null(),
            metadata: ptr::null(),
            flags: 0,
            n_children: 0,
            children: ptr::null_mut(),
            dictionary: ptr::null_mut(),
            release: None,
            private_data: ptr::null_mut(),
        }
    }
}

impl FfiArray {
    fn released() -> Self {
        Self {
            length: 0,
            null_count: 0,
            offset: 0,
            n_buffers: 0,
            n_children: 0,
            buffers: ptr::null_mut(),
            children: ptr::null_mut(),
            dictionary: ptr::null_mut(),
            release: None,
            private_data: ptr::null_mut(),
        }
    }
}

/// A schema this code received from a stream and must release.
struct OwnedSchema(FfiSchema);

impl Drop for OwnedSchema {
    fn drop(&mut self) {
        if let Some(release) = self.0.release {
            // SAFETY: the producer filled the struct and it has not been released yet.
            unsafe { release(&mut self.0) };
        }
    }
}

/// An array this code received from a stream and must release (Arrow allows moving it).
struct OwnedArray(FfiArray);

impl Drop for OwnedArray {
    fn drop(&mut self) {
        if let Some(release) = self.0.release {
            // SAFETY: the producer filled the struct and it has not been released yet.
            unsafe { release(&mut self.0) };
        }
    }
}

/// How one key column stores its values.
#[derive(Clone, Copy, Debug)]
enum Values {
    /// `z`/`u`: binary/string, i32 offsets.
    Small,
    /// `Z`/`U`: large_binary/large_string, i64 offsets.
    Large,
    /// `w:N`: fixed_size_binary of N bytes.
    Fixed(usize),
    /// `vz`/`vu`: binary_view/string_view (16-byte views, variadic data buffers).
    View,
}

/// The integer type of dictionary indices.
#[derive(Clone, Copy, Debug)]
enum Index {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
}

/// The key column types: plain values, or dictionary indices into such values.
#[derive(Clone, Copy, Debug)]
enum Layout {
    Plain(Values),
    Dict(Index, Values),
}

fn format_of(schema: &FfiSchema) -> String {
    if schema.format.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null format is a NUL-terminated string owned by the live schema.
        unsafe { CStr::from_ptr(schema.format) }
            .to_string_lossy()
            .into_owned()
    }
}

fn values_of(format: &str) -> Option<Values> {
    match format {
        "z" | "u" => Some(Values::Small),
        "Z" | "U" => Some(Values::Large),
        "vz" | "vu" => Some(Values::View),
        _ => format
            .strip_prefix("w:")
            .and_then(|n| n.parse::<usize>().ok())
            .map(Values::Fixed),
    }
}

fn index_of(format: &str) -> Option<Index> {
    Some(match format {
        "c" => Index::I8,
        "C" => Index::U8,
        "s" => Index::I16,
        "S" => Index::U16,
        "i" => Index::I32,
        "I" => Index::U32,
        "l" => Index::I64,
        "L" => Index::U64,
        _ => return None,
    })
}

fn layout(schema: &FfiSchema) -> PyResult<Layout> {
    let format = format_of(schema);
    let found = if schema.dictionary.is_null() {
        values_of(&format).map(Layout::Plain)
    } else {
        // SAFETY: a non-null dictionary is a live schema owned by the parent.
        let values = format_of(unsafe { &*schema.dictionary });
        index_of(&format)
            .zip(values_of(&values))
            .map(|(i, v)| Layout::Dict(i, v))
    };
    found.ok_or_else(|| {
        InvalidInputType::new_err(format!(
            "keys must be an Arrow binary, large_binary, fixed_size_binary, string, \
                 large_string, binary_view or string_view array (or a dictionary of one), \
                 got Arrow format {format:?}{}",
            if schema.dictionary.is_null() {
                ""
            } else {
                " (dictionary-encoded)"
            }
        ))
    })
}

/// What `keys` exported: one array (held by its capsules) or the arrays of a stream.
enum Source<'py> {
    Array {
        _schema: Bound<'py, PyCapsule>,
        array: Bound<'py, PyCapsule>,
        layout: Layout,
    },
    Stream {
        arrays: Vec<OwnedArray>,
        layout: Layout,
    },
}

/// An Arrow key column exported by a Python object; its buffers stay valid while it lives.
pub struct ArrowInput<'py> {
    source: Source<'py>,
}

fn capsule<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyCapsule>> {
    obj.cast::<PyCapsule>().cloned().map_err(|_| {
        InvalidInputType::new_err(format!(
            "the Arrow export did not return an {name} PyCapsule"
        ))
    })
}

impl<'py> ArrowInput<'py> {
    /// Exports `obj` through `__arrow_c_array__` (preferred) or `__arrow_c_stream__`;
    /// `None` when it has neither.
    pub fn open(obj: &Bound<'py, PyAny>) -> PyResult<Option<Self>> {
        let py = obj.py();
        if obj.hasattr(pyo3::intern!(py, "__arrow_c_array__"))? {
            let pair = obj.call_method0(pyo3::intern!(py, "__arrow_c_array__"))?;
            let pair = pair.cast::<PyTuple>().map_err(|_| {
                InvalidInputType::new_err(
                    "__arrow_c_array__ did not return a (schema, array) tuple".to_owned(),
                )
            })?;
            let (schema, array): (Bound<'py, PyAny>, Bound<'py, PyAny>) = pair.extract()?;
            let schema = capsule(&schema, "arrow_schema")?;
            let array = capsule(&array, "arrow_array")?;
            let schema_ptr: NonNull<FfiSchema> =
                schema.pointer_checked(Some(c"arrow_schema"))?.cast();
            array.pointer_checked(Some(c"arrow_array"))?;
            // SAFETY: the capsule named "arrow_schema" holds a live ArrowSchema (PyCapsule protocol).
            let layout = layout(unsafe { schema_ptr.as_ref() })?;
            return Ok(Some(Self {
                source: Source::Array {
                    _schema: schema,
                    array,
                    layout,
                },
            }));
        }
        if obj.hasattr(pyo3::intern!(py, "__arrow_c_stream__"))? {
            let stream = obj.call_method0(pyo3::intern!(py, "__arrow_c_stream__"))?;
            let stream = capsule(&stream, "arrow_array_stream")?;
            let stream_ptr: NonNull<FfiStream> =
                stream.pointer_checked(Some(c"arrow_array_stream"))?.cast();
            let (arrays, layout) = read_stream(stream_ptr.as_ptr())?;
            drop(stream); // the arrays outlive the stream (C stream interface)
            return Ok(Some(Self {
                source: Source::Stream { arrays, layout },
            }));
        }
        Ok(None)
    }

    /// The key columns (one per chunk), checked: no nulls, sane lengths and buffers.
    pub fn columns(&self, py: Python<'_>) -> PyResult<Vec<KeyColumn<'_>>> {
        match &self.source {
            Source::Array { array, layout, .. } => {
                let ptr: NonNull<FfiArray> = array.pointer_checked(Some(c"arrow_array"))?.cast();
                // SAFETY: the capsule holds a live ArrowArray for as long as `self` holds it.
                let array = unsafe { ptr.as_ref() };
                Ok(vec![KeyColumn::new(py, array, *layout, 0)?])
            }
            Source::Stream { arrays, layout } => {
                let mut base = 0usize;
                let mut out = Vec::with_capacity(arrays.len());
                for a in arrays {
                    let col = KeyColumn::new(py, &a.0, *layout, base)?;
                    base += col.len();
                    out.push(col);
                }
                Ok(out)
            }
        }
    }
}

fn stream_error(stream: *mut FfiStream, rc: c_int, what: &str) -> PyErr {
    // SAFETY: `stream` is live; get_last_error returns null or a string valid until the next call.
    let detail = unsafe {
        (*stream)
            .get_last_error
            .map(|f| f(stream))
            .filter(|p| !p.is_null())
            .map(|p| CStr::from_ptr(p).to_string_lossy().into_owned())
    };
    InvalidArgument::new_err(format!(
        "the Arrow stream failed in {what} (error {rc}): {}",
        detail.unwrap_or_else(|| "no message".to_owned())
    ))
}

/// Reads every array of a live stream, after checking its schema.
fn read_stream(stream: *mut FfiStream) -> PyResult<(Vec<OwnedArray>, Layout)> {
    // SAFETY: the capsule named "arrow_array_stream" holds a live ArrowArrayStream; its
    // callbacks are called as the C stream interface prescribes, with the GIL held.
    unsafe {
        let (Some(get_schema), Some(get_next)) = ((*stream).get_schema, (*stream).get_next) else {
            return Err(InvalidArgument::new_err(
                "the Arrow stream is already released".to_owned(),
            ));
        };
        let mut schema = OwnedSchema(FfiSchema::released());
        let rc = get_schema(stream, &mut schema.0);
        if rc != 0 {
            return Err(stream_error(stream, rc, "get_schema"));
        }
        let layout = layout(&schema.0)?;
        let mut arrays = Vec::new();
        loop {
            let mut array = OwnedArray(FfiArray::released());
            let rc = get_next(stream, &mut array.0);
            if rc != 0 {
                return Err(stream_error(stream, rc, "get_next"));
            }
            if array.0.release.is_none() {
                return Ok((arrays, layout));
            }
            arrays.push(array);
        }
    }
}

/// Arrow offsets of either width.
pub enum Offsets<'a> {
    Small(&'a [i32]),
    Large(&'a [i64]),
}

/// Dictionary indices of any integer width.
pub enum Indices<'a> {
    I8(&'a [i8]),
    U8(&'a [u8]),
    I16(&'a [i16]),
    U16(&'a [u16]),
    I32(&'a [i32]),
    U32(&'a [u32]),
    I64(&'a [i64]),
    U64(&'a [u64]),
}

/// One chunk's keys, read in place from the producer's buffers.
pub enum KeyColumn<'a> {
    /// Values and the chunk's `len + 1` offsets into them.
    Offsets {
        values: &'a [u8],
        offsets: Offsets<'a>,
    },
    /// `len` keys of `width` bytes each.
    Fixed {
        values: &'a [u8],
        width: usize,
        len: usize,
    },
    /// 16-byte views into inline bytes or the data buffers.
    View {
        views: &'a [u8],
        buffers: Vec<&'a [u8]>,
    },
    /// Indices into a dictionary of keys (hashed once each).
    Dict {
        indices: Indices<'a>,
        dictionary: Box<KeyColumn<'a>>,
    },
}

fn corrupt(msg: String) -> PyErr {
    InvalidArgument::new_err(format!("malformed Arrow array: {msg}"))
}

/// The first index in `[offset, offset + length)` whose validity bit is clear.
fn first_null(bitmap: &[u8], offset: usize, length: usize) -> Option<usize> {
    let end = offset + length;
    let mut i = offset;
    while i < end {
        let byte = bitmap.get(i / 8).copied().unwrap_or(0);
        if i.is_multiple_of(8) && i + 8 <= end && byte == 0xFF {
            i += 8;
            continue;
        }
        if byte & (1 << (i % 8)) == 0 {
            return Some(i - offset);
        }
        i += 1;
    }
    None
}

/// Buffer `i` of `array` (the caller checked `n_buffers`).
fn buffer(array: &FfiArray, i: usize) -> *const c_void {
    // SAFETY: `i < n_buffers`, and `buffers` holds `n_buffers` pointers.
    unsafe { *array.buffers.add(i) }
}

/// `count` elements of `T` starting at element `offset` of a buffer (checked for alignment).
fn typed<'a, T>(ptr: *const c_void, offset: usize, count: usize, what: &str) -> PyResult<&'a [T]> {
    if count == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() || !ptr.cast::<T>().is_aligned() {
        return Err(corrupt(format!("a missing or misaligned {what} buffer")));
    }
    let Some(end) = offset.checked_add(count) else {
        return Err(corrupt(format!("{what} offset {offset} + count {count}")));
    };
    // SAFETY: the producer's buffer holds `offset + count` elements (Arrow C data interface).
    let all = unsafe { std::slice::from_raw_parts(ptr.cast::<T>(), end) };
    all.get(offset..)
        .ok_or_else(|| corrupt(format!("a {what} buffer shorter than its offset")))
}

impl<'a> KeyColumn<'a> {
    /// Views the buffers of `array` (a live ArrowArray of `layout`); `base` is the index of
    /// its first key in the whole input, for messages.
    fn new(py: Python<'_>, array: &'a FfiArray, layout: Layout, base: usize) -> PyResult<Self> {
        let (Ok(length), Ok(offset)) =
            (usize::try_from(array.length), usize::try_from(array.offset))
        else {
            return Err(corrupt(format!(
                "length {} and offset {}",
                array.length, array.offset
            )));
        };
        let Some(span) = offset.checked_add(length) else {
            return Err(corrupt(format!("offset {offset} + length {length}")));
        };
        let n_buffers = usize::try_from(array.n_buffers).unwrap_or(0);
        let expected = match layout {
            Layout::Plain(Values::Small | Values::Large) => n_buffers == 3,
            Layout::Plain(Values::Fixed(_)) | Layout::Dict(..) => n_buffers == 2,
            Layout::Plain(Values::View) => n_buffers >= 3,
        };
        if length > 0 && (!expected || array.buffers.is_null() || array.n_children != 0) {
            return Err(corrupt(format!(
                "{} buffers and {} children",
                array.n_buffers, array.n_children
            )));
        }
        if length > 0 && array.null_count != 0 {
            let validity = buffer(array, 0);
            if !validity.is_null() {
                // SAFETY: the validity bitmap covers bits [0, offset + length).
                let bitmap =
                    unsafe { std::slice::from_raw_parts(validity.cast::<u8>(), span.div_ceil(8)) };
                if let Some(i) = first_null(bitmap, offset, length) {
                    return Err(InvalidArgument::new_err(format!(
                        "key {} is null: a message without a key hashes its sticky key \
                             (see sticky_key())",
                        base + i
                    )));
                }
            }
        }
        match layout {
            Layout::Plain(values) => Self::plain(array, values, offset, length),
            Layout::Dict(index, values) => {
                let indices =
                    Self::indices(buffer_or_null(array, length, 1), index, offset, length)?;
                if array.dictionary.is_null() {
                    return Err(corrupt(
                        "a dictionary array without its dictionary".to_owned(),
                    ));
                }
                // SAFETY: a non-null dictionary is a live ArrowArray owned by its parent.
                let dict = unsafe { &*array.dictionary };
                let dictionary =
                    KeyColumn::new(py, dict, Layout::Plain(values), 0).map_err(|e| {
                        InvalidArgument::new_err(format!(
                            "the dictionary of the keys: {}",
                            e.value(py)
                        ))
                    })?;
                Ok(Self::Dict {
                    indices,
                    dictionary: Box::new(dictionary),
                })
            }
        }
    }

    fn plain(array: &'a FfiArray, values: Values, offset: usize, length: usize) -> PyResult<Self> {
        if length == 0 {
            return Ok(Self::Offsets {
                values: &[],
                offsets: Offsets::Small(&[]),
            });
        }
        match values {
            Values::Small | Values::Large => {
                let offsets = match values {
                    Values::Small => {
                        Offsets::Small(offsets_slice(buffer(array, 1), offset, length)?)
                    }
                    _ => Offsets::Large(offsets_slice(buffer(array, 1), offset, length)?),
                };
                let end = match offsets {
                    Offsets::Small(o) => o.get(length).and_then(|x| x.index()),
                    Offsets::Large(o) => o.get(length).and_then(|x| x.index()),
                }
                .ok_or_else(|| corrupt("a negative last offset".to_owned()))?;
                let data = buffer(array, 2);
                let values = if end == 0 {
                    &[][..]
                } else if data.is_null() {
                    return Err(corrupt("no values buffer".to_owned()));
                } else {
                    // SAFETY: the values buffer holds at least the last offset's bytes.
                    unsafe { std::slice::from_raw_parts(data.cast::<u8>(), end) }
                };
                Ok(Self::Offsets { values, offsets })
            }
            Values::Fixed(width) => {
                let (Some(start), Some(count)) =
                    (offset.checked_mul(width), length.checked_mul(width))
                else {
                    return Err(corrupt(format!("{length} keys of {width} bytes")));
                };
                let values = typed::<u8>(buffer(array, 1), start, count, "values")?;
                Ok(Self::Fixed {
                    values,
                    width,
                    len: length,
                })
            }
            Values::View => {
                let n_data = usize::try_from(array.n_buffers)
                    .unwrap_or(0)
                    .saturating_sub(3);
                let sizes = typed::<i64>(buffer(array, 2 + n_data), 0, n_data, "variadic sizes")?;
                let mut buffers = Vec::with_capacity(n_data);
                for (k, &size) in sizes.iter().enumerate() {
                    let size = usize::try_from(size)
                        .map_err(|_| corrupt(format!("data buffer {k} of size {size}")))?;
                    buffers.push(typed::<u8>(buffer(array, 2 + k), 0, size, "data")?);
                }
                let (Some(start), Some(count)) = (offset.checked_mul(16), length.checked_mul(16))
                else {
                    return Err(corrupt(format!("{length} views")));
                };
                let views = typed::<u8>(buffer(array, 1), start, count, "views")?;
                Ok(Self::View { views, buffers })
            }
        }
    }

    fn indices(
        ptr: *const c_void,
        index: Index,
        offset: usize,
        length: usize,
    ) -> PyResult<Indices<'a>> {
        let what = "indices";
        Ok(match index {
            Index::I8 => Indices::I8(typed(ptr, offset, length, what)?),
            Index::U8 => Indices::U8(typed(ptr, offset, length, what)?),
            Index::I16 => Indices::I16(typed(ptr, offset, length, what)?),
            Index::U16 => Indices::U16(typed(ptr, offset, length, what)?),
            Index::I32 => Indices::I32(typed(ptr, offset, length, what)?),
            Index::U32 => Indices::U32(typed(ptr, offset, length, what)?),
            Index::I64 => Indices::I64(typed(ptr, offset, length, what)?),
            Index::U64 => Indices::U64(typed(ptr, offset, length, what)?),
        })
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        match self {
            Self::Offsets { offsets, .. } => match offsets {
                Offsets::Small(o) => o.len().saturating_sub(1),
                Offsets::Large(o) => o.len().saturating_sub(1),
            },
            Self::Fixed { len, .. } => *len,
            Self::View { views, .. } => views.len() / 16,
            Self::Dict { indices, .. } => match indices {
                Indices::I8(i) => i.len(),
                Indices::U8(i) => i.len(),
                Indices::I16(i) => i.len(),
                Indices::U16(i) => i.len(),
                Indices::I32(i) => i.len(),
                Indices::U32(i) => i.len(),
                Indices::I64(i) => i.len(),
                Indices::U64(i) => i.len(),
            },
        }
    }

    /// The sticky-key hash of each key (offsets, views and indices checked against their buffers).
    pub fn hash(&self) -> Result<Vec<u32>, CoreError> {
        match self {
            Self::Offsets { values, offsets } => match offsets {
                Offsets::Small(o) => cursorkit_core::hash_many(values, o),
                Offsets::Large(o) => cursorkit_core::hash_many(values, o),
            },
            Self::Fixed { values, width, len } => Ok(if *width == 0 {
                vec![sticky_key_hash(&[]); *len]
            } else {
                values.chunks_exact(*width).map(sticky_key_hash).collect()
            }),
            Self::View { views, buffers } => views
                .chunks_exact(16)
                .enumerate()
                .map(|(i, v)| {
                    view_key(v, buffers)
                        .map(sticky_key_hash)
                        .ok_or_else(|| bad_view(i))
                })
                .collect(),
            Self::Dict {
                indices,
                dictionary,
            } => {
                let hashes = dictionary.hash()?;
                match indices {
                    Indices::I8(x) => gather(&hashes, x),
                    Indices::U8(x) => gather(&hashes, x),
                    Indices::I16(x) => gather(&hashes, x),
                    Indices::U16(x) => gather(&hashes, x),
                    Indices::I32(x) => gather(&hashes, x),
                    Indices::U32(x) => gather(&hashes, x),
                    Indices::I64(x) => gather(&hashes, x),
                    Indices::U64(x) => gather(&hashes, x),
                }
            }
        }
    }
}

/// Buffer `i`, or null for an empty array (which may export no buffers).
fn buffer_or_null(array: &FfiArray, length: usize, i: usize) -> *const c_void {
    if length == 0 {
        ptr::null()
    } else {
        buffer(array, i)
    }
}

/// The bytes a 16-byte Arrow view names: inline (at most 12), or a slice of a data buffer.
fn view_key<'a>(view: &'a [u8], buffers: &[&'a [u8]]) -> Option<&'a [u8]> {
    let word = |at: usize| -> Option<i32> {
        Some(i32::from_le_bytes(view.get(at..at + 4)?.try_into().ok()?))
    };
    let len = usize::try_from(word(0)?).ok()?;
    if len <= 12 {
        return view.get(4..4 + len);
    }
    let buffer = buffers.get(usize::try_from(word(8)?).ok()?)?;
    let start = usize::try_from(word(12)?).ok()?;
    buffer.get(start..start.checked_add(len)?)
}

#[cold]
fn bad_view(i: usize) -> CoreError {
    CoreError::InvalidArgument(format!(
        "malformed Arrow array: view {i} points outside its data buffers"
    ))
}

/// Each index's dictionary hash; an index outside the dictionary is refused.
fn gather<T: Copy + TryInto<usize>>(hashes: &[u32], indices: &[T]) -> Result<Vec<u32>, CoreError> {
    indices
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            x.try_into()
                .ok()
                .and_then(|k: usize| hashes.get(k).copied())
                .ok_or_else(|| {
                    CoreError::InvalidArgument(format!(
                        "malformed Arrow array: index {i} is outside the dictionary of {} keys",
                        hashes.len()
                    ))
                })
        })
        .collect()
}

/// The `length + 1` offsets of a chunk starting at `offset`, checked for alignment.
fn offsets_slice<'a, O>(buffer: *const c_void, offset: usize, length: usize) -> PyResult<&'a [O]> {
    if buffer.is_null() || !buffer.cast::<O>().is_aligned() {
        return Err(corrupt("a missing or misaligned offsets buffer".to_owned()));
    }
    // SAFETY: the offsets buffer holds `offset + length + 1` aligned entries.
    let all = unsafe { std::slice::from_raw_parts(buffer.cast::<O>(), offset + length + 1) };
    all.get(offset..)
        .ok_or_else(|| corrupt("an offsets buffer shorter than its offset".to_owned()))
}
