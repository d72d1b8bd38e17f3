//! E2B's sandbox list (`GET /v2/sandboxes`): which sandboxes a query shows, and its page token.
//! `state` is a comma list of `running` and `paused` (default both: ended sandboxes are never
//! listed as if alive); `metadata` is `key=value&…`, url-encoded as the E2B SDKs send it (each
//! pair must match); `limit` is 1 to 100 (default 100); `nextToken` is the token of the previous
//! page's `x-next-token` header. Environments' workspace sandboxes are the platform's: never listed.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{ENVIRONMENT_METADATA_KEY, Sandbox, SandboxId, SandboxState};
use crate::{Timestamp, ValidationError};

pub const LIST_LIMIT_DEFAULT: usize = 100;
pub const LIST_LIMIT_MAX: usize = 100;
/// Most metadata pairs a filter may name.
pub const MAX_METADATA_FILTERS: usize = 16;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// `running` and/or `paused`.
    pub states: Vec<SandboxState>,
    pub metadata: BTreeMap<String, String>,
    pub limit: usize,
    /// List after this sandbox (exclusive), as the previous page ended.
    pub after: Option<SandboxId>,
}

impl ListQuery {
    /// The query of the four parameters, each as given (absent: its default).
    pub fn parse(
        state: Option<&str>,
        metadata: Option<&str>,
        limit: Option<&str>,
        next_token: Option<&str>,
    ) -> Result<Self, ValidationError> {
        let states = match state {
            None => vec![SandboxState::Running, SandboxState::Paused],
            Some(text) => parse_states(text)?,
        };
        let metadata = match metadata {
            None => BTreeMap::new(),
            Some(text) => parse_metadata(text)?,
        };
        let limit = match limit {
            None => LIST_LIMIT_DEFAULT,
            Some(text) => {
                text.parse::<usize>().ok().filter(|n| (1..=LIST_LIMIT_MAX).contains(n)).ok_or_else(|| {
                    ValidationError::new(
                        "limit",
                        format!("`limit` must be an integer from 1 to {LIST_LIMIT_MAX}"),
                    )
                })?
            }
        };
        let after = match next_token {
            None => None,
            Some(token) => Some(parse_token(token).ok_or_else(|| {
                ValidationError::new("nextToken", "`nextToken` is not a token this API handed out")
            })?),
        };
        Ok(Self { states, metadata, limit, after })
    }

    /// Whether `sandbox`, as it reads at `now`, belongs in the list.
    pub fn shows(&self, sandbox: &Sandbox, now: Timestamp) -> bool {
        let map = sandbox.metadata.as_map();
        !map.contains_key(ENVIRONMENT_METADATA_KEY)
            && self.states.contains(&sandbox.lifecycle.effective(now))
            && self.metadata.iter().all(|(k, v)| map.get(k) == Some(v))
    }
}

fn parse_states(text: &str) -> Result<Vec<SandboxState>, ValidationError> {
    let mut states = Vec::new();
    for part in text.split(',') {
        let state = match part.trim() {
            "running" => SandboxState::Running,
            "paused" => SandboxState::Paused,
            _ => {
                return Err(ValidationError::new(
                    "state",
                    "`state` must be a comma list of running and paused",
                ));
            }
        };
        if !states.contains(&state) {
            states.push(state);
        }
    }
    Ok(states)
}

/// `key=value&…`; each key and value is percent-decoded once more (the SDKs quote them before
/// url-encoding the pairs).
fn parse_metadata(text: &str) -> Result<BTreeMap<String, String>, ValidationError> {
    let invalid =
        || ValidationError::new("metadata", "`metadata` must be url-encoded key=value pairs joined by &");
    let mut out = BTreeMap::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(invalid)?;
        let key = unquote(key).ok_or_else(invalid)?;
        let value = unquote(value).ok_or_else(invalid)?;
        let key = unquote(&key).ok_or_else(invalid)?;
        let value = unquote(&value).ok_or_else(invalid)?;
        if key.is_empty() {
            return Err(invalid());
        }
        out.insert(key, value);
    }
    if out.len() > MAX_METADATA_FILTERS {
        return Err(ValidationError::new(
            "metadata",
            format!("`metadata` may name at most {MAX_METADATA_FILTERS} pairs"),
        ));
    }
    Ok(out)
}

/// Form-style percent-decoding (`+` is a space); `None` when the bytes are not UTF-8.
fn unquote(text: &str) -> Option<String> {
    let decoded: Vec<u8> = form_urlencoded::parse(format!("x={text}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned().into_bytes())
        .unwrap_or_default();
    String::from_utf8(decoded).ok()
}

/// The opaque token of the page that follows `last`.
pub fn next_token(last: &SandboxId) -> String {
    URL_SAFE_NO_PAD.encode(last.as_str())
}

fn parse_token(token: &str) -> Option<SandboxId> {
    let bytes = URL_SAFE_NO_PAD.decode(token.trim()).ok()?;
    String::from_utf8(bytes).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_list_live_sandboxes_a_hundred_at_a_time() {
        let q = ListQuery::parse(None, None, None, None).expect("defaults");
        assert_eq!(q.states, vec![SandboxState::Running, SandboxState::Paused]);
        assert_eq!((q.limit, q.after, q.metadata.len()), (100, None, 0));
    }

    #[test]
    fn bad_parameters_name_themselves() {
        let param = |r: Result<ListQuery, ValidationError>| r.expect_err("refused").param;
        assert_eq!(param(ListQuery::parse(Some("killed"), None, None, None)).as_deref(), Some("state"));
        assert_eq!(param(ListQuery::parse(Some(""), None, None, None)).as_deref(), Some("state"));
        assert_eq!(param(ListQuery::parse(None, Some("novalue"), None, None)).as_deref(), Some("metadata"));
        assert_eq!(param(ListQuery::parse(None, Some("=v"), None, None)).as_deref(), Some("metadata"));
        for limit in ["0", "101", "-1", "x", "1.5"] {
            assert_eq!(param(ListQuery::parse(None, None, Some(limit), None)).as_deref(), Some("limit"));
        }
        for token in ["", "!!", "c2J4X25vcGU"] {
            assert_eq!(param(ListQuery::parse(None, None, None, Some(token))).as_deref(), Some("nextToken"));
        }
    }

    #[test]
    fn metadata_reads_as_the_sdks_quote_it() {
        // Python: urlencode({quote("a b"): quote("x&y")}) == "a%2520b=x%2526y"
        let q = ListQuery::parse(None, Some("a%2520b=x%2526y&k=v"), None, None).expect("parses");
        assert_eq!(q.metadata.get("a b").map(String::as_str), Some("x&y"));
        assert_eq!(q.metadata.get("k").map(String::as_str), Some("v"));
    }

    #[test]
    fn a_token_names_the_sandbox_it_ends_after() {
        let id = SandboxId::from_random([9; 16]);
        let q = ListQuery::parse(Some("paused"), None, Some("5"), Some(&next_token(&id))).expect("parses");
        assert_eq!((q.after, q.limit, q.states), (Some(id), 5, vec![SandboxState::Paused]));
    }
}
