//! Randomness, read at the edge like the clock (the domain reads neither). Two rules, named by
//! what the bytes are for, so that a caller says which it needs:
//! - [`secret`]: key material and anything a client must not guess. When the operating
//!   system's CSPRNG fails the host is broken and there is no safe fallback: it is an error
//!   (a route answers 500).
//! - [`unique`] and [`unique_hex`]: ids that only must not collide (turn and action ids, which
//!   are never credentials). They fall back to the clock rather than stop a turn midway.

use std::time::{SystemTime, UNIX_EPOCH};

/// `N` bytes from the operating system's CSPRNG.
pub fn secret<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut buf = [0u8; N];
    getrandom::fill(&mut buf)?;
    Ok(buf)
}

fn clock_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// `N` random bytes for an id that must not collide; the clock's when the CSPRNG fails.
pub fn unique<const N: usize>() -> [u8; N] {
    secret().unwrap_or_else(|_| {
        let nanos = clock_nanos();
        let mut buf = [0u8; N];
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (nanos >> ((i % 16) * 8)) as u8;
        }
        buf
    })
}

/// [`unique`] bytes as lowercase hex.
pub fn unique_hex<const N: usize>() -> String {
    match secret::<N>() {
        Ok(buf) => buf.iter().map(|b| format!("{b:02x}")).collect(),
        Err(_) => format!("{:x}", clock_nanos()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_hex_is_two_digits_a_byte_and_differs_each_time() {
        let (a, b) = (unique_hex::<12>(), unique_hex::<12>());
        assert_eq!(a.len(), 24);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }
}
