//! The connection wrapper that keeps the server's deadlines. It knows what hyper is doing from
//! two sides: the bytes it moves, and `Busy` guards held from the moment a request's head is
//! parsed until its answer is written. With nothing in flight, a read that waits past the head
//! deadline (a head begun, or a fresh connection) or the idle deadline (between requests) ends
//! the connection; so does a write the client leaves unread for the idle timeout. A response
//! hyper writes on its own (no request reached the router: a head it could not parse) is
//! replaced by the same status in the surface's envelope.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use agentplane_api::edge::guard::{Surface, generic_body};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use super::HttpTimeouts;

/// How much of a request head is kept to tell its surface by its path.
const PREFIX_BYTES: usize = 512;

#[derive(Debug)]
pub struct Activity {
    in_flight: usize,
    /// A head is being read since then (the connection opened, or a byte came after idling).
    head_since: Option<Instant>,
    /// Nothing in flight and no head begun since then.
    idle_since: Option<Instant>,
    /// The start of the head being read (its request line names the surface).
    prefix: Vec<u8>,
    /// The reader waiting while a request was in flight; woken when the connection idles so
    /// that it arms the idle deadline.
    reader: Option<Waker>,
}

impl Activity {
    pub fn opened(now: Instant) -> Self {
        Self { in_flight: 0, head_since: Some(now), idle_since: None, prefix: Vec::new(), reader: None }
    }

    fn deadline(&self, timeouts: &HttpTimeouts) -> Option<Instant> {
        if self.in_flight > 0 {
            return None;
        }
        match (self.head_since, self.idle_since) {
            (Some(since), _) => Some(since + timeouts.header),
            (None, Some(since)) => Some(since + timeouts.idle),
            (None, None) => None,
        }
    }

    fn surface(&self) -> Surface {
        let line = String::from_utf8_lossy(&self.prefix);
        let path = line.split(' ').nth(1).unwrap_or("/");
        Surface::of(path)
    }
}

/// Held while a request is in flight.
pub struct Busy(Arc<Mutex<Activity>>);

impl Busy {
    pub fn start(activity: &Arc<Mutex<Activity>>) -> Self {
        if let Ok(mut state) = activity.lock() {
            state.in_flight += 1;
            state.head_since = None;
            state.idle_since = None;
            state.prefix.clear();
        }
        Self(activity.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Ok(mut state) = self.0.lock() {
            state.in_flight = state.in_flight.saturating_sub(1);
            if state.in_flight == 0 {
                state.idle_since = Some(Instant::now());
                if let Some(reader) = state.reader.take() {
                    reader.wake();
                }
            }
        }
    }
}

pub struct GuardedIo {
    inner: TcpStream,
    activity: Arc<Mutex<Activity>>,
    timeouts: HttpTimeouts,
    read_timer: Pin<Box<Sleep>>,
    write_timer: Pin<Box<Sleep>>,
    /// Since when a write has been waiting for the client to read.
    write_stalled_since: Option<Instant>,
    /// An envelope answer still to be written in place of hyper's own.
    replacement: Vec<u8>,
    /// hyper's own answer is being dropped (it closes the connection after it).
    replacing: bool,
}

impl GuardedIo {
    pub fn new(inner: TcpStream, activity: Arc<Mutex<Activity>>, timeouts: HttpTimeouts) -> Self {
        let far = Instant::now() + timeouts.idle;
        Self {
            inner,
            activity,
            timeouts,
            read_timer: Box::pin(tokio::time::sleep_until(far)),
            write_timer: Box::pin(tokio::time::sleep_until(far)),
            write_stalled_since: None,
            replacement: Vec::new(),
            replacing: false,
        }
    }

    /// Writes what is left of the replacement answer.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.replacement.is_empty() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.replacement) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.replacement.drain(..n);
                }
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Whether `buf` is the start of an answer hyper writes on its own: one begins while a head
    /// is being read and no request is in flight.
    fn is_transport_answer(&self, buf: &[u8]) -> Option<(u16, Surface)> {
        let state = self.activity.lock().ok()?;
        if state.in_flight > 0 || state.head_since.is_none() || !buf.starts_with(b"HTTP/1.") {
            return None;
        }
        let status = std::str::from_utf8(buf.get(9..12)?).ok()?.parse().ok()?;
        Some((status, state.surface()))
    }
}

fn envelope_answer(status: u16, surface: Surface) -> Vec<u8> {
    let status = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::BAD_REQUEST);
    let body = generic_body(surface, status);
    // `/v1` answers carry their request id in a header too, the body's.
    let request_id = body
        .pointer("/error/requestId")
        .and_then(|id| id.as_str())
        .map(|id| format!("x-request-id: {id}\r\n"))
        .unwrap_or_default();
    let body = body.to_string();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncache-control: no-store\r\n\
         {request_id}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error"),
        body.len()
    )
    .into_bytes()
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "the connection's deadline passed")
}

impl AsyncRead for GuardedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = &buf.filled()[before..];
                if !read.is_empty()
                    && let Ok(mut state) = this.activity.lock()
                    && state.in_flight == 0
                {
                    if state.head_since.is_none() {
                        state.head_since = Some(Instant::now());
                        state.idle_since = None;
                    }
                    let room = PREFIX_BYTES.saturating_sub(state.prefix.len());
                    state.prefix.extend_from_slice(&read[..read.len().min(room)]);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            Poll::Pending => {
                let deadline = match this.activity.lock() {
                    Ok(mut state) => {
                        state.reader = Some(cx.waker().clone());
                        state.deadline(&this.timeouts)
                    }
                    Err(_) => None,
                };
                let Some(deadline) = deadline else { return Poll::Pending };
                if Instant::now() >= deadline {
                    return Poll::Ready(Err(timed_out()));
                }
                if this.read_timer.deadline() != deadline {
                    this.read_timer.as_mut().reset(deadline);
                }
                match this.read_timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(timed_out())),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncWrite for GuardedIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if !this.replacing
            && let Some((status, surface)) = this.is_transport_answer(buf)
        {
            this.replacing = true;
            this.replacement = envelope_answer(status, surface);
        }
        if this.replacing {
            // hyper's own bytes are dropped; the envelope goes out instead.
            return match this.poll_replacement(cx) {
                Poll::Ready(Ok(())) | Poll::Pending => Poll::Ready(Ok(buf.len())),
                Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            };
        }
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Pending => {
                let since = *this.write_stalled_since.get_or_insert_with(Instant::now);
                let deadline = since + this.timeouts.idle;
                if Instant::now() >= deadline {
                    return Poll::Ready(Err(timed_out()));
                }
                if this.write_timer.deadline() != deadline {
                    this.write_timer.as_mut().reset(deadline);
                }
                match this.write_timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(timed_out())),
                    Poll::Pending => Poll::Pending,
                }
            }
            done => {
                this.write_stalled_since = None;
                done
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match this.poll_replacement(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match this.poll_replacement(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.inner).poll_shutdown(cx),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_answers_under_v1_carry_the_request_id_in_header_and_body() {
        let answer = String::from_utf8(envelope_answer(431, Surface::Platform)).unwrap_or_default();
        let header = answer.lines().find_map(|l| l.strip_prefix("x-request-id: ")).unwrap_or_default();
        assert!(header.starts_with("req_"), "{answer}");
        assert!(answer.contains(&format!("\"requestId\":\"{header}\"")), "{answer}");
        let agent = String::from_utf8(envelope_answer(431, Surface::Agent)).unwrap_or_default();
        assert!(!agent.contains("x-request-id"), "{agent}");
    }
}
