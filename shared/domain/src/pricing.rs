//! Token usage and its price. Prices are USD per million tokens, per model.

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
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    pub fn price(&self, model: &str) -> Option<Price> {
        self.0.get(model).copied()
    }

    /// Cost in USD, rounded to a millionth of a cent; an unknown model costs 0 (its tokens are
    /// still counted).
    pub fn cost_usd(&self, model: &str, usage: Usage) -> f64 {
        let Some(price) = self.price(model) else { return 0.0 };
        let cost = usage.input_tokens as f64 * price.input_per_million / 1e6
            + usage.output_tokens as f64 * price.output_per_million / 1e6;
        (cost * 1e8).round() / 1e8
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
        assert!((cost - 6.0).abs() < 1e-9);
        assert_eq!(table.cost_usd("unknown", Usage { input_tokens: 10, output_tokens: 10 }), 0.0);
    }
}
