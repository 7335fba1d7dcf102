//! A protobuf wire reader for the hot commands: fields one by one, `None` at anything it does not
//! read exactly as protobuf would (truncation, a varint over 10 bytes, groups, field number 0), so
//! the caller can hand the frame to a full decoder instead.

pub(crate) const VARINT: u8 = 0;
pub(crate) const LEN: u8 = 2;

/// A cursor over one message's bytes.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    pub(crate) fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub(crate) fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for i in 0..10 {
            let byte = *self.data.get(self.pos)?;
            self.pos += 1;
            if i == 9 && byte > 1 {
                return None;
            }
            value |= u64::from(byte & 0x7F) << (7 * i);
            if byte < 0x80 {
                return Some(value);
            }
        }
        None
    }

    /// The next field's number and wire type (only VARINT, I64, LEN and I32 are read).
    pub(crate) fn key(&mut self) -> Option<(u64, u8)> {
        let key = self.varint()?;
        let wire = (key & 7) as u8;
        let field = key >> 3;
        if field == 0 || field > u64::from(u32::MAX >> 3) || !matches!(wire, 0 | 1 | 2 | 5) {
            return None;
        }
        Some((field, wire))
    }

    pub(crate) fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.varint()?).ok()?;
        let end = self.pos.checked_add(len)?;
        let out = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// Steps over a field's value of wire type `wire`.
    pub(crate) fn skip(&mut self, wire: u8) -> Option<()> {
        match wire {
            VARINT => self.varint().map(|_| ()),
            LEN => self.bytes().map(|_| ()),
            1 | 5 => {
                let width = if wire == 1 { 8 } else { 4 };
                let end = self.pos.checked_add(width)?;
                self.data.get(self.pos..end)?;
                self.pos = end;
                Some(())
            }
            _ => None,
        }
    }
}

/// An `int32` field's value as protobuf reads it from a varint (its low 32 bits, signed).
pub(crate) fn int32(value: u64) -> i32 {
    value as u32 as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_as_protobuf_reads_them() {
        assert_eq!(Reader::new(&[0x96, 0x01]).varint(), Some(150));
        let max = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01];
        assert_eq!(Reader::new(&max).varint(), Some(u64::MAX));
        let over = [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02];
        assert_eq!(Reader::new(&over).varint(), None);
        assert_eq!(Reader::new(&[0x80]).varint(), None);
        assert_eq!(int32(u64::MAX), -1);
    }

    #[test]
    fn keys_refuse_groups_and_field_zero() {
        assert_eq!(Reader::new(&[0x08]).key(), Some((1, VARINT)));
        assert_eq!(Reader::new(&[0x0B]).key(), None); // start group
        assert_eq!(Reader::new(&[0x02]).key(), None); // field 0
        assert_eq!(Reader::new(&[0x05, 1]).bytes(), None); // 5 bytes announced, 1 there
    }
}
