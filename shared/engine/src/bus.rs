//! Appending to the event log and telling live readers (SSE streams in this process) that a
//! session has news. Readers in other processes poll; in-process readers wake at once.

use agentplane_domain::event::{Event, NewEvent};
use agentplane_domain::{SessionId, Timestamp};
use tokio::sync::broadcast;

use crate::ports::{EventLog, PortError};

/// Days events are kept (`AGENT_SESSION_EVENT_RETENTION_DAYS`, default 30).
pub fn retention_days_from_env() -> i64 {
    std::env::var("AGENT_SESSION_EVENT_RETENTION_DAYS").ok().and_then(|v| v.parse().ok()).unwrap_or(30)
}

#[derive(Debug, Clone)]
pub struct EventBus {
    news: broadcast::Sender<SessionId>,
    retention_days: i64,
}

impl EventBus {
    pub fn new(retention_days: i64) -> Self {
        let (news, _) = broadcast::channel(1024);
        Self { news, retention_days }
    }

    pub async fn append<L: EventLog>(
        &self,
        log: &L,
        session: &SessionId,
        events: Vec<NewEvent>,
        now: Timestamp,
    ) -> Result<Vec<Event>, PortError> {
        self.append_from(log, session, events, now, None).await
    }

    /// `append` with a starting hint (see `EventLog::append`).
    pub async fn append_from<L: EventLog>(
        &self,
        log: &L,
        session: &SessionId,
        events: Vec<NewEvent>,
        now: Timestamp,
        from: Option<u64>,
    ) -> Result<Vec<Event>, PortError> {
        let appended = log.append_events(session, events, now, self.retention_days, from).await?;
        // Nobody listening is fine.
        let _ = self.news.send(*session);
        Ok(appended)
    }

    /// Tells live readers that `session` has news (after a write of events elsewhere).
    pub fn notify(&self, session: &SessionId) {
        let _ = self.news.send(*session);
    }

    /// Days events are kept.
    pub fn retention_days(&self) -> i64 {
        self.retention_days
    }

    pub fn subscribe(&self) -> broadcast::Receiver<SessionId> {
        self.news.subscribe()
    }
}
