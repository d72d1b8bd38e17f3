//! Request JSON read strictly: an object that names a key twice is refused, not read "last
//! wins". RFC 8259 leaves such a text's meaning to each parser, and parsers differ (first wins,
//! last wins, an error), so a proxy, a log or a client library may read a different value than
//! the handler would: `{"model":"cheap","model":"dear"}`. Every JSON request body goes through
//! [`from_slice`]: the surfaces' bodies ([`crate::body`]) and A2A's JSON-RPC.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The longest key an error quotes.
const QUOTED_KEY_CHARS: usize = 64;

/// `bytes` as one JSON value, refused when any object in it repeats a key.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    // First the keys (nothing built), then the value: serde_json's own reading of numbers and
    // strings, whatever features it was built with.
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    UniqueKeys.deserialize(&mut reader)?;
    reader.end()?;
    serde_json::from_slice(bytes)
}

/// Walks a value, failing on the first object that repeats a key.
#[derive(Clone, Copy)]
struct UniqueKeys;

impl<'de> DeserializeSeed<'de> for UniqueKeys {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueKeys {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_i128<E>(self, _: i128) -> Result<(), E> {
        Ok(())
    }

    fn visit_u128<E>(self, _: u128) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                let quoted: String = key.chars().take(QUOTED_KEY_CHARS).collect();
                let more = if key.chars().count() > QUOTED_KEY_CHARS { "…" } else { "" };
                return Err(de::Error::custom(format!("an object names the key \"{quoted}{more}\" twice")));
            }
            map.next_value_seed(self)?;
            seen.insert(key);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_key_is_refused_at_any_depth() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"b":{"c":true,"c":false}}"#,
            r#"[{"x":null},{"y":1,"y":1}]"#,
            r#"{"\u0061":1,"a":2}"#,
        ] {
            let err = from_slice(text.as_bytes()).expect_err(text).to_string();
            assert!(err.contains("twice"), "{text}: {err}");
        }
    }

    #[test]
    fn distinct_keys_read_as_serde_json_reads_them() {
        for text in [
            r#"{"a":1,"b":{"a":1},"c":[{"a":1},{"a":2}],"d":1.5e3,"e":-7,"f":"\u00e9","g":null}"#,
            "[]",
            "12345678901234567890",
            r#""x""#,
        ] {
            let expected: Value = serde_json::from_str(text).expect("json");
            assert_eq!(from_slice(text.as_bytes()).expect(text), expected, "{text}");
        }
        assert!(from_slice(b"{\"a\":1} x").is_err(), "trailing characters");
        assert!(from_slice(b"{\"a\":").is_err());
    }

    #[test]
    fn a_long_repeated_key_is_quoted_short() {
        let key = "k".repeat(10_000);
        let text = format!("{{\"{key}\":1,\"{key}\":2}}");
        let err = from_slice(text.as_bytes()).expect_err("repeated").to_string();
        assert!(err.len() < 300, "{err}");
    }
}
