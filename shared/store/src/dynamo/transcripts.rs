//! Session transcripts: the model's conversation of a session, kept whole (never rebuilt from
//! the event log, whose events are cut at 16 KB and expire). One item per session in the main
//! table, `PROJECT#{pid}` / `SESSION#{id}#TRANSCRIPT`, with a version every write advances
//! (conditionally, so two writers never interleave). A body past [`INLINE_TRANSCRIPT_BYTES`]
//! goes to S3 (`transcripts/{project}/{session}/{version}-{writer}.json` in the files bucket) and the
//! item points at it. The item has no TTL: it lives as long as the session item. A turn writes
//! it in its step's transaction (`turns.rs`); a paused turn's saved state rides on it (`paused`).

use agentplane_domain::{ProjectId, SessionId};
use aws_sdk_dynamodb::types::AttributeValue;

use super::keys::project_pk;
use crate::{Store, StoreError};

/// The largest body kept in the DynamoDB item (the item limit is 400 KB; the margin covers the
/// keys and attributes, and bytes of multi-byte characters are what count).
pub const INLINE_TRANSCRIPT_BYTES: usize = 300 * 1024;

pub fn transcript_sk(session: &SessionId) -> String {
    format!("SESSION#{session}#TRANSCRIPT")
}

/// Where a transcript body of `version` written by `writer` lives in S3 (the writer keeps two
/// writers of one version off each other's object).
pub fn transcript_object_key(project: &ProjectId, session: &SessionId, version: u64, writer: &str) -> String {
    format!("transcripts/{project}/{session}/{version:012}-{writer}.json")
}

/// A stored transcript: its body (JSON, the engine's to read) and its version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredTranscript {
    pub body: String,
    pub version: u64,
    /// The saved state of a turn paused at this version (JSON, the engine's); `None` when no
    /// turn is paused.
    pub paused: Option<String>,
    /// The S3 key the body was read from, when it lives in S3.
    pub object: Option<String>,
}

pub struct Transcripts<'a> {
    store: &'a Store,
}

impl<'a> Transcripts<'a> {
    pub fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn objects(&self) -> Result<&crate::Objects, StoreError> {
        self.store
            .objects
            .as_ref()
            .ok_or_else(|| StoreError::unavailable("this function has no access to transcript objects"))
    }

    /// The session's transcript, `None` when it has none yet.
    pub async fn load(
        &self,
        project: &ProjectId,
        session: &SessionId,
    ) -> Result<Option<StoredTranscript>, StoreError> {
        let item = super::get_item(
            self.store,
            &self.store.names.main_table,
            project_pk(project),
            transcript_sk(session),
        )
        .await?;
        match item {
            Some(item) => Ok(Some(self.decode(&item).await?)),
            None => Ok(None),
        }
    }

    /// A transcript item as read (its body fetched from S3 when it lives there).
    pub(crate) async fn decode(
        &self,
        item: &std::collections::HashMap<String, AttributeValue>,
    ) -> Result<StoredTranscript, StoreError> {
        let version = match item.get("version") {
            Some(AttributeValue::N(n)) => {
                n.parse::<u64>().map_err(|_| StoreError::Corrupt("transcript version".into()))?
            }
            _ => return Err(StoreError::Corrupt("transcript without a version".into())),
        };
        let paused = match item.get("paused") {
            Some(AttributeValue::S(p)) => Some(p.clone()),
            _ => None,
        };
        let (body, object) = match (item.get("body"), item.get("object")) {
            (Some(AttributeValue::S(body)), _) => (body.clone(), None),
            (_, Some(AttributeValue::S(key))) => {
                let bytes = self.objects()?.get(key).await.map_err(|e| match e {
                    StoreError::NotFound => {
                        StoreError::Corrupt(format!("transcript object {key} is missing"))
                    }
                    other => other,
                })?;
                let body = String::from_utf8(bytes)
                    .map_err(|_| StoreError::Corrupt("transcript object is not UTF-8".into()))?;
                (body, Some(key.clone()))
            }
            _ => return Err(StoreError::Corrupt("transcript without a body".into())),
        };
        Ok(StoredTranscript { body, version, paused, object })
    }
}
