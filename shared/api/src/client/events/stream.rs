//! `GET /api/client/v1/sessions/{id}/events/stream`: Server-Sent Events. Each event's `id:` is
//! its sequence number; a client that reconnects with `Last-Event-ID` (or `?after=`) gets every
//! later event exactly once. A `:` comment keeps the connection alive while nothing happens, and
//! a `retry:` hint tells clients how soon to reconnect. A stream ends once its key is revoked or
//! its session deleted: both are checked again (one read of both items) before every batch of
//! events and at least every `RECHECK` while nothing happens.
//!
//! Open streams are capped per key and per project (`App::stream_limits`): a stream holds a
//! leased place of each (`stream_slots`) from its first byte to its end and gives both back when
//! it ends for any reason (the client went, its time is up, its key or session went); beyond a
//! cap the answer is 429 `too_many_streams` with `Retry-After`. A stream renews its lease every
//! third of it, so the places of a stream whose process died come back within one lease.

use std::time::Duration;

use agentplane_domain::ProjectId;
use agentplane_domain::api_key::KeyHash;
use agentplane_domain::page::PageLimit;
use agentplane_domain::query::Query;
use agentplane_domain::{SessionId, Timestamp, ValidationError};
use agentplane_store::dynamo::stream_slots::{StreamCaps, StreamHold, StreamsFull};
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use http::{HeaderMap, header};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::wire::{EventBody, StreamParams, parse_seq};
use crate::client::auth::ProjectAuth;
use crate::client::error::{ClientError, Found, StreamLimitScope};
use crate::envelope::ErrorEnvelope;
use crate::{App, edge};

/// Where to resume: `Last-Event-ID` wins over `?after=`; neither means from the start.
fn resume_point(headers: &HeaderMap, query: &Query) -> Result<u64, ClientError> {
    if let Some(value) = headers.get("last-event-id") {
        let text = value.to_str().unwrap_or_default().trim();
        return parse_seq(text).ok_or_else(|| {
            ValidationError::new("Last-Event-ID", "`Last-Event-ID` must be a non-negative integer").into()
        });
    }
    match query.single("after")? {
        Some(text) => parse_seq(text)
            .ok_or_else(|| ValidationError::new("after", "`after` must be a non-negative integer").into()),
        None => Ok(0),
    }
}

/// How often an open stream checks again that its key and its session still stand.
const RECHECK: Duration = Duration::from_secs(3);

/// The bearer token of the request, hashed as the key store keeps it.
fn key_hash(headers: &HeaderMap) -> Option<KeyHash> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| KeyHash::of(token.trim()))
}

/// Whether the stream may go on: the key still authenticates for the project and the session
/// is still live (one read of both items). A storage failure is not a verdict; the next check
/// decides.
async fn still_allowed(app: &App, key: &KeyHash, project: &ProjectId, session: &SessionId) -> bool {
    match app.store.stream_slots().standing(key, project, session).await {
        Ok(standing) => standing,
        Err(err) => {
            tracing::warn!(error = %err, "event stream check failed; retrying");
            true
        }
    }
}

fn lease_until(app: &App) -> Timestamp {
    let ms = i64::try_from(app.stream_limits.lease.as_millis()).unwrap_or(i64::MAX);
    edge::now().plus_millis(ms)
}

/// Takes a place of the key and of its project for a new stream, or answers 429.
async fn admit(app: &App, auth: &ProjectAuth) -> Result<StreamHold, ClientError> {
    let holder: String = edge::random::<12>()?.iter().map(|b| format!("{b:02x}")).collect();
    let limits = app.stream_limits;
    let caps = StreamCaps { per_key: limits.per_key, per_project: limits.per_project };
    let slots = app.store.stream_slots();
    let opened =
        Box::pin(slots.open(&auth.key_id, &auth.project_id, &holder, caps, edge::now(), lease_until(app)))
            .await?;
    opened.map_err(|full| {
        let (limit, max_streams) = match full {
            StreamsFull::Key => (StreamLimitScope::Key, limits.per_key),
            StreamsFull::Project => (StreamLimitScope::Project, limits.per_project),
        };
        ClientError::TooManyStreams {
            limit,
            max_streams,
            retry_after_s: app.stream.retry_ms.div_ceil(1000).max(1),
        }
    })
}

fn frame(event: &agentplane_domain::event::Event) -> Bytes {
    let data = serde_json::to_string(&EventBody::from(event)).unwrap_or_default();
    Bytes::from(format!("id: {}\nevent: {}\ndata: {data}\n\n", event.seq, event.kind.as_str()))
}

