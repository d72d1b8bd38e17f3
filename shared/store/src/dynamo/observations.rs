//! What was observed in a sandbox: its process records (main table) and their retained output
//! with the sandbox's retention index (telemetry table).
//!
//! | item            | table     | PK              | SK                                 |
//! |-----------------|-----------|-----------------|------------------------------------|
//! | process record  | main      | `SANDBOX#{id}`  | `PROC#{obs-n or live-pid}`         |
//! | retention index | telemetry | `SANDBOX#{id}`  | `RETENTION` (versioned)            |
//! | output chunk    | telemetry | `SANDBOX#{id}`  | `CHUNK#{process}#{seq:012}`        |
//!
//! The index decides which chunks exist (the rules are in the domain); it is written last and
//! conditionally on its version, after the chunk writes it implies, so a retried report
//! recomputes the same sequence numbers and overwrites the same keys.

use agentplane_domain::Timestamp;
use agentplane_domain::sandbox::retention::ChunkMeta;
use agentplane_domain::sandbox::{ProcessId, ProcessRecord, ProcessState, SandboxId};
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, PutRequest, WriteRequest};
use serde::{Deserialize, Serialize};

use super::page::Item;
use super::sandboxes::sandbox_pk;
use super::{backend, batch_write, conditional, get_as, put_new, query_all, s};
use crate::{Store, StoreError};

fn process_sk(id: ProcessId) -> String {
    format!("PROC#{id}")
}
const INDEX_SK: &str = "RETENTION";
fn chunk_prefix(process: ProcessId) -> String {
    format!("CHUNK#{process}#")
}
fn chunk_sk(process: ProcessId, seq: u64) -> String {
    format!("CHUNK#{process}#{seq:012}")
}
/// Output outlives nothing it belongs to by much: a week after it was written.
const CHUNK_TTL_S: i64 = 7 * 24 * 3600;

#[derive(Serialize, Deserialize)]
struct ProcessItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    #[serde(flatten)]
    record: ProcessRecord,
}

pub use agentplane_domain::sandbox::retention::{RetentionState, StoredChunk};

#[derive(Serialize, Deserialize)]
struct IndexItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    version: u64,
    state: String,
}

pub use agentplane_engine::ports::platform::OutputPage;

#[derive(Serialize, Deserialize)]
struct ChunkItem {
    #[serde(rename = "PK")]
    pk: String,
    #[serde(rename = "SK")]
    sk: String,
    expires_at: i64,
    #[serde(flatten)]
    chunk: StoredChunk,
}

pub struct Observations<'a> {
    store: &'a Store,
}

