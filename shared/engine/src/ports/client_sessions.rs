//! What a client's session routes write besides a turn (the session's create, change and
//! delete, with its managed allocation and its pending actions).

use std::future::Future;

use agentplane_domain::action::Action;
use agentplane_domain::session::{Session, SessionPatch};
use agentplane_domain::{ProjectId, SessionId, Timestamp};

use super::background::{TenantPause, TenantResume};
use super::platform::RunSessions;
use super::{Allocation, AllocationBinding, PortError, SandboxRecords};

/// What a client's session routes write besides a turn: the session itself (created, changed,
/// deleted), the managed allocation of its compute, its pending actions when it goes, the note
/// that a budget raise may carry a paused turn on, and the record of a turn whose holder died.
/// A session's reads, its agent and the continuation of a paused turn are [`TenantResume`]'s;
/// the cancel of a running turn is [`RunSessions`]'; placing and ending compute are
/// [`AllocationBinding`]'s and [`SandboxRecords`]'.
pub trait SessionStore:
    TenantResume + RunSessions + AllocationBinding + SandboxRecords + Send + Sync
{
    /// Writes a new session; `Conflict` when its id is taken.
    fn create_session(&self, session: &Session) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Lays `patch` over the live session (at `now`); the session as written. `NotFound` when
    /// it is missing or deleted.
    fn update_session(
        &self,
        project: &ProjectId,
        id: &SessionId,
        patch: SessionPatch,
        now: Timestamp,
    ) -> impl Future<Output = Result<Session, PortError>> + Send;

    /// Marks the live session deleted (at `now`); `NotFound` when it is missing or deleted
    /// already.
    fn delete_session(
        &self,
        project: &ProjectId,
        id: &SessionId,
        now: Timestamp,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Records that the session's turn ended in error because its holder died past its hold
    /// (what reads already show); `false` when no dead holder held it any more.
    fn settle_dead_turn(
        &self,
        project: &ProjectId,
        id: &SessionId,
        now: Timestamp,
    ) -> impl Future<Output = Result<bool, PortError>> + Send;

    /// Notes `pause` (again: the same note), so that the retention sweep carries a paused turn
    /// on should the continuation meant for it not be sent.
    fn note_pause(&self, pause: &TenantPause) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Cancels every pending action of the session (each only if still pending); the ones it
    /// did.
    fn cancel_all_pending(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> impl Future<Output = Result<Vec<Action>, PortError>> + Send;

    /// Writes the managed allocation of a new session; `Conflict` when the session has one.
    fn create_allocation(
        &self,
        allocation: &Allocation,
    ) -> impl Future<Output = Result<(), PortError>> + Send;

    /// Releases the session's allocation (releasing a released one changes nothing); the
    /// allocation as released. `NotFound` when the session has none.
    fn release_allocation(
        &self,
        project: &ProjectId,
        session: &SessionId,
        now: Timestamp,
    ) -> impl Future<Output = Result<Allocation, PortError>> + Send;
}
