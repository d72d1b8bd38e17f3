//! Addresses a webhook must never reach (server-side request forgery): the host itself, private
//! networks, link-local (with the cloud metadata service at 169.254.169.254 and fd00:ec2::254),
//! shared/carrier NAT, multicast, reserved and unspecified ranges; IPv6 forms that embed an IPv4
//! address (mapped, compatible, NAT64, 6to4) are judged by that address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The reason [`forbidden`] gives for the cloud metadata service (never a target, even listed).
pub const METADATA: &str = "the cloud metadata service";

/// Why `ip` may not be reached, or `None` when it is a public address.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) {
        return Some(METADATA);
    }
    match (a, b, c) {
        (0, _, _) => Some("an unspecified address"),
        (127, _, _) => Some("a loopback address"),
        (10, _, _) | (192, 168, _) => Some("a private address"),
        (172, 16..=31, _) => Some("a private address"),
        (169, 254, _) => Some("a link-local address"),
        (100, 64..=127, _) => Some("a shared (carrier NAT) address"),
        (192, 0, 0) | (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Some("a reserved address"),
        (198, 18..=19, _) => Some("a reserved address"),
        (224..=239, _, _) => Some("a multicast address"),
        (240..=255, _, _) => Some("a reserved address"),
        _ => None,
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("an unspecified address");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some(METADATA);
    }
    // ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), 64:ff9b::a.b.c.d (NAT64).
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..5] == [0; 5] && s[5] == 0xffff {
        return forbidden_v4(tail);
    }
    if s[..6] == [0; 6] {
        return Some("an IPv4-compatible address");
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return forbidden_v4(tail);
    }
    if s[0] == 0x2002 {
        let inner = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return forbidden_v4(inner);
    }
    match s[0] {
        0xfc00..=0xfdff => Some("a unique-local (private) address"),
        0xfe80..=0xfebf => Some("a link-local address"),
        0xfec0..=0xfeff => Some("a site-local address"),
        0xff00..=0xffff => Some("a multicast address"),
        // Documentation and Teredo (tunnels to arbitrary IPv4 addresses).
        0x2001 if s[1] == 0xdb8 || s[1] == 0 => Some("a reserved address"),
        _ => None,
    }
}
