//! A network allow-list: which hosts and ports an environment's setup may reach through the
//! egress proxy (docs/ARCHITECTURE.md §6.5). Pure: parsing, matching and display.

use std::fmt;
use std::net::Ipv6Addr;

/// The ports a rule without an explicit port allows.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// What an environment's setup may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkPolicy {
    /// Nothing: every attempt is refused.
    None,
    /// Only the hosts (and ports) of these rules.
    Allow(Vec<HostRule>),
    /// Every host and port.
    All,
}

/// One allow-list entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    pub host: HostPattern,
    /// `None` allows [`DEFAULT_PORTS`] only.
    pub port: Option<u16>,
}

/// The host part of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// One lowercase name, IPv4 address, or IPv6 address (canonical form, no brackets).
    Exact(String),
    /// `*.suffix`: every subdomain of `suffix` (lowercase), not `suffix` itself.
    Subdomains(String),
}

/// Why an allow-list could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("network allow-list entry {entry:?}: {reason}")]
    Entry { entry: String, reason: String },
    #[error(
        "network allow-list: \"*\" allows every host and cannot be combined with other entries"
    )]
    MixedWildcard,
}

impl NetworkPolicy {
    /// `[]` is [`NetworkPolicy::None`], `["*"]` is [`NetworkPolicy::All`], anything else a
    /// list of `host`, `host:port`, `*.suffix[:port]` or `[v6]:port` entries.
    pub fn parse(entries: &[String]) -> Result<NetworkPolicy, PolicyError> {
        if entries.is_empty() {
            return Ok(NetworkPolicy::None);
        }
        if entries.iter().any(|e| e == "*") {
            return match entries.len() {
                1 => Ok(NetworkPolicy::All),
                _ => Err(PolicyError::MixedWildcard),
            };
        }
        let rules = entries
            .iter()
            .map(|e| HostRule::parse(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NetworkPolicy::Allow(rules))
    }

    /// Whether `host:port` may be reached. `host` is compared case-insensitively, a trailing
    /// dot and IPv6 brackets are ignored.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        match self {
            NetworkPolicy::None => false,
            NetworkPolicy::All => true,
            NetworkPolicy::Allow(rules) => {
                let host = normalize_host(host);
                rules.iter().any(|r| r.matches(&host, port))
            }
        }
    }
}

impl HostRule {
    fn parse(entry: &str) -> Result<HostRule, PolicyError> {
        let fail = |reason: &str| PolicyError::Entry {
            entry: entry.to_owned(),
            reason: reason.to_owned(),
        };
        check_shape(entry).map_err(fail)?;
        let (host, port) = split_host_port(entry).map_err(fail)?;
        let port = port.map(parse_port).transpose().map_err(fail)?;
        let host = parse_host(host).map_err(fail)?;
        Ok(HostRule { host, port })
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = match self.port {
            Some(p) => p == port,
            None => DEFAULT_PORTS.contains(&port),
        };
        port_ok && self.host.matches(host)
    }
}

impl HostPattern {
    fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(name) => name == host,
            HostPattern::Subdomains(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
        }
    }
}

/// The form hosts are compared in: lowercase, no trailing dot, IPv6 canonical and unbracketed.
pub(crate) fn normalize_host(host: &str) -> String {
    let host = host.strip_suffix('.').unwrap_or(host);
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<Ipv6Addr>() {
        Ok(v6) => v6.to_string(),
        Err(_) => bare.to_ascii_lowercase(),
    }
}

fn check_shape(entry: &str) -> Result<(), &'static str> {
    if entry.is_empty() {
        return Err("the entry is empty");
    }
    if entry.chars().any(char::is_whitespace) {
        return Err("the entry contains whitespace");
    }
    if entry.contains("://") {
        return Err("drop the scheme: write `host` or `host:port`");
    }
    if entry.contains('/') {
        return Err("drop the path: write `host` or `host:port`");
    }
    Ok(())
}

/// `[v6]:port`, `[v6]`, bare `v6`, `host:port` or `host`.
fn split_host_port(entry: &str) -> Result<(&str, Option<&str>), &'static str> {
    if let Some(rest) = entry.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address opened with `[` has no closing `]`")?;
        if host.parse::<Ipv6Addr>().is_err() {
            return Err("brackets hold only an IPv6 address");
        }
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(port))),
                None => Err("write `[address]:port`"),
            },
        };
    }
    if entry.matches(':').count() > 1 {
        return match entry.parse::<Ipv6Addr>() {
            Ok(_) => Ok((entry, None)),
            Err(_) => Err("write IPv6 addresses in brackets, as `[::1]:8000`"),
        };
    }
    Ok(match entry.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (entry, None),
    })
}

fn parse_port(port: &str) -> Result<u16, &'static str> {
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err("the port must be a number from 1 to 65535");
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err("the port must be a number from 1 to 65535"),
    }
}

fn parse_host(host: &str) -> Result<HostPattern, &'static str> {
    if let Ok(v6) = host.parse::<Ipv6Addr>() {
        return Ok(HostPattern::Exact(v6.to_string()));
    }
    if host.contains(':') || host.contains('[') || host.contains(']') {
        return Err("not a valid IPv6 address");
    }
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    match host.strip_prefix("*.") {
        Some(suffix) => check_name(suffix).map(|()| HostPattern::Subdomains(suffix.to_owned())),
        None => check_name(&host).map(|()| HostPattern::Exact(host)),
    }
}

fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("the host is empty");
    }
    if name.contains('*') {
        return Err("`*` is allowed only as `*` alone or as a leading `*.`");
    }
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_';
    if !name.bytes().all(allowed) {
        return Err("a host name may hold only letters, digits, `-`, `_` and `.`");
    }
    if name.split('.').any(str::is_empty) {
        return Err("a host name has an empty label (`..`, or a leading dot)");
    }
    Ok(())
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match &self.host {
            HostPattern::Exact(h) if h.contains(':') => format!("[{h}]"),
            HostPattern::Exact(h) => h.clone(),
            HostPattern::Subdomains(s) => format!("*.{s}"),
        };
        match self.port {
            Some(port) => write!(f, "{host}:{port}"),
            None => write!(f, "{host}"),
        }
    }
}

impl fmt::Display for NetworkPolicy {
    /// `no network access`, `any host`, or the rules joined with `, ` (a rule without a port
    /// allows ports 80 and 443).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkPolicy::None => f.write_str("no network access"),
            NetworkPolicy::All => f.write_str("any host"),
            NetworkPolicy::Allow(rules) => {
                let list: Vec<String> = rules.iter().map(ToString::to_string).collect();
                write!(f, "{}", list.join(", "))
            }
        }
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
