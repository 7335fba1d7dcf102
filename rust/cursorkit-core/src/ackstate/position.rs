//! `Position`: one (ledger, entry) address in a topic, and the id limits every structure enforces.

use std::fmt;
use std::str::FromStr;

use crate::error::{CoreError, Result};

/// Highest entry id a bitmap can hold (entry ids are `u32` in bitmaps, as in Pulsar's `LongBitmap`).
pub const MAX_ENTRY_ID: i64 = u32::MAX as i64;

/// An immutable `(ledger_id, entry_id)` pair ordered by ledger, then entry.
///
/// Entry `-1` is legal: it is the open lower bound of a range that starts at entry 0, and the
/// mark-delete position of a cursor that has acknowledged nothing in a ledger.
///
/// ```
/// use cursorkit_core::Position;
/// let p: Position = "3:5".parse().unwrap();
/// assert_eq!(p, Position::new(3, 5).unwrap());
/// assert!(Position::new(3, -1).unwrap() < p);
/// assert_eq!(p.to_string(), "3:5");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// Ledger id, `0..2^63`.
    pub ledger_id: i64,
    /// Entry id, `-1..2^63`.
    pub entry_id: i64,
}

impl Position {
    /// A validated position: ledger ≥ 0 and entry ≥ -1.
    pub fn new(ledger_id: i64, entry_id: i64) -> Result<Self> {
        check_ledger(ledger_id)?;
        if entry_id < -1 {
            return Err(CoreError::InvalidPosition(format!(
                "entry id {entry_id} is below -1 (position {ledger_id}:{entry_id})"
            )));
        }
        Ok(Self {
            ledger_id,
            entry_id,
        })
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.ledger_id, self.entry_id)
    }
}

impl FromStr for Position {
    type Err = CoreError;

    fn from_str(text: &str) -> Result<Self> {
        let bad =
            || CoreError::InvalidPosition(format!("cannot parse {text:?} as a position \"L:E\""));
        let (l, e) = text.trim().split_once(':').ok_or_else(bad)?;
        let ledger = l.trim().parse::<i64>().map_err(|_| bad())?;
        let entry = e.trim().parse::<i64>().map_err(|_| bad())?;
        Self::new(ledger, entry)
    }
}

/// Checks a ledger id (`0..2^63`).
#[inline]
pub fn check_ledger(ledger_id: i64) -> Result<i64> {
    if ledger_id < 0 {
        return Err(CoreError::InvalidPosition(format!(
            "ledger id {ledger_id} is negative (ledger ids are 0..2^63-1)"
        )));
    }
    Ok(ledger_id)
}

/// Checks an entry id that must name an entry (`0..=u32::MAX`).
#[inline]
pub fn check_entry(ledger_id: i64, entry_id: i64) -> Result<u32> {
    check_ledger(ledger_id)?;
    if !(0..=MAX_ENTRY_ID).contains(&entry_id) {
        return Err(CoreError::InvalidPosition(format!(
            "entry id {entry_id} of position {ledger_id}:{entry_id} is outside 0..=4294967295"
        )));
    }
    Ok(entry_id as u32)
}

/// [`check_entry`] for every row of two columns of equal length: one branch-free pass over each
/// column, then a second pass only to name the first bad row.
pub fn check_entries(ledgers: &[i64], entries: &[i64]) -> Result<()> {
    let signs = ledgers.iter().fold(0i64, |acc, &l| acc | l);
    let high = entries.iter().fold(0u64, |acc, &e| acc | e as u64);
    if signs >= 0 && high <= MAX_ENTRY_ID as u64 {
        return Ok(());
    }
    for (&l, &e) in ledgers.iter().zip(entries) {
        check_entry(l, e)?;
    }
    Ok(())
}

/// Checks an entry id used as a bound (`-1..=u32::MAX`).
#[inline]
pub fn check_bound(ledger_id: i64, entry_id: i64) -> Result<i64> {
    check_ledger(ledger_id)?;
    if !(-1..=MAX_ENTRY_ID).contains(&entry_id) {
        return Err(CoreError::InvalidPosition(format!(
            "entry id {entry_id} of position {ledger_id}:{entry_id} is outside -1..=4294967295"
        )));
    }
    Ok(entry_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_checks_agree_with_row_checks() {
        let max = MAX_ENTRY_ID;
        let rows: [(i64, i64); 9] = [
            (0, 0),
            (i64::MAX, max),
            (-1, 0),
            (0, -1),
            (0, max + 1),
            (i64::MIN, 0),
            (5, i64::MIN),
            (5, i64::MAX),
            (1, 2),
        ];
        for a in 0..rows.len() {
            for b in 0..rows.len() {
                let (ls, es): (Vec<i64>, Vec<i64>) = [rows[a], (3, 3), rows[b]].into_iter().unzip();
                let want = ls
                    .iter()
                    .zip(&es)
                    .map(|(&l, &e)| check_entry(l, e).map(|_| ()))
                    .find(Result::is_err)
                    .unwrap_or(Ok(()));
                assert_eq!(
                    check_entries(&ls, &es).map_err(|e| e.to_string()),
                    want.map_err(|e| e.to_string())
                );
            }
        }
        assert!(check_entries(&[], &[]).is_ok());
    }

    #[test]
    fn orders_by_ledger_then_entry() {
        let a = Position::new(1, 100).unwrap();
        let b = Position::new(2, -1).unwrap();
        assert!(a < b);
    }

    #[test]
    fn parses_and_rejects() {
        assert_eq!(
            "7:-1".parse::<Position>().unwrap(),
            Position::new(7, -1).unwrap()
        );
        assert!("7".parse::<Position>().is_err());
        assert!("-1:0".parse::<Position>().is_err());
        assert!("1:-2".parse::<Position>().is_err());
        assert!("a:b".parse::<Position>().is_err());
    }

    #[test]
    fn checks_entry_limits() {
        assert!(check_entry(0, MAX_ENTRY_ID).is_ok());
        assert!(check_entry(0, MAX_ENTRY_ID + 1).is_err());
        assert!(check_entry(0, -1).is_err());
        assert!(check_bound(0, -1).is_ok());
        assert!(check_bound(0, -2).is_err());
        assert!(check_bound(-1, 0).is_err());
    }
}
