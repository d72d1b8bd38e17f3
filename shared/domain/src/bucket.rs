//! Document Store buckets: S3 buckets of the deployment's account that a project registers
//! (through Core) to keep its session files in, instead of the deployment's files bucket. An
//! agent names one in `config.attachments.bucket`; each file records the bucket it was created
//! in, so deleting, sweeping and reading it never depend on the agent's config of the day.
//!
//! A bucket belongs to at most one project: two projects' files never share a bucket, so a
//! bucket's owner is never in doubt (the sweep, an operator's audit).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{ProjectId, Timestamp, ValidationError};

/// How many buckets a project may register.
pub const MAX_BUCKETS_PER_PROJECT: u32 = 10;

/// An S3 bucket name by the general-purpose bucket rules: 3 to 63 characters of lowercase
/// letters, digits, dots and hyphens; a letter or digit first and last; no two adjacent dots;
/// not an IPv4 address; none of the prefixes and suffixes S3 reserves.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct BucketName(String);

const RESERVED_PREFIXES: [&str; 3] = ["xn--", "sthree-", "amzn-s3-demo-"];
const RESERVED_SUFFIXES: [&str; 4] = ["-s3alias", "--ol-s3", ".mrap", "--x-s3"];

impl BucketName {
    /// `param` names the field in the error.
    pub fn parse(param: &str, text: &str) -> Result<Self, ValidationError> {
        let bad = |why: &str| {
            Err(ValidationError::new(param, format!("`{param}` must be an S3 bucket name: {why}")))
        };
        if !(3..=63).contains(&text.len()) {
            return bad("3 to 63 characters");
        }
        if !text.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-') {
            return bad("lowercase letters, digits, dots and hyphens only");
        }
        let edge_ok = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !edge_ok(text.bytes().next()) || !edge_ok(text.bytes().last()) {
            return bad("a letter or digit first and last");
        }
        if text.contains("..") {
            return bad("no two adjacent dots");
        }
        if text.parse::<std::net::Ipv4Addr>().is_ok() {
            return bad("not an IP address");
        }
        if RESERVED_PREFIXES.iter().any(|p| text.starts_with(p))
            || RESERVED_SUFFIXES.iter().any(|s| text.ends_with(s))
        {
            return bad("a prefix or suffix S3 reserves");
        }
        Ok(Self(text.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for BucketName {
    type Error = ValidationError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse("bucket", &text)
    }
}

impl From<BucketName> for String {
    fn from(name: BucketName) -> String {
        name.0
    }
}

impl fmt::Display for BucketName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The bucket names a deployment's role may use for Document Store buckets (its template's
/// `DocumentBuckets` parameter, the same pattern its IAM policies name): `*` stands for any run
/// of characters, everything else for itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketPattern(String);

/// The template's default.
pub const DEFAULT_PATTERN: &str = "agentplane-documents-*";

impl BucketPattern {
    pub fn new(pattern: impl Into<String>) -> Self {
        Self(pattern.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn matches(&self, name: &BucketName) -> bool {
        glob(self.0.as_bytes(), name.as_str().as_bytes())
    }
}

impl Default for BucketPattern {
    fn default() -> Self {
        Self::new(DEFAULT_PATTERN)
    }
}

/// `*`-only glob matching, iterative with one backtrack point (linear in practice).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// A bucket registered to a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DocumentBucket {
    pub name: BucketName,
    pub project_id: ProjectId,
    pub created_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_follow_the_s3_rules() {
        for ok in ["abc", "my-docs.example", "a1-b2", &"a".repeat(63), "1bucket"] {
            assert!(BucketName::parse("name", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "ab",
            &"a".repeat(64),
            "My-Bucket",
            "under_score",
            "-start",
            "end-",
            ".dot",
            "dot.",
            "a..b",
            "192.168.1.1",
            "xn--abc",
            "sthree-x",
            "docs-s3alias",
            "docs--ol-s3",
            "a.mrap",
            "b--x-s3",
            "spaced name",
            "ünï",
            "a/b",
            "amzn-s3-demo-x",
        ] {
            let err = BucketName::parse("name", bad).expect_err(bad);
            assert_eq!(err.param.as_deref(), Some("name"));
        }
    }

    #[test]
    fn a_pattern_matches_its_names_and_no_others() {
        let name = |n: &str| BucketName::parse("name", n).expect("valid");
        let default = BucketPattern::default();
        assert!(default.matches(&name("agentplane-documents-team1")));
        assert!(!default.matches(&name("agentplane-files-1")));
        assert!(!default.matches(&name("xagentplane-documents-1")));
        let exact = BucketPattern::new("docs.example");
        assert!(exact.matches(&name("docs.example")) && !exact.matches(&name("docs.example2")));
        let middle = BucketPattern::new("acme-*-docs");
        assert!(middle.matches(&name("acme-eu-docs")) && middle.matches(&name("acme--docs")));
        assert!(!middle.matches(&name("acme-eu-docs-old")));
        assert!(BucketPattern::new("*").matches(&name("anything")));
    }

    #[test]
    fn a_bucket_name_reads_back_only_when_valid() {
        let name: BucketName = serde_json::from_value(serde_json::json!("docs-1")).expect("valid");
        assert_eq!(serde_json::to_value(&name).expect("serializes"), serde_json::json!("docs-1"));
        assert!(serde_json::from_value::<BucketName>(serde_json::json!("Docs")).is_err());
    }
}
