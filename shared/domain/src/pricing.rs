//! Token usage and its price. Prices are USD per million tokens, per model: the built-in table
//! below, extended (or overridden, model by model) by `AGENTPLANE_PRICES_FILE`. A model that is
//! in neither has no price: its tokens are counted as unpriced, never as a $0 spend.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn total_tokens(self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input_per_million: f64,
    pub output_per_million: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable(BTreeMap<String, Price>);

impl Default for PriceTable {
    /// Public list prices of common models at the time of writing; override with a file.
    fn default() -> Self {
        let prices = [
            ("gpt-4o", 2.50, 10.00),
            ("gpt-4o-mini", 0.15, 0.60),
            ("gpt-4.1", 2.00, 8.00),
            ("gpt-4.1-mini", 0.40, 1.60),
            ("gpt-4.1-nano", 0.10, 0.40),
            ("o4-mini", 1.10, 4.40),
        ];
        Self(
            prices
                .into_iter()
                .map(|(m, i, o)| (m.to_owned(), Price { input_per_million: i, output_per_million: o }))
                .collect(),
        )
    }
}

impl PriceTable {
    /// A table from JSON `{"model": {"input_per_million": …, "output_per_million": …}}`;
    /// prices must be finite and non-negative.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let table: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for (model, price) in &table.0 {
            let valid = |p: f64| p.is_finite() && p >= 0.0;
            if !valid(price.input_per_million) || !valid(price.output_per_million) {
                return Err(format!("the price of `{model}` must be a non-negative number"));
            }
        }
        Ok(table)
    }

    /// This table with `other`'s prices added, replacing this table's price of any model both name.
    pub fn extended_by(mut self, other: PriceTable) -> Self {
        self.0.extend(other.0);
        self
    }

    pub fn price(&self, model: &str) -> Option<Price> {
        self.0.get(model).copied()
    }

    /// Cost in USD, rounded to a millionth of a cent; `None` when the model has no price (its
    /// tokens are then recorded as unpriced).
    pub fn cost_usd(&self, model: &str, usage: Usage) -> Option<f64> {
        let price = self.price(model)?;
        let cost = usage.input_tokens as f64 * price.input_per_million / 1e6
            + usage.output_tokens as f64 * price.output_per_million / 1e6;
        Some((cost * 1e8).round() / 1e8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_tokens_times_price_per_million() {
        let table = PriceTable::from_json(r#"{"m": {"input_per_million": 2.0, "output_per_million": 8.0}}"#)
            .expect("valid");
        let cost = table.cost_usd("m", Usage { input_tokens: 1_000_000, output_tokens: 500_000 });
        assert!(cost.is_some_and(|c| (c - 6.0).abs() < 1e-9), "{cost:?}");
    }

    #[test]
    fn a_model_without_a_price_is_unpriced_not_free() {
        let table = PriceTable::default();
        assert_eq!(table.cost_usd("unknown", Usage { input_tokens: 10, output_tokens: 10 }), None);
        assert_eq!(table.cost_usd("gpt-4o-mini", Usage::default()), Some(0.0));
    }

    #[test]
    fn a_prices_file_adds_models_and_overrides_built_in_ones() {
        let file = PriceTable::from_json(
            r#"{"my-model": {"input_per_million": 1.0, "output_per_million": 2.0},
                "gpt-4o": {"input_per_million": 3.0, "output_per_million": 4.0}}"#,
        )
        .expect("valid");
        let table = PriceTable::default().extended_by(file);
        assert_eq!(table.price("my-model"), Some(Price { input_per_million: 1.0, output_per_million: 2.0 }));
        assert_eq!(table.price("gpt-4o"), Some(Price { input_per_million: 3.0, output_per_million: 4.0 }));
        assert!(table.price("gpt-4o-mini").is_some(), "built-in prices stay");
        assert!(
            PriceTable::from_json(r#"{"m": {"input_per_million": -1, "output_per_million": 0}}"#).is_err()
        );
    }
}

/// The largest amount of USD a budget or limit takes.
pub const MAX_USD: f64 = 1_000_000_000.0;

/// An amount of USD as budgets keep it: finite, 0 to [`MAX_USD`], to the nano-dollar (so that
/// every stored amount is a number storage can hold: no subnormals, no 1e300).
pub fn usd_amount(value: f64) -> Option<f64> {
    (value.is_finite() && (0.0..=MAX_USD).contains(&value)).then(|| (value * 1e9).round() / 1e9)
}

#[cfg(test)]
mod usd_tests {
    use super::*;

    #[test]
    fn amounts_are_bounded_and_kept_to_the_nano_dollar() {
        assert_eq!(usd_amount(2.5), Some(2.5));
        assert_eq!(usd_amount(0.000_001), Some(0.000_001));
        assert_eq!(usd_amount(2.225_073_858_5e-313), Some(0.0));
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e300, MAX_USD * 2.0] {
            assert_eq!(usd_amount(bad), None, "{bad}");
        }
    }
}
