//! Which non-public addresses a delivery may reach (server-side request forgery, the
//! deployment's side of it). A public address is always a target. A non-public one
//! ([`address::forbidden`]) is a target only when the deployment lists it: `host:port` entries
//! (`AGENTPLANE_WEBHOOKS_ALLOWED_PRIVATE=127.0.0.1:9000,receiver.local:8080`), the receivers
//! someone runs for development. Some targets are never reached whatever the list says:
//!
//! - the cloud metadata service;
//! - the ports of the deployment's own services on any non-public address ([`RefusedPort`]):
//!   the AWS endpoint (LocalStack answers unsigned requests, so a delivery there could send to
//!   a queue and read its answer back) and the gateway's own listen port. A port, not an
//!   address: a service listening on every interface is reachable through each of them.
//!
//! The sandbox node listens on no port (it polls Core), so it has none to refuse.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use super::{UrlHost, address, check_url};

/// The host of an allow-list entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHost {
    /// Allows exactly this address (whatever name resolved to it).
    Address(IpAddr),
    /// Allows URLs naming this host (lowercase), whatever non-public address it resolves to.
    Name(String),
}

/// One `host:port` of the allow-list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedTarget {
    pub host: AllowedHost,
    pub port: u16,
}

impl fmt::Display for AllowedTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            AllowedHost::Address(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
            AllowedHost::Address(ip) => write!(f, "{ip}:{}", self.port),
            AllowedHost::Name(name) => write!(f, "{name}:{}", self.port),
        }
    }
}

/// A port never reached on a non-public address: `what` listens there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedPort {
    pub port: u16,
    pub what: String,
}

/// The deployment's rules for non-public targets. The default reaches none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrivateTargets {
    allowed: Vec<AllowedTarget>,
    any_loopback_port: bool,
    refused: Vec<RefusedPort>,
}

/// Why an allow-list is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("webhook allow-list entry `{entry}`: {why}")]
pub struct AllowListError {
    pub entry: String,
    pub why: String,
}

impl PrivateTargets {
    /// No non-public target (a deployment's default).
    pub fn none() -> Self {
        Self::default()
    }

    /// Parses a comma-separated list of `host:port` entries (a port is required; an IPv6
    /// address in brackets); empty entries are skipped.
    pub fn parse(list: &str) -> Result<Self, AllowListError> {
        let mut allowed = Vec::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            allowed.push(parse_entry(entry)?);
        }
        Ok(Self { allowed, ..Self::default() })
    }

    /// Also allows `target`.
    pub fn allowing(mut self, target: AllowedTarget) -> Self {
        self.allowed.push(target);
        self
    }

    /// Every port of a loopback address, for a test harness whose receivers bind ports chosen
    /// by the system. Never read from configuration; the refused ports still apply.
    pub fn any_loopback_port() -> Self {
        Self { any_loopback_port: true, ..Self::default() }
    }

    /// Never reaches `port` on a non-public address: `what` listens there.
    pub fn refusing(mut self, port: u16, what: &str) -> Self {
        self.refused.push(RefusedPort { port, what: what.to_owned() });
        self
    }

    pub fn allowed(&self) -> &[AllowedTarget] {
        &self.allowed
    }

    pub fn refused(&self) -> &[RefusedPort] {
        &self.refused
    }

    /// The entries that name a refused port: they would never be reached (a deployment should
    /// not start with them, so that nobody believes they are).
    pub fn conflicts(&self) -> Vec<String> {
        self.allowed
            .iter()
            .filter_map(|a| {
                self.refused
                    .iter()
                    .find(|r| r.port == a.port)
                    .map(|r| format!("{a} is the port of {}", r.what))
            })
            .collect()
    }

    /// Whether a delivery to the URL naming `host` may connect to `addr` (one address the host
    /// resolved to); `Err` says why not.
    pub fn judge(&self, host: &UrlHost, addr: SocketAddr) -> Result<(), String> {
        let ip = addr.ip().to_canonical();
        let Some(reason) = address::forbidden(ip) else { return Ok(()) };
        if reason == address::METADATA {
            return Err(reason.to_owned());
        }
        if let Some(refused) = self.refused.iter().find(|r| r.port == addr.port()) {
            return Err(format!("port {} of {reason}, where {} listens", addr.port(), refused.what));
        }
        let listed = self.allowed.iter().any(|a| {
            a.port == addr.port()
                && match (&a.host, host) {
                    (AllowedHost::Address(allowed), _) => allowed.to_canonical() == ip,
                    (AllowedHost::Name(allowed), UrlHost::Name(name)) => allowed == name,
                    (AllowedHost::Name(_), UrlHost::Address(_)) => false,
                }
        });
        if listed || (self.any_loopback_port && ip.is_loopback()) {
            return Ok(());
        }
        Err(format!("{reason} not on the deployment's allow-list"))
    }
}

