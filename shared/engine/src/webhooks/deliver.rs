//! One HTTP delivery of a signed message. The URL's host is resolved here, every address it
//! resolves to is judged by the deployment's [`PrivateTargets`] (a public address passes; a
//! non-public one only when allow-listed, never the AWS endpoint's or the gateway's port), and
//! the request is sent to exactly those checked addresses: a client built for
//! this one request pins the name to them (`resolve_to_addrs`), so a DNS answer that changes
//! between the check and the connection (rebinding) is never used. No proxy, no redirects
//! (a 3xx is an answer like any other non-2xx), one overall timeout.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use agentplane_domain::webhook::signature::SignedHeaders;
use agentplane_domain::webhook::targets::PrivateTargets;
use agentplane_domain::webhook::{MAX_EXCERPT_BYTES, UrlHost, check_url, excerpt};

/// Why a URL may not be delivered to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("the URL is invalid: {0}")]
    Invalid(String),
    /// The host is, or resolves to, an address deliveries may not reach.
    #[error("the URL's host {host} is {reason}")]
    NotAllowed { host: String, reason: String },
    #[error("the URL's host {0} does not resolve")]
    Unresolvable(String),
}

/// The addresses `url` may be delivered to: its host's, every one of them judged by `targets`
/// (one refused address refuses the URL).
pub async fn resolve(
    url: &str,
    targets: &PrivateTargets,
    timeout: Duration,
) -> Result<Vec<SocketAddr>, TargetError> {
    let target = check_url(url).map_err(|e| TargetError::Invalid(e.message))?;
    let (label, addrs) = match &target.host {
        UrlHost::Address(ip) => (ip.to_string(), vec![SocketAddr::new(*ip, target.port)]),
        UrlHost::Name(name) => {
            let lookup = tokio::net::lookup_host((name.as_str(), target.port));
            let found: Vec<SocketAddr> = match tokio::time::timeout(timeout, lookup).await {
                Ok(Ok(found)) => found.collect(),
                _ => Vec::new(),
            };
            if found.is_empty() {
                return Err(TargetError::Unresolvable(name.clone()));
            }
            (name.clone(), found)
        }
    };
    for addr in &addrs {
        targets
            .judge(&target.host, *addr)
            .map_err(|reason| TargetError::NotAllowed { host: label.clone(), reason })?;
    }
    Ok(addrs)
}

/// What one delivery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status_code: Option<u16>,
    pub duration_ms: u64,
    pub error: Option<String>,
    pub response_excerpt: Option<String>,
}

/// POSTs `body` with `headers` to `url`, within `timeout` in all.
pub async fn deliver(
    url: &str,
    headers: &SignedHeaders,
    body: &str,
    targets: &PrivateTargets,
    timeout: Duration,
) -> Outcome {
    let started = Instant::now();
    let failed = |error: String| Outcome {
        status_code: None,
        duration_ms: elapsed_ms(started),
        error: Some(error),
        response_excerpt: None,
    };
    let addrs = match resolve(url, targets, timeout).await {
        Ok(addrs) => addrs,
        Err(err) => return failed(err.to_string()),
    };
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout.saturating_sub(started.elapsed()).max(Duration::from_millis(1)));
    // The HTTP client reads the URL with its own parser: it must see the very host that was
    // checked, or the pinning below would not apply to the name it connects to.
    let (Ok(target), Ok(parsed)) = (check_url(url), reqwest::Url::parse(url)) else {
        return failed("the URL is invalid".to_owned());
    };
    let checked = match &target.host {
        UrlHost::Name(name) => name.clone(),
        UrlHost::Address(ip) => ip.to_string(),
    };
    let seen = parsed.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    if seen != checked || parsed.port_or_known_default() != Some(target.port) {
        return failed("the URL's host is ambiguous".to_owned());
    }
    if let UrlHost::Name(name) = &target.host {
        builder = builder.resolve_to_addrs(name, &addrs);
    }
    let client = match builder.build() {
        Ok(client) => client,
        Err(err) => return failed(format!("could not build the HTTP client: {err}")),
    };
    let mut request = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::USER_AGENT, "Agentplane-Webhooks/1");
    for (name, value) in headers.pairs() {
        request = request.header(name, value);
    }
    let mut response = match request.body(body.to_owned()).send().await {
        Ok(response) => response,
        Err(err) => return failed(describe(&err, timeout)),
    };
    let status = response.status().as_u16();
    // Only the start of the answer is kept; the rest is not read.
    let mut head = Vec::new();
    let mut error = None;
    while head.len() <= MAX_EXCERPT_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => head.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(err) => {
                error = Some(describe(&err, timeout));
                break;
            }
        }
    }
    Outcome {
        status_code: Some(status),
        duration_ms: elapsed_ms(started),
        error,
        response_excerpt: (!head.is_empty()).then(|| excerpt(&head)),
    }
}

fn describe(err: &reqwest::Error, timeout: Duration) -> String {
    if err.is_timeout() {
        format!("timed out after {} ms", timeout.as_millis())
    } else if err.is_connect() {
        "could not connect".to_owned()
    } else {
        "the request failed".to_owned()
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn private_hosts_are_refused_unless_listed() {
        let t = Duration::from_secs(2);
        let none = PrivateTargets::none();
        let listed = PrivateTargets::parse("127.0.0.1:9").expect("list");
        for url in [
            "http://127.0.0.1/",
            "http://10.0.0.1/",
            "http://169.254.169.254/",
            "http://[::1]/",
            "http://localhost/",
        ] {
            assert!(matches!(resolve(url, &none, t).await, Err(TargetError::NotAllowed { .. })), "{url}");
        }
        assert_eq!(
            resolve("http://127.0.0.1:9/", &listed, t).await,
            Ok(vec!["127.0.0.1:9".parse().expect("addr")])
        );
        assert!(matches!(
            resolve("http://127.0.0.1:10/", &listed, t).await,
            Err(TargetError::NotAllowed { .. })
        ));
        assert!(matches!(resolve("ftp://x.example/", &listed, t).await, Err(TargetError::Invalid(_))));
    }

    #[tokio::test]
    async fn the_client_connects_to_the_host_that_was_checked() {
        let headers = SignedHeaders { id: "evt_1".into(), timestamp: "1".into(), signature: "v1,x".into() };
        // Nothing listens on port 9 of loopback: the delivery gets as far as connecting.
        let listed = PrivateTargets::parse("127.0.0.1:9,[::1]:9,localhost:9").expect("list");
        for url in ["http://127.0.0.1:9/", "http://[::1]:9/", "http://LOCALHOST:9/x"] {
            let outcome = deliver(url, &headers, "{}", &listed, Duration::from_secs(1)).await;
            assert_eq!(outcome.error.as_deref(), Some("could not connect"), "{url}: {outcome:?}");
        }
    }

    #[tokio::test]
    async fn a_refused_delivery_never_connects_and_says_why() {
        let headers = SignedHeaders { id: "evt_1".into(), timestamp: "1".into(), signature: "v1,x".into() };
        let outcome =
            deliver("http://127.0.0.1:9/", &headers, "{}", &PrivateTargets::none(), Duration::from_secs(1))
                .await;
        assert_eq!(outcome.status_code, None);
        assert!(outcome.error.as_deref().is_some_and(|e| e.contains("loopback")), "{outcome:?}");
    }
}
