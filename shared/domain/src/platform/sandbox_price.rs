//! The price of a sandbox-second (`AGENTPLANE_SANDBOX_USD_PER_SECOND`) and a Run's
//! `sandboxAmountUsd`: measured milliseconds × that price, exact, as a decimal string. No
//! floating point anywhere: the price is held in units of 10⁻¹² USD, the amount in units of
//! 10⁻¹⁵ USD (a millisecond is 10⁻³ s), so every product is an integer and nothing rounds.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Digits a price may carry after its point.
pub const PRICE_FRACTION_DIGITS: usize = 12;
/// Digits a price may carry before its point.
pub const PRICE_WHOLE_DIGITS: usize = 6;

const PRICE_SCALE: u128 = 1_000_000_000_000;
/// A millisecond's price is the second's in 10⁻³: amounts carry 15 fraction digits.
const AMOUNT_FRACTION_DIGITS: usize = PRICE_FRACTION_DIGITS + 3;
const AMOUNT_SCALE: u128 = PRICE_SCALE * 1000;

/// USD per sandbox-second, `0` by default; stored as its decimal string.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SandboxPrice {
    /// The price in 10⁻¹² USD.
    pico_usd: u128,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a sandbox price is a plain decimal number of USD per second: 1 to {PRICE_WHOLE_DIGITS} digits, \
     optionally a point and 1 to {PRICE_FRACTION_DIGITS} more (`0.00002`), no sign or exponent"
)]
pub struct InvalidPrice;

impl SandboxPrice {
    pub const ZERO: Self = Self { pico_usd: 0 };

    /// `"0.00002"`, `"1"`, `"0.000000000001"`; a sign, an exponent, spaces or more digits than
    /// the bounds are refused (never rounded).
    pub fn parse(text: &str) -> Result<Self, InvalidPrice> {
        let (whole, fraction) = match text.split_once('.') {
            Some((whole, fraction)) => (whole, Some(fraction)),
            None => (text, None),
        };
        let digits =
            |s: &str, max: usize| !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole, PRICE_WHOLE_DIGITS) {
            return Err(InvalidPrice);
        }
        let mut pico_usd = whole.parse::<u128>().map_err(|_| InvalidPrice)? * PRICE_SCALE;
        if let Some(fraction) = fraction {
            if !digits(fraction, PRICE_FRACTION_DIGITS) {
                return Err(InvalidPrice);
            }
            let padded = format!("{fraction:0<width$}", width = PRICE_FRACTION_DIGITS);
            pico_usd += padded.parse::<u128>().map_err(|_| InvalidPrice)?;
        }
        Ok(Self { pico_usd })
    }

    pub fn is_zero(self) -> bool {
        self.pico_usd == 0
    }

    /// The charge of `runtime_ms` sandbox milliseconds: exactly `runtime_ms / 1000 × price`, as
    /// a decimal string (`"0"`, `"0.0246"`).
    pub fn amount_usd(self, runtime_ms: u64) -> String {
        // At most 10⁶·10¹² · 1.8·10¹⁹ < 2·10³⁷: within u128.
        let units = self.pico_usd * u128::from(runtime_ms);
        decimal(units, AMOUNT_SCALE, AMOUNT_FRACTION_DIGITS)
    }
}

impl TryFrom<String> for SandboxPrice {
    type Error = InvalidPrice;

    fn try_from(text: String) -> Result<Self, InvalidPrice> {
        Self::parse(&text)
    }
}

impl From<SandboxPrice> for String {
    fn from(price: SandboxPrice) -> Self {
        price.to_string()
    }
}

impl fmt::Display for SandboxPrice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&decimal(self.pico_usd, PRICE_SCALE, PRICE_FRACTION_DIGITS))
    }
}

/// `units / scale` as the shortest exact decimal (`scale` = 10^`digits`).
fn decimal(units: u128, scale: u128, digits: usize) -> String {
    let whole = units / scale;
    let fraction = units % scale;
    if fraction == 0 {
        return whole.to_string();
    }
    let fraction = format!("{fraction:0digits$}");
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prices_are_plain_decimals() {
        for good in ["0", "1", "0.00002", "000001", "999999.999999999999", "0.000000000001", "1.0"] {
            assert!(SandboxPrice::parse(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "1.",
            ".5",
            "-1",
            "+1",
            "1e-5",
            " 1",
            "1 ",
            "0.0000000000001",
            "1000000",
            "1,5",
            "0x1",
            "NaN",
        ] {
            assert_eq!(SandboxPrice::parse(bad), Err(InvalidPrice), "{bad:?}");
        }
        assert_eq!(SandboxPrice::parse("0.000020").map(|p| p.to_string()), Ok("0.00002".into()));
        assert_eq!(SandboxPrice::default(), SandboxPrice::ZERO);
    }

    #[test]
    fn the_amount_is_seconds_times_the_price_exactly() {
        let price = |t: &str| SandboxPrice::parse(t).unwrap_or_default();
        assert_eq!(SandboxPrice::ZERO.amount_usd(123_456), "0");
        assert_eq!(price("0.00002").amount_usd(1_500), "0.00003");
        assert_eq!(price("1").amount_usd(1), "0.001");
        assert_eq!(price("0.000000000001").amount_usd(1), "0.000000000000001");
        assert_eq!(price("0.1").amount_usd(3_000), "0.3", "no binary fraction creeps in");
        assert_eq!(price("2.5").amount_usd(4_000), "10");
        assert!(price("999999.999999999999").amount_usd(u64::MAX).starts_with("18446744073709551"));
    }

    proptest! {
        /// Seconds × price, computed independently as one integer of 10⁻¹⁵ USD.
        #[test]
        fn amounts_match_integer_arithmetic(whole in 0u64..1000, fraction in 0u64..1_000_000_000_000, ms in 0u64..10_000_000_000) {
            let text = format!("{whole}.{fraction:012}");
            let price = SandboxPrice::parse(&text).unwrap_or_default();
            let units = (u128::from(whole) * PRICE_SCALE + u128::from(fraction)) * u128::from(ms);
            let amount = price.amount_usd(ms);
            let (w, f) = amount.split_once('.').unwrap_or((amount.as_str(), ""));
            prop_assert!(!f.ends_with('0'));
            let back = w.parse::<u128>().unwrap_or(u128::MAX) * AMOUNT_SCALE
                + format!("{f:0<15}").parse::<u128>().unwrap_or(u128::MAX);
            prop_assert_eq!(back, units);
        }
    }
}
