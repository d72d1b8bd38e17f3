//! Every table, bucket and queue Agentplane uses, defined once. Provisioning creates exactly
//! these; a test checks that infra/template.yaml declares the same keys, indexes, TTLs and
//! dead-letter queues.

use std::env;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrType {
    S,
    N,
}

impl AttrType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::S => "S",
            Self::N => "N",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    pub partition: (&'static str, AttrType),
    pub sort: (&'static str, AttrType),
}

#[derive(Debug, Clone, Copy)]
pub struct IndexSpec {
    pub name: &'static str,
    pub key: KeySpec,
}

#[derive(Debug, Clone, Copy)]
pub struct TableSpec {
    /// The resource's logical id in infra/template.yaml.
    pub logical_id: &'static str,
    pub key: KeySpec,
    pub indexes: &'static [IndexSpec],
    pub ttl_attribute: &'static str,
}

#[derive(Debug, Clone, Copy)]
pub struct QueueSpec {
    pub logical_id: &'static str,
    pub dlq_logical_id: &'static str,
    pub visibility_timeout_s: u32,
    pub max_receive_count: u32,
}

#[derive(Debug, Clone, Copy)]
pub struct BucketSpec {
    pub logical_id: &'static str,
}

pub const TTL_ATTRIBUTE: &str = "expires_at";

/// The index that orders a partition's items by creation time and id (keyset lists).
pub const BY_CREATED: &str = "by_created";
/// The index of work that falls due at a time (deliveries, expiring actions). Sessions also use
/// it for the list of every live session of every project (partition `SESSIONS`, created#id).
pub const BY_DUE: &str = "by_due";

pub const MAIN_TABLE: TableSpec = TableSpec {
    logical_id: "MainTable",
    key: KeySpec { partition: ("PK", AttrType::S), sort: ("SK", AttrType::S) },
    indexes: &[
        IndexSpec {
            name: BY_CREATED,
            key: KeySpec { partition: ("GSI1PK", AttrType::S), sort: ("GSI1SK", AttrType::S) },
        },
        IndexSpec {
            name: BY_DUE,
            key: KeySpec { partition: ("GSI2PK", AttrType::S), sort: ("GSI2SK", AttrType::S) },
        },
    ],
    ttl_attribute: TTL_ATTRIBUTE,
};

pub const EVENTS_TABLE: TableSpec = TableSpec {
    logical_id: "EventsTable",
    key: KeySpec { partition: ("PK", AttrType::S), sort: ("SK", AttrType::N) },
    indexes: &[],
    ttl_attribute: TTL_ATTRIBUTE,
};

pub const TELEMETRY_TABLE: TableSpec = TableSpec {
    logical_id: "TelemetryTable",
    key: KeySpec { partition: ("PK", AttrType::S), sort: ("SK", AttrType::S) },
    indexes: &[],
    ttl_attribute: TTL_ATTRIBUTE,
};

pub const TABLES: [TableSpec; 3] = [MAIN_TABLE, EVENTS_TABLE, TELEMETRY_TABLE];

pub const FILES_BUCKET: BucketSpec = BucketSpec { logical_id: "FilesBucket" };
pub const WORKSPACES_BUCKET: BucketSpec = BucketSpec { logical_id: "WorkspacesBucket" };
pub const BUCKETS: [BucketSpec; 2] = [FILES_BUCKET, WORKSPACES_BUCKET];

pub const RUNS_QUEUE: QueueSpec = QueueSpec {
    logical_id: "RunsQueue",
    dlq_logical_id: "RunsDeadLetterQueue",
    visibility_timeout_s: 960,
    max_receive_count: 5,
};
pub const WEBHOOKS_QUEUE: QueueSpec = QueueSpec {
    logical_id: "WebhooksQueue",
    dlq_logical_id: "WebhooksDeadLetterQueue",
    visibility_timeout_s: 120,
    max_receive_count: 5,
};
pub const ROLLBACKS_QUEUE: QueueSpec = QueueSpec {
    logical_id: "RollbacksQueue",
    dlq_logical_id: "RollbacksDeadLetterQueue",
    visibility_timeout_s: 960,
    max_receive_count: 5,
};
pub const QUEUES: [QueueSpec; 3] = [RUNS_QUEUE, WEBHOOKS_QUEUE, ROLLBACKS_QUEUE];

/// The concrete names of one deployment's resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceNames {
    pub main_table: String,
    pub events_table: String,
    pub telemetry_table: String,
    pub files_bucket: String,
    pub workspaces_bucket: String,
    pub runs_queue: String,
    pub webhooks_queue: String,
    pub rollbacks_queue: String,
}

impl ResourceNames {
    /// Names derived from one prefix (lowercase letters, digits and hyphens, so that bucket
    /// names stay valid): what the local gateway and every test use.
    pub fn with_prefix(prefix: &str) -> Self {
        Self {
            main_table: format!("{prefix}-main"),
            events_table: format!("{prefix}-events"),
            telemetry_table: format!("{prefix}-telemetry"),
            files_bucket: format!("{prefix}-files"),
            workspaces_bucket: format!("{prefix}-workspaces"),
            runs_queue: format!("{prefix}-runs"),
            webhooks_queue: format!("{prefix}-webhooks"),
            rollbacks_queue: format!("{prefix}-rollbacks"),
        }
    }

    /// Each name from its own variable (as the deployed stack sets them), falling back to
    /// `AGENTPLANE_RESOURCE_PREFIX` (default `agentplane`).
    pub fn from_env() -> Self {
        let prefix = env::var("AGENTPLANE_RESOURCE_PREFIX").unwrap_or_else(|_| "agentplane".into());
        let base = Self::with_prefix(&prefix);
        let pick = |var: &str, fallback: String| env::var(var).unwrap_or(fallback);
        Self {
            main_table: pick("AGENTPLANE_MAIN_TABLE", base.main_table),
            events_table: pick("AGENTPLANE_EVENTS_TABLE", base.events_table),
            telemetry_table: pick("AGENTPLANE_TELEMETRY_TABLE", base.telemetry_table),
            files_bucket: pick("AGENTPLANE_FILES_BUCKET", base.files_bucket),
            workspaces_bucket: pick("AGENTPLANE_WORKSPACES_BUCKET", base.workspaces_bucket),
            runs_queue: pick("AGENTPLANE_RUNS_QUEUE", base.runs_queue),
            webhooks_queue: pick("AGENTPLANE_WEBHOOKS_QUEUE", base.webhooks_queue),
            rollbacks_queue: pick("AGENTPLANE_ROLLBACKS_QUEUE", base.rollbacks_queue),
        }
    }

    pub fn table(&self, spec: &TableSpec) -> &str {
        match spec.logical_id {
            "EventsTable" => &self.events_table,
            "TelemetryTable" => &self.telemetry_table,
            _ => &self.main_table,
        }
    }

    pub fn bucket(&self, spec: &BucketSpec) -> &str {
        match spec.logical_id {
            "WorkspacesBucket" => &self.workspaces_bucket,
            _ => &self.files_bucket,
        }
    }

    pub fn queue(&self, spec: &QueueSpec) -> &str {
        match spec.logical_id {
            "WebhooksQueue" => &self.webhooks_queue,
            "RollbacksQueue" => &self.rollbacks_queue,
            _ => &self.runs_queue,
        }
    }
}

/// The dead-letter queue's name for a queue name.
pub fn dlq_name(queue: &str) -> String {
    format!("{queue}-dlq")
}