/// Follow a session's events as Server-Sent Events.
///
/// Each frame is `id: {seq}`, `event: {type}` and `data: {Event as JSON}`; a `retry:` hint comes
/// first and `: keep-alive` comments while nothing happens. The stream ends when its key is
/// revoked or its session deleted.
#[utoipa::path(
    get,
    path = "/api/client/v1/sessions/{session_id}/events/stream",
    tag = "client",
    operation_id = "client-session-events-stream",
    params(
        ("session_id" = String, Path, description = "The session's id."),
        StreamParams,
        ("Last-Event-ID" = Option<String>, Header, nullable = false, pattern = "^[0-9]+$",
            description = "The `id:` of the last event the client received: the stream resumes after it."),
    ),
    responses(
        (status = 200, description = "An open event stream; each `data:` line is an `Event`.", content_type = "text/event-stream", body = String),
        (status = 400, description = "`after` or `Last-Event-ID` is not a non-negative integer.", body = ErrorEnvelope),
        (status = 404, description = "No such session in this project (`session_not_found`).", body = ErrorEnvelope),
        (status = 429, description = "`too_many_streams`: the key or its project has the most event streams open it may (`limit`: `key` or `project`, `max_streams`); `Retry-After` says when to try again.", body = ErrorEnvelope,
            headers(("Retry-After" = u64, description = "Seconds to wait before opening another stream."))),
    ),
)]
pub async fn stream(
    State(app): State<App>,
    auth: ProjectAuth,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ClientError> {
    let id: SessionId = id.parse().map_err(|_| ClientError::SessionNotFound)?;
    let query = Query::parse(raw.as_deref());
    let cursor = resume_point(&headers, &query)?;
    app.store.sessions().get(&auth.project_id, &id).await.or_not_found(ClientError::SessionNotFound)?;
    // The extractor authenticated this very header, so it is there.
    let key = key_hash(&headers).ok_or(ClientError::InvalidApiKey)?;
    let project = auth.project_id;
    let hold = admit(&app, &auth).await?;

    let (tx, rx) = mpsc::channel::<Bytes>(32);
    tokio::spawn(async move {
        let followed = Followed { app: &app, key: &key, project: &project, session: &id, hold: &hold };
        followed.follow(&tx, cursor).await;
        // The places go back before the body ends: a Lambda invocation may be frozen as soon as
        // its answer is complete. A stream that never gets here (its process died) loses them
        // when its lease runs out.
        if let Err(err) = app.store.stream_slots().close(&hold).await {
            tracing::warn!(error = %err, "could not give an event stream's places back; its lease frees them");
        }
        drop(tx);
    });
    Ok(crate::sse::event_stream(rx))
}

/// One open stream: whom it serves and the places it holds.
struct Followed<'a> {
    app: &'a App,
    key: &'a KeyHash,
    project: &'a ProjectId,
    session: &'a SessionId,
    hold: &'a StreamHold,
}

impl Followed<'_> {
    async fn allowed(&self) -> bool {
        still_allowed(self.app, self.key, self.project, self.session).await
    }

    /// Sends the session's events after `cursor` until the client goes, the stream's time is
    /// up, its key or session goes, or it loses its places.
    async fn follow(&self, tx: &mpsc::Sender<Bytes>, mut cursor: u64) {
        let (app, id) = (self.app, *self.session);
        let config = app.stream.clone();
        let renew_every = app.stream_limits.renew_every();
        let mut news = app.bus.subscribe();
        let started = Instant::now();
        if tx.send(Bytes::from(format!("retry: {}\n\n", config.retry_ms))).await.is_err() {
            return;
        }
        let mut last_write = Instant::now();
        let mut last_check = Instant::now();
        let mut last_renewal = Instant::now();
        let limit = PageLimit::new(100).unwrap_or(PageLimit::DEFAULT);
        while started.elapsed() < config.max_duration {
            if last_renewal.elapsed() >= renew_every {
                match app.store.stream_slots().renew(self.hold, lease_until(app)).await {
                    Ok(()) => {}
                    // Its lease ran out and another stream has its place: this one ends.
                    Err(agentplane_store::StoreError::Conflict) => return,
                    Err(err) => tracing::warn!(error = %err, "event stream lease renewal failed; retrying"),
                }
                last_renewal = Instant::now();
            }
            if last_check.elapsed() >= RECHECK {
                if !self.allowed().await {
                    return;
                }
                last_check = Instant::now();
            }
            match app.store.events().list_after(&id, cursor, limit).await {
                Ok(page) => {
                    if !page.items.is_empty() {
                        if !self.allowed().await {
                            return;
                        }
                        last_check = Instant::now();
                    }
                    for event in &page.items {
                        if tx.send(frame(event)).await.is_err() {
                            return; // the client went away
                        }
                        cursor = event.seq;
                        last_write = Instant::now();
                    }
                    if page.has_more {
                        continue;
                    }
                }
                Err(err) => tracing::warn!(error = %err, "event stream read failed; retrying"),
            }
            if last_write.elapsed() >= config.keep_alive {
                if tx.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                    return;
                }
                last_write = Instant::now();
            }
            // Wake on news of this session from this process, or poll for other writers.
            // A client that goes away wakes it too, so its places go back at once.
            let wait = config
                .poll
                .min(config.keep_alive.saturating_sub(last_write.elapsed()))
                .min(RECHECK.saturating_sub(last_check.elapsed()))
                .min(renew_every.saturating_sub(last_renewal.elapsed()));
            let news_of_this_session = async {
                loop {
                    match news.recv().await {
                        Ok(session) if session == id => return,
                        Ok(_) => continue,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                            std::future::pending::<()>().await;
                        }
                    }
                }
            };
            let _ = tokio::time::timeout(wait, async {
                tokio::select! {
                    () = news_of_this_session => {}
                    () = tx.closed() => {}
                }
            })
            .await;
            if tx.is_closed() {
                return;
            }
        }
    }
}
