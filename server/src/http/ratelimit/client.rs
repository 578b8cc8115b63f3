//! The client address a request came from, as the key of its unauthenticated bucket.
//!
//! [`serve`](crate::http::serve) records each connection's peer address in the request's
//! extensions (axum's `ConnectInfo<SocketAddr>`). IPv6 clients are keyed on their /64, the
//! block one host usually holds, so walking through one's own addresses does not buy new
//! buckets. Behind a reverse proxy every request shares the proxy's address.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::Extensions;
use axum::http::request::Parts;

/// Where a request came from; `None` when the server did not record it (a router driven
/// without [`serve`](crate::http::serve)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub Option<IpAddr>);

impl ClientAddr {
    /// The address recorded in a request's extensions.
    pub fn of(extensions: &Extensions) -> Self {
        ClientAddr(
            extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(addr)| addr.ip()),
        )
    }

    /// The bucket key: the IPv4 address, or the /64 of an IPv6 one.
    pub fn key(self) -> Vec<u8> {
        match self.0.map(canonical) {
            Some(IpAddr::V4(v4)) => [b"v4:".as_slice(), &v4.octets()].concat(),
            Some(IpAddr::V6(v6)) => [b"v6:".as_slice(), &v6.octets()[..8]].concat(),
            None => b"unknown".to_vec(),
        }
    }
}

/// IPv4-mapped IPv6 addresses are the IPv4 client they carry.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Infallible> {
        Ok(ClientAddr::of(&parts.extensions))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Vec<u8> {
        ClientAddr(Some(s.parse().expect("ip"))).key()
    }

    #[test]
    fn keys_group_a_hosts_addresses() {
        // (a, b, same bucket)
        let cases = [
            ("10.0.0.1", "10.0.0.1", true),
            ("10.0.0.1", "10.0.0.2", false),
            ("2001:db8:1:2::1", "2001:db8:1:2:ffff::9", true),
            ("2001:db8:1:2::1", "2001:db8:1:3::1", false),
            ("::ffff:10.0.0.1", "10.0.0.1", true),
            ("::1", "127.0.0.1", false),
        ];
        for (a, b, same) in cases {
            assert_eq!(key(a) == key(b), same, "{a} vs {b}");
        }
        assert_eq!(ClientAddr(None).key(), b"unknown".to_vec());
    }

    #[test]
    fn the_address_comes_from_connect_info() {
        let mut extensions = Extensions::new();
        assert_eq!(ClientAddr::of(&extensions), ClientAddr(None));
        let addr: SocketAddr = "192.0.2.7:4242".parse().expect("addr");
        extensions.insert(ConnectInfo(addr));
        assert_eq!(ClientAddr::of(&extensions), ClientAddr(Some(addr.ip())));
    }
}
