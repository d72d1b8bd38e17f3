//! Serde helpers shared by the telemetry wire types.

use serde::{Deserialize, Deserializer};

/// A field that must be present and may be `null`. Plain `Option` fields would accept a missing
/// key as `null`; a client that checks exact fields must not.
pub fn nullable<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer)
}