impl<'a> Observations<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
        Self { store }
    }

    fn main(&self) -> &str {
        &self.store.names.main_table
    }

    fn telemetry(&self) -> &str {
        &self.store.names.telemetry_table
    }

    pub async fn processes(&self, sandbox: &SandboxId) -> Result<Vec<ProcessRecord>, StoreError> {
        let query = self
            .store
            .dynamo
            .query()
            .table_name(self.main())
            .key_condition_expression("PK = :pk AND begins_with(SK, :proc)")
            .expression_attribute_values(":pk", s(sandbox_pk(sandbox)))
            .expression_attribute_values(":proc", s("PROC#"))
            .consistent_read(true);
        let items: Vec<ProcessItem> = query_all(query).await?;
        Ok(items.into_iter().map(|i| i.record).collect())
    }

    pub async fn process(&self, sandbox: &SandboxId, id: ProcessId) -> Result<ProcessRecord, StoreError> {
        let item: Option<ProcessItem> =
            get_as(self.store, self.main(), sandbox_pk(sandbox), process_sk(id)).await?;
        Ok(item.ok_or(StoreError::NotFound)?.record)
    }

    /// Records a process seen running under `record.id` (`live-<pid>`), replacing a record of
    /// that id that is no longer running: after a gap the pid may name a new process. Returns
    /// the record it replaced; `Conflict` when one is still running (the same process).
    pub async fn put_seen_process(
        &self,
        sandbox: &SandboxId,
        record: &ProcessRecord,
    ) -> Result<Option<ProcessRecord>, StoreError> {
        let item = ProcessItem { pk: sandbox_pk(sandbox), sk: process_sk(record.id), record: record.clone() };
        let out = self
            .store
            .dynamo
            .put_item()
            .table_name(self.main())
            .set_item(Some(serde_dynamo::to_item(item)?))
            .condition_expression("attribute_not_exists(PK) OR #state <> :running")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":running", s(ProcessState::Running.as_str()))
            .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        match out.attributes {
            Some(old) if !old.is_empty() => Ok(Some(serde_dynamo::from_item::<_, ProcessItem>(old)?.record)),
            _ => Ok(None),
        }
    }

    /// Writes a new record; `Conflict` when it exists (a retried report).
    pub async fn put_process(&self, sandbox: &SandboxId, record: &ProcessRecord) -> Result<(), StoreError> {
        let item = ProcessItem { pk: sandbox_pk(sandbox), sk: process_sk(record.id), record: record.clone() };
        put_new(self.store, self.main(), item).await
    }

    /// A witnessed exit. Only a running record takes it (an unknown one stays unknown: its
    /// watcher is gone).
    pub async fn record_exit(
        &self,
        sandbox: &SandboxId,
        id: ProcessId,
        exit_code: Option<i32>,
        signal: Option<i32>,
        at: Timestamp,
    ) -> Result<(), StoreError> {
        let mut set = vec!["#state = :exited", "exited_at = :at"];
        let mut request = self
            .store
            .dynamo
            .update_item()
            .table_name(self.main())
            .key("PK", s(sandbox_pk(sandbox)))
            .key("SK", s(process_sk(id)))
            .condition_expression("#state = :running")
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":running", s(ProcessState::Running.as_str()))
            .expression_attribute_values(":exited", s(ProcessState::Exited.as_str()))
            .expression_attribute_values(":at", serde_dynamo::to_attribute_value(at)?);
        if let Some(code) = exit_code {
            set.push("#code = :code");
            request = request.expression_attribute_names("#code", "exit_code");
            request = request.expression_attribute_values(":code", AttributeValue::N(code.to_string()));
        }
        if let Some(signal) = signal {
            set.push("#signal = :signal");
            request = request.expression_attribute_names("#signal", "signal");
            request = request.expression_attribute_values(":signal", AttributeValue::N(signal.to_string()));
        }
        let out = request
            .update_expression(format!("SET {}", set.join(", ")))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()));
        match out {
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// Observation was interrupted: every process still recorded as running becomes unknown,
    /// with the gap flagged.
    pub async fn mark_gap(&self, sandbox: &SandboxId) -> Result<(), StoreError> {
        for record in self.processes(sandbox).await? {
            if record.state != ProcessState::Running {
                continue;
            }
            let out = self
                .store
                .dynamo
                .update_item()
                .table_name(self.main())
                .key("PK", s(sandbox_pk(sandbox)))
                .key("SK", s(process_sk(record.id)))
                .condition_expression("#state = :running")
                .update_expression("SET #state = :unknown, observation_gap = :yes")
                .expression_attribute_names("#state", "state")
                .expression_attribute_values(":running", s(ProcessState::Running.as_str()))
                .expression_attribute_values(":unknown", s(ProcessState::Unknown.as_str()))
                .expression_attribute_values(":yes", AttributeValue::Bool(true))
                .send()
                .await
                .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()));
            match out {
                Ok(_) | Err(StoreError::Conflict) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    pub async fn set_truncated(&self, sandbox: &SandboxId, id: ProcessId) -> Result<(), StoreError> {
        let out = self
            .store
            .dynamo
            .update_item()
            .table_name(self.main())
            .key("PK", s(sandbox_pk(sandbox)))
            .key("SK", s(process_sk(id)))
            .condition_expression("attribute_exists(PK)")
            .update_expression("SET output_truncated = :yes")
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .send()
            .await
            .map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()));
        match out {
            Ok(_) | Err(StoreError::Conflict) => Ok(()),
            Err(err) => Err(err),
        }
    }

    pub async fn delete_process(&self, sandbox: &SandboxId, id: ProcessId) -> Result<(), StoreError> {
        self.store
            .dynamo
            .delete_item()
            .table_name(self.main())
            .key("PK", s(sandbox_pk(sandbox)))
            .key("SK", s(process_sk(id)))
            .send()
            .await
            .map_err(backend)?;
        Ok(())
    }

    /// The index and its version (0 when none was written yet).
    pub async fn load_index(&self, sandbox: &SandboxId) -> Result<(RetentionState, u64), StoreError> {
        let item = self
            .store
            .dynamo
            .get_item()
            .table_name(self.telemetry())
            .key("PK", s(sandbox_pk(sandbox)))
            .key("SK", s(INDEX_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend)?
            .item;
        match item {
            Some(item) => {
                let item: IndexItem = serde_dynamo::from_item(item)?;
                let state =
                    serde_json::from_str(&item.state).map_err(|e| StoreError::Corrupt(e.to_string()))?;
                Ok((state, item.version))
            }
            None => Ok((RetentionState::default(), 0)),
        }
    }

    /// `Conflict` when someone else saved since `version` was read.
    pub async fn save_index(
        &self,
        sandbox: &SandboxId,
        state: &RetentionState,
        version: u64,
    ) -> Result<(), StoreError> {
        let item = IndexItem {
            pk: sandbox_pk(sandbox),
            sk: INDEX_SK.into(),
            version: version + 1,
            state: serde_json::to_string(state).map_err(StoreError::unavailable)?,
        };
        let request = self
            .store
            .dynamo
            .put_item()
            .table_name(self.telemetry())
            .set_item(Some(serde_dynamo::to_item(item)?));
        let request = if version == 0 {
            request.condition_expression("attribute_not_exists(PK)")
        } else {
            request
                .condition_expression("#version = :v")
                .expression_attribute_names("#version", "version")
                .expression_attribute_values(":v", AttributeValue::N(version.to_string()))
        };
        request.send().await.map_err(|e| conditional(e, |e| e.is_conditional_check_failed_exception()))?;
        Ok(())
    }

    pub async fn put_chunks(
        &self,
        sandbox: &SandboxId,
        chunks: Vec<StoredChunk>,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let mut requests = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            let item = ChunkItem {
                pk: sandbox_pk(sandbox),
                sk: chunk_sk(chunk.process, chunk.seq),
                expires_at: now.unix_seconds() + CHUNK_TTL_S,
                chunk,
            };
            let put = PutRequest::builder()
                .set_item(Some(serde_dynamo::to_item(item)?))
                .build()
                .map_err(StoreError::unavailable)?;
            requests.push(WriteRequest::builder().put_request(put).build());
        }
        self.batch_write(requests).await
    }

    pub async fn delete_chunks(&self, sandbox: &SandboxId, chunks: &[ChunkMeta]) -> Result<(), StoreError> {
        let mut requests = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            let delete = DeleteRequest::builder()
                .key("PK", s(sandbox_pk(sandbox)))
                .key("SK", s(chunk_sk(chunk.process, chunk.seq)))
                .build()
                .map_err(StoreError::unavailable)?;
            requests.push(WriteRequest::builder().delete_request(delete).build());
        }
        self.batch_write(requests).await
    }

    async fn batch_write(&self, requests: Vec<WriteRequest>) -> Result<(), StoreError> {
        batch_write(self.store, self.telemetry(), requests).await
    }

    /// Retained chunks of one process after `after` (a sequence number), oldest first, at most
    /// `limit`; whether more follow; and whether chunks past their retention at `now` were left
    /// out.
    pub async fn output(
        &self,
        sandbox: &SandboxId,
        process: ProcessId,
        after: Option<u64>,
        limit: usize,
        now: Timestamp,
    ) -> Result<OutputPage, StoreError> {
        let mut chunks = Vec::new();
        let mut expired = false;
        let mut start: Option<Item> = after.map(|seq| {
            Item::from([
                ("PK".to_owned(), s(sandbox_pk(sandbox))),
                ("SK".to_owned(), s(chunk_sk(process, seq))),
            ])
        });
        loop {
            let page = self
                .store
                .dynamo
                .query()
                .table_name(self.telemetry())
                .key_condition_expression("PK = :pk AND begins_with(SK, :prefix)")
                .expression_attribute_values(":pk", s(sandbox_pk(sandbox)))
                .expression_attribute_values(":prefix", s(chunk_prefix(process)))
                .consistent_read(true)
                .limit(i32::try_from(limit + 1 - chunks.len()).unwrap_or(1025))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(backend)?;
            for item in page.items.unwrap_or_default() {
                let item: ChunkItem = serde_dynamo::from_item(item)?;
                // DynamoDB removes expired items only eventually: past its TTL a chunk is gone.
                if item.expires_at <= now.unix_seconds() {
                    expired = true;
                } else {
                    chunks.push(item.chunk);
                }
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() && chunks.len() <= limit => start = Some(key),
                _ => break,
            }
        }
        let has_more = chunks.len() > limit;
        chunks.truncate(limit);
        Ok(OutputPage { chunks, has_more, expired })
    }
}
