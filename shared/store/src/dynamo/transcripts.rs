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

pub use agentplane_engine::ports::turn_writes::StoredTranscript;

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

    /// Replaces the session's transcript with `body` (`None`: removes it) as a new version, on
    /// the condition that the version it read is still the stored one (a rollback's restore).
    pub async fn restore(
        &self,
        project: &ProjectId,
        session: &SessionId,
        body: Option<&str>,
    ) -> Result<(), StoreError> {
        let table = &self.store.names.main_table;
        for _ in 0..4 {
            let current = self.load(project, session).await?;
            let version = current.as_ref().map_or(0, |t| t.version);
            let result = match (body, &current) {
                (None, None) => return Ok(()),
                (None, Some(_)) => self
                    .store
                    .dynamo
                    .delete_item()
                    .table_name(table)
                    .key("PK", AttributeValue::S(project_pk(project)))
                    .key("SK", AttributeValue::S(transcript_sk(session)))
                    .condition_expression("version = :v")
                    .expression_attribute_values(":v", AttributeValue::N(version.to_string()))
                    .send()
                    .await
                    .map(|_| ())
                    .map_err(|e| super::conditional(e, |e| e.is_conditional_check_failed_exception())),
                (Some(body), _) => {
                    let mut put = self
                        .store
                        .dynamo
                        .put_item()
                        .table_name(table)
                        .item("PK", AttributeValue::S(project_pk(project)))
                        .item("SK", AttributeValue::S(transcript_sk(session)))
                        .item("version", AttributeValue::N((version + 1).to_string()))
                        .item("bytes", AttributeValue::N(body.len().to_string()));
                    if body.len() > INLINE_TRANSCRIPT_BYTES {
                        let key = transcript_object_key(project, session, version + 1, "rollback");
                        self.objects()?.put(&key, body.as_bytes().to_vec()).await?;
                        put = put.item("object", AttributeValue::S(key));
                    } else {
                        put = put.item("body", AttributeValue::S(body.to_owned()));
                    }
                    put = match current {
                        None => put.condition_expression("attribute_not_exists(PK)"),
                        Some(_) => put
                            .condition_expression("version = :v")
                            .expression_attribute_values(":v", AttributeValue::N(version.to_string())),
                    };
                    put.send()
                        .await
                        .map(|_| ())
                        .map_err(|e| super::conditional(e, |e| e.is_conditional_check_failed_exception()))
                }
            };
            match result {
                Ok(()) => return Ok(()),
                Err(StoreError::Conflict) => continue,
                Err(err) => return Err(err),
            }
        }
        Err(StoreError::Conflict)
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
