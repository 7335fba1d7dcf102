//! CRC-32C (Castagnoli), the checksum Pulsar frames carry over a message's metadata and payload:
//! the `crc32c` crate (hardware-accelerated where the CPU allows), continued from an earlier value.

/// The CRC-32C of `data`, continuing `value` (0 to start): `crc32c(b + c) == crc32c(c, crc32c(b))`.
pub fn crc32c(value: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(value, data)
}

#[cfg(test)]
mod tests {
    use super::crc32c;

    #[test]
    fn the_standard_check_value_and_continuation() {
        assert_eq!(crc32c(0, b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(crc32c(0, b"1234"), b"56789"), 0xE306_9283);
        assert_eq!(crc32c(0, b""), 0);
    }
}
