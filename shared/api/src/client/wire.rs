//! Wire pieces more than one client route shares.

use std::collections::BTreeMap;

use agentplane_domain::ValidationError;
use agentplane_domain::metadata::Metadata;
use serde_json::Value;

/// Client metadata as the wire carries it (a string map) as the domain's bounded `Metadata`:
/// at most 16 values, keys of 1 to 64 characters, values of at most 512; `param` names the
/// field at fault.
pub fn metadata(param: &str, map: BTreeMap<String, String>) -> Result<Metadata, ValidationError> {
    let object = map.into_iter().map(|(key, value)| (key, Value::String(value))).collect();
    Metadata::from_json(param, &Value::Object(object))
}
