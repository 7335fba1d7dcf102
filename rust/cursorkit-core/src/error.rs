//! The one error type of the core; the Python binding maps each variant to a `cursorkit.errors` class.

use thiserror::Error;

/// Everything the core rejects: bad ids, mismatched columns, damaged or foreign bytes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CoreError {
    /// A ledger or entry id outside its legal range; the message names the value.
    #[error("{0}")]
    InvalidPosition(String),
    /// A position in a ledger the cursor does not know (when ledger sizes are set).
    #[error("{0}")]
    UnknownLedger(String),
    /// A usable type with an unusable value (a bad limit or name).
    #[error("{0}")]
    InvalidArgument(String),
    /// Bulk columns of different lengths.
    #[error(
        "ledger ids and entry ids differ in length: {ledgers} ledger ids, {entries} entry ids"
    )]
    LengthMismatch {
        /// Number of ledger ids given.
        ledgers: usize,
        /// Number of entry ids given.
        entries: usize,
    },
    /// Persisted bytes that are truncated, fail their checksum or do not decode.
    #[error("{0}")]
    Corrupt(String),
    /// A consumer id a Key_Shared selector does not hold.
    #[error("{0}")]
    UnknownConsumer(String),
    /// A consumer whose hash ranges cannot be assigned (Pulsar's `ConsumerAssignException`):
    /// overlapping exclusive ranges, or no auto-split range left to halve.
    #[error("{0}")]
    ConsumerAssign(String),
    /// A bug: a panic caught at the binding's guard; the message names the call.
    #[error("{0}")]
    Internal(String),
    /// Input whose decoding, or a call whose work, would pass a documented budget (named in the
    /// message); the caller may raise the budget to accept it.
    #[error("{0}")]
    Budget(String),
    /// Bytes that break Pulsar's wire protocol past recovery (a frame over the size limit, a size
    /// field that does not fit): the connection they came on has no frame boundary left.
    #[error("{0}")]
    Protocol(String),
    /// Persisted bytes of a format version this build does not read.
    #[error("unsupported format version {found} (this build reads version {supported})")]
    UnsupportedVersion {
        /// Version byte found in the data.
        found: u8,
        /// Version this build writes and reads.
        supported: u8,
    },
}

/// Result alias used across the core.
pub type Result<T> = std::result::Result<T, CoreError>;
