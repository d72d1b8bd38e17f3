//! The local gateway as a library: its HTTP server (`server`), its secrets on disk
//! (`secrets`) and its webhook targets (`webhooks`), so that tests run the very code the
//! gateway runs.

pub mod envd_proxy;
pub mod secrets;
pub mod server;
pub mod webhooks;

/// The gateway's own base URL when `AGENTPLANE_PUBLIC_URL` is unset: `http://` and its listen
/// address, an unspecified address (`0.0.0.0`, `[::]`) read as loopback.
pub fn public_url(listen: &str) -> String {
    match listen.parse::<std::net::SocketAddr>() {
        Ok(addr) if addr.ip().is_unspecified() => format!("http://127.0.0.1:{}", addr.port()),
        _ => format!("http://{listen}"),
    }
}
