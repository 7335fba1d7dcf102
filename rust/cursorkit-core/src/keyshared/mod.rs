//! Key_Shared dispatch: sticky-key [`hash`]ing and slots, the hash-range [`selector`]s, PIP-379's
//! [`draining`] hashes and the [`dispatch`] core.

pub mod dispatch;
pub mod draining;
pub mod hash;
pub mod selector;
