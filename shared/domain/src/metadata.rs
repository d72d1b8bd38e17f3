//! Free-form metadata that clients attach to objects: string keys and string values, bounded.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ValidationError;

pub const MAX_KEYS: usize = 16;
pub const MAX_KEY_CHARS: usize = 64;
pub const MAX_VALUE_CHARS: usize = 512;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Metadata(BTreeMap<String, String>);

impl Metadata {
    /// From a JSON value: an object of at most 16 string values, keys up to 64 characters,
    /// values up to 512. `null` means empty.
    pub fn from_json(param: &str, value: &Value) -> Result<Self, ValidationError> {
        let map = match value {
            Value::Null => return Ok(Self::default()),
            Value::Object(map) => map,
            _ => {
                return Err(ValidationError::new(param, format!("`{param}` must be an object")));
            }
        };
        if map.len() > MAX_KEYS {
            return Err(ValidationError::new(param, format!("`{param}` may have at most {MAX_KEYS} keys")));
        }
        let mut out = BTreeMap::new();
        for (key, value) in map {
            if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
                return Err(ValidationError::new(
                    format!("{param}.{key}"),
                    format!("metadata keys must be 1 to {MAX_KEY_CHARS} characters"),
                ));
            }
            let Value::String(text) = value else {
                return Err(ValidationError::new(
                    format!("{param}.{key}"),
                    "metadata values must be strings",
                ));
            };
            if text.chars().count() > MAX_VALUE_CHARS {
                return Err(ValidationError::new(
                    format!("{param}.{key}"),
                    format!("metadata values may be at most {MAX_VALUE_CHARS} characters"),
                ));
            }
            out.insert(key.clone(), text.clone());
        }
        Ok(Self(out))
    }

    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_bounded_string_maps() {
        let m = Metadata::from_json("metadata", &json!({"a": "b"})).expect("valid");
        assert_eq!(m.as_map().get("a").map(String::as_str), Some("b"));
        assert_eq!(Metadata::from_json("metadata", &Value::Null), Ok(Metadata::default()));
    }

    #[test]
    fn refuses_wrong_shapes_and_sizes() {
        assert!(Metadata::from_json("metadata", &json!([1])).is_err());
        assert!(Metadata::from_json("metadata", &json!({"a": 1})).is_err());
        assert!(Metadata::from_json("metadata", &json!({"a": "x".repeat(513)})).is_err());
        assert!(Metadata::from_json("metadata", &json!({"k".repeat(65): "v"})).is_err());
        let many: serde_json::Map<String, Value> = (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
        assert!(Metadata::from_json("metadata", &Value::Object(many)).is_err());
    }
}