fn parse_entry(entry: &str) -> Result<AllowedTarget, AllowListError> {
    let refuse = |why: &str| AllowListError { entry: entry.to_owned(), why: why.to_owned() };
    let has_port = entry
        .rsplit_once(':')
        .is_some_and(|(host, port)| !port.is_empty() && (!host.contains(':') || host.ends_with(']')));
    if !has_port || entry.contains(['/', '?', '@', '#']) {
        return Err(refuse("must be host:port"));
    }
    let target = check_url(&format!("http://{entry}/"))
        .map_err(|e| refuse(e.message.strip_prefix("`url` ").unwrap_or(&e.message)))?;
    let host = match target.host {
        UrlHost::Address(ip) => AllowedHost::Address(ip),
        UrlHost::Name(name) => AllowedHost::Name(name),
    };
    Ok(AllowedTarget { host, port: target.port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SocketAddr {
        text.parse().expect("socket address")
    }

    fn name(host: &str) -> UrlHost {
        UrlHost::Name(host.to_owned())
    }

    fn ip(text: &str) -> UrlHost {
        UrlHost::Address(text.parse().expect("ip"))
    }

    #[test]
    fn entries_need_a_host_and_a_port() {
        let list = PrivateTargets::parse(" 127.0.0.1:9000, Receiver.Local:8080 ,[::1]:9001,").expect("list");
        let shown: Vec<String> = list.allowed().iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["127.0.0.1:9000", "receiver.local:8080", "[::1]:9001"]);
        for bad in [
            "127.0.0.1",
            "127.0.0.1:",
            "127.0.0.1:0",
            "127.0.0.1:*",
            "host:99999",
            "::1:80",
            "a/b:1",
            "x@y:1",
        ] {
            assert!(PrivateTargets::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(PrivateTargets::parse("").expect("empty"), PrivateTargets::none());
    }

    #[test]
    fn a_non_public_address_is_reached_only_when_listed() {
        let none = PrivateTargets::none();
        assert!(none.judge(&ip("127.0.0.1"), at("127.0.0.1:9000")).is_err());
        assert_eq!(none.judge(&ip("93.184.216.34"), at("93.184.216.34:443")), Ok(()));

        let list = PrivateTargets::parse("127.0.0.1:9000,receiver.local:8080").expect("list");
        assert_eq!(list.judge(&ip("127.0.0.1"), at("127.0.0.1:9000")), Ok(()));
        // The listed address whatever the name, and the mapped IPv6 form of it.
        assert_eq!(list.judge(&name("localhost"), at("127.0.0.1:9000")), Ok(()));
        assert_eq!(list.judge(&ip("::ffff:127.0.0.1"), at("[::ffff:127.0.0.1]:9000")), Ok(()));
        // Another port, another loopback address, ::1.
        assert!(list.judge(&ip("127.0.0.1"), at("127.0.0.1:9001")).is_err());
        assert!(list.judge(&ip("127.0.0.2"), at("127.0.0.2:9000")).is_err());
        assert!(list.judge(&name("localhost"), at("[::1]:9000")).is_err());
        // A listed name on its port, whatever private address it resolves to; not another name.
        assert_eq!(list.judge(&name("receiver.local"), at("10.1.2.3:8080")), Ok(()));
        assert!(list.judge(&name("other.local"), at("10.1.2.3:8080")).is_err());
        assert!(list.judge(&ip("10.1.2.3"), at("10.1.2.3:8080")).is_err());
    }

    #[test]
    fn refused_ports_and_the_metadata_service_are_never_reached() {
        let list = PrivateTargets::parse("127.0.0.1:4566,169.254.169.254:80,10.0.0.5:8080")
            .expect("list")
            .refusing(4566, "the AWS endpoint")
            .refusing(8080, "this gateway");
        let err = list.judge(&ip("127.0.0.1"), at("127.0.0.1:4566")).expect_err("refused");
        assert!(err.contains("the AWS endpoint"), "{err}");
        assert!(list.judge(&ip("10.0.0.5"), at("10.0.0.5:8080")).is_err());
        assert!(list.judge(&ip("169.254.169.254"), at("169.254.169.254:80")).is_err());
        assert_eq!(list.conflicts().len(), 2, "{:?}", list.conflicts());
        // A public host on those ports is somebody else's service.
        assert_eq!(list.judge(&ip("93.184.216.34"), at("93.184.216.34:8080")), Ok(()));
        let tests = PrivateTargets::any_loopback_port().refusing(4566, "the AWS endpoint");
        assert_eq!(tests.judge(&ip("127.0.0.1"), at("127.0.0.1:41234")), Ok(()));
        assert!(tests.judge(&ip("127.0.0.1"), at("127.0.0.1:4566")).is_err());
        assert!(tests.judge(&ip("10.0.0.1"), at("10.0.0.1:41234")).is_err());
    }
}
