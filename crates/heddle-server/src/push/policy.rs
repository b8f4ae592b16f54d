//! Where push notifications may go: the SSRF policy.
//!
//! Checked twice. When a config is created its URL must parse, use `https`
//! (or `http` when allowed) and must not name a refused address literally or
//! as `localhost`. When a delivery is dialed, every address the host name
//! resolves to is checked ([`PolicyResolver`] is the HTTP client's resolver),
//! so a name that resolves to a private address is refused at dial time,
//! whatever it resolved to when the config was created. Redirects are never
//! followed.
//!
//! An IPv6 address that carries an IPv4 address the network delivers to
//! (IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64, 6to4) is judged by
//! that IPv4 address as well; Teredo is refused outright.

use std::{
    fmt,
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    str::FromStr,
    sync::Arc,
};

/// An IP network in CIDR notation (`10.0.0.0/8`, `::1/128`; a bare address
/// is a single host).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// A CIDR that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not an IP network (e.g. 10.0.0.0/8, 127.0.0.1/32 or ::1/128)")]
pub struct BadCidr(String);

impl FromStr for Cidr {
    type Err = BadCidr;
    fn from_str(s: &str) -> Result<Self, BadCidr> {
        let bad = || BadCidr(s.to_owned());
        let (addr, prefix) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.parse::<u8>().ok().filter(|p| *p <= max).ok_or_else(bad)?,
            None => max,
        };
        Ok(Self { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Cidr {
    const fn v4(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Self {
        Self {
            addr: IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
            prefix,
        }
    }

    const fn v6(segments: [u16; 8], prefix: u8) -> Self {
        let [a, b, c, d, e, f, g, h] = segments;
        Self {
            addr: IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, g, h)),
            prefix,
        }
    }

    /// Whether `ip` is inside this network (v4 and v6 never match each other).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Networks a push is never sent to unless allow-listed.
const REFUSED: &[(Cidr, &str)] = &[
    (Cidr::v4(0, 0, 0, 0, 8), "\"this\" network"),
    (Cidr::v4(10, 0, 0, 0, 8), "private"),
    (Cidr::v4(100, 64, 0, 0, 10), "carrier-grade NAT"),
    (Cidr::v4(127, 0, 0, 0, 8), "loopback"),
    (
        Cidr::v4(169, 254, 0, 0, 16),
        "link-local (and cloud metadata)",
    ),
    (Cidr::v4(172, 16, 0, 0, 12), "private"),
    (Cidr::v4(192, 0, 0, 0, 24), "IETF protocol assignments"),
    (Cidr::v4(192, 168, 0, 0, 16), "private"),
    (Cidr::v4(198, 18, 0, 0, 15), "benchmarking"),
    (Cidr::v4(224, 0, 0, 0, 4), "multicast"),
    (Cidr::v4(240, 0, 0, 0, 4), "reserved"),
    (Cidr::v6([0, 0, 0, 0, 0, 0, 0, 0], 128), "unspecified"),
    (Cidr::v6([0, 0, 0, 0, 0, 0, 0, 1], 128), "loopback"),
    // Teredo tunnels to an IPv4 client behind a NAT (the address carries it
    // obfuscated, beside the Teredo server's): never a webhook host.
    (Cidr::v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32), "Teredo"),
    (Cidr::v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), "unique-local"),
    (Cidr::v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), "link-local"),
    (
        Cidr::v6([0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254], 128),
        "cloud metadata",
    ),
    (Cidr::v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "multicast"),
];

/// Where IPv6 addresses carry an IPv4 address: the network, its name and
/// each place in the address the IPv4 address may sit, as (first bit,
/// length) runs counted from the top bit. A place with several runs skips
/// the bits between them.
type Embedding = (Cidr, &'static str, &'static [&'static [(u32, u32)]]);

const LAST_32: &[&[(u32, u32)]] = &[&[(96, 32)]];

const EMBEDDINGS: &[Embedding] = &[
    (
        Cidr::v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96),
        "IPv4-mapped",
        LAST_32,
    ),
    // Deprecated (RFC 4291 §2.5.5.1), still routed to IPv4 by some stacks.
    (
        Cidr::v6([0, 0, 0, 0, 0, 0, 0, 0], 96),
        "IPv4-compatible",
        LAST_32,
    ),
    // SIIT (RFC 2765): ::ffff:0:a.b.c.d.
    (
        Cidr::v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96),
        "IPv4-translated",
        LAST_32,
    ),
    (
        Cidr::v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96),
        "NAT64",
        LAST_32,
    ),
    // Local-use NAT64 (RFC 8215): the translator's prefix length inside the
    // /48 is local knowledge, so every RFC 6052 layout that fits is judged
    // (/96, the usual one, first; then /64, /56 and /48, which skip bits
    // 64..72).
    (
        Cidr::v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),
        "local-use NAT64",
        &[
            &[(96, 32)],
            &[(72, 32)],
            &[(56, 8), (72, 24)],
            &[(48, 16), (72, 16)],
        ],
    ),
    // 6to4 (RFC 3056): 2002:a.b.c.d::/48.
    (
        Cidr::v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16),
        "6to4",
        &[&[(16, 32)]],
    ),
];

/// The IPv4 address made of `runs` of `ip`'s bits (see [`Embedding`]).
fn ipv4_at(ip: Ipv6Addr, runs: &[(u32, u32)]) -> Ipv4Addr {
    // The runs are constants: each lies inside the address (from + len <=
    // 128, len <= 32) and together they make 32 bits, so nothing here
    // overflows; the accumulator is wide enough for a 32-bit shift.
    let bits = u128::from(ip);
    let mut v4: u64 = 0;
    for &(from, len) in runs {
        let run = (bits >> (128 - from - len)) & ((1u128 << len) - 1);
        v4 = (v4 << len) | run as u64;
    }
    Ipv4Addr::from(v4 as u32)
}

/// The IPv4 addresses `ip` carries, each with the form that carries it.
fn embedded_ipv4(ip: Ipv6Addr) -> impl Iterator<Item = (Ipv4Addr, &'static str)> {
    EMBEDDINGS
        .iter()
        .filter(move |(net, _, _)| net.contains(IpAddr::V6(ip)))
        .flat_map(move |(_, form, places)| {
            places.iter().map(move |runs| (ipv4_at(ip, runs), *form))
        })
}

/// The refused range `ip` is in, if any (the allow list aside).
fn refused_range(ip: IpAddr) -> Option<&'static (Cidr, &'static str)> {
    REFUSED.iter().find(|(net, _)| net.contains(ip))
}

/// An address or URL the policy refuses, with the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// The SSRF policy for push notification targets.
#[derive(Clone, Debug, Default)]
pub struct PushPolicy {
    /// Networks allowed even though they are in a refused range.
    pub allow: Vec<Cidr>,
    /// Whether plain `http` URLs are allowed (default: `https` only).
    pub allow_http: bool,
}

impl PushPolicy {
    /// Why `ip` may not be dialed, if it may not.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), Refused> {
        let allowed = |ip: IpAddr| self.allow.iter().any(|c| c.contains(ip));
        if allowed(ip) {
            return Ok(());
        }
        if let Some((net, why)) = refused_range(ip) {
            return Err(Refused(format!(
                "push target address {ip} is refused: {why} range {net} (allow it with --push-allow)"
            )));
        }
        // An IPv6 address that reaches an IPv4 one is judged by it too, the
        // allow list included.
        if let IpAddr::V6(v6) = ip {
            for (v4, form) in embedded_ipv4(v6) {
                let v4 = IpAddr::V4(v4);
                if allowed(v4) {
                    continue;
                }
                if let Some((net, why)) = refused_range(v4) {
                    return Err(Refused(format!(
                        "push target address {ip} is refused: it is {form} for {v4}, \
                         in the {why} range {net} (allow it with --push-allow)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Checks a webhook URL when a config is created: scheme, and the host
    /// when it is an IP literal or `localhost`. Names are checked again, by
    /// address, at dial time.
    pub fn check_url(&self, raw: &str) -> Result<reqwest::Url, Refused> {
        let url = reqwest::Url::parse(raw)
            .map_err(|e| Refused(format!("{raw:?} is not an absolute URL: {e}")))?;
        match url.scheme() {
            "https" => {}
            "http" if self.allow_http => {}
            "http" => {
                return Err(Refused(
                    "push URLs must use https (the server was not started with --push-allow-http)"
                        .into(),
                ));
            }
            other => return Err(Refused(format!("push URLs must use https, not {other}"))),
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Refused(
                "push URLs must not carry credentials; use the config's authentication".into(),
            ));
        }
        match url.host() {
            None => return Err(Refused("the push URL has no host".into())),
            Some(url::Host::Ipv4(ip)) => self.check_ip(IpAddr::V4(ip))?,
            Some(url::Host::Ipv6(ip)) => self.check_ip(IpAddr::V6(ip))?,
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if name == "localhost" || name.ends_with(".localhost") {
                    self.check_ip(IpAddr::V4(Ipv4Addr::LOCALHOST))?;
                }
            }
        }
        Ok(url)
    }
}

/// The HTTP client's DNS resolver: resolves with the system resolver, then
/// refuses the lookup if any address is refused by the policy. Checking every
/// address (not just keeping the good ones) means a name that answers with a
/// mix cannot be used to reach the refused ones by retrying.
#[derive(Clone, Debug)]
pub(crate) struct PolicyResolver {
    pub policy: Arc<PushPolicy>,
    /// Fixed answers consulted before the system resolver.
    pub hosts: Arc<Vec<(String, IpAddr)>>,
}

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy.clone();
        let hosts = self.hosts.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let fixed: Vec<SocketAddr> = hosts
                .iter()
                .filter(|(n, _)| n.eq_ignore_ascii_case(&host))
                .map(|(_, ip)| SocketAddr::new(*ip, 0))
                .collect();
            let addrs: Vec<SocketAddr> = if fixed.is_empty() {
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect()
            } else {
                fixed
            };
            for a in &addrs {
                // Unboxed, so the delivery worker can find it in the error chain.
                policy
                    .check_ip(a.ip())
                    .map_err(|r| Refused(format!("{host} resolves to {}: {r}", a.ip())))?;
            }
            let iter: reqwest::dns::Addrs = Box::new(addrs.into_iter());
            Ok(iter)
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test should fail loudly
mod tests {
    use super::*;

    fn refused(policy: &PushPolicy, ip: &str) -> bool {
        policy.check_ip(ip.parse().unwrap()).is_err()
    }

    #[test]
    fn refuses_internal_ranges_by_default() {
        let p = PushPolicy::default();
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.20.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "fd00:ec2::254",
        ] {
            assert!(refused(&p, ip), "{ip} should be refused");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "172.32.0.1"] {
            assert!(!refused(&p, ip), "{ip} should be allowed");
        }
    }

    /// (address, what the refusal should name: the range of its embedded
    /// address, or the form when several readings are refused).
    const EMBEDDED_INTERNAL: &[(&str, &str)] = &[
        // IPv4-compatible ::/96.
        ("::127.0.0.1", "loopback"),
        ("::10.0.0.1", "private"),
        // IPv4-mapped ::ffff:0:0/96, both spellings.
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:7f00:1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        // IPv4-translated ::ffff:0:0:0/96.
        ("::ffff:0:7f00:1", "loopback"),
        ("::ffff:0:192.168.0.1", "private"),
        // NAT64, well-known prefix.
        ("64:ff9b::127.0.0.1", "loopback"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        // Local-use NAT64, as a /96 translator and as a /48 one (bits 64..72
        // skipped: 10.0.0.1 is 0a00 in bits 48..64, 0001 in bits 72..88).
        ("64:ff9b:1::10.0.0.1", "private"),
        ("64:ff9b:1:a00:0:100::", "local-use NAT64"),
        // 6to4: the IPv4 address is bits 16..48.
        ("2002:7f00:1::1", "loopback"),
        ("2002:c0a8:101::", "private"),
    ];

    #[test]
    fn ipv6_forms_carrying_an_internal_ipv4_address_are_refused() {
        let p = PushPolicy::default();
        for (ip, why) in EMBEDDED_INTERNAL {
            let err = p.check_ip(ip.parse().unwrap()).unwrap_err().0;
            assert!(err.contains(why), "{ip}: {err}");
            // And as a URL host, where the forms are usually written.
            let err = p.check_url(&format!("https://[{ip}]/hook")).unwrap_err().0;
            assert!(err.contains(why), "[{ip}]: {err}");
        }
        // With the other local-use NAT64 readings allowed, the /48 one is
        // still judged: 10.0.0.1.
        let p = PushPolicy {
            allow: vec!["0.0.0.0/8".parse().unwrap()],
            allow_http: false,
        };
        let err = p
            .check_ip("64:ff9b:1:a00:0:100::".parse().unwrap())
            .unwrap_err()
            .0;
        assert!(err.contains("10.0.0.1") && err.contains("private"), "{err}");
    }

    #[test]
    fn ipv6_forms_carrying_a_public_ipv4_address_are_judged_public() {
        let p = PushPolicy::default();
        for ip in [
            "::8.8.8.8",
            "::ffff:8.8.8.8",
            "::ffff:0:8.8.8.8",
            "64:ff9b::8.8.8.8",
            "2002:808:808::1",
            // Local-use NAT64 is public only if every layout it may use
            // names a public address: 8.8.8.8 at /48, /56, /64 and /96.
            "64:ff9b:1:808:8:808:808:808",
        ] {
            assert!(!refused(&p, ip), "{ip} should be allowed");
        }
        // A local-use NAT64 address that is public read one way but "this
        // network" (0.0.0.0/8) read as a /48 translator is refused.
        assert!(refused(&p, "64:ff9b:1::8.8.8.8"));
    }

    #[test]
    fn teredo_is_refused_and_the_allow_list_reaches_embedded_addresses() {
        let p = PushPolicy::default();
        // Teredo: server 65.54.227.120, client 192.0.2.45 (obfuscated).
        let err = p
            .check_ip("2001:0:4136:e378:8000:63bf:3fff:fdd2".parse().unwrap())
            .unwrap_err()
            .0;
        assert!(err.contains("Teredo"), "{err}");
        let open = PushPolicy {
            allow: vec!["127.0.0.1/32".parse().unwrap()],
            allow_http: false,
        };
        assert!(!refused(&open, "::ffff:127.0.0.1"));
        assert!(!refused(&open, "64:ff9b::127.0.0.1"));
        assert!(refused(&open, "64:ff9b::127.0.0.2"));
    }

    #[test]
    fn allow_list_opens_exactly_its_networks() {
        let p = PushPolicy {
            allow: vec![
                "127.0.0.1/32".parse().unwrap(),
                "10.1.0.0/16".parse().unwrap(),
            ],
            allow_http: false,
        };
        assert!(!refused(&p, "127.0.0.1"));
        assert!(refused(&p, "127.0.0.2"));
        assert!(!refused(&p, "10.1.200.3"));
        assert!(refused(&p, "10.2.0.1"));
    }

    #[test]
    fn cidr_parse_rejects_nonsense() {
        for bad in ["", "10.0.0.0/33", "::/129", "example.com", "10.0.0.0/x"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
        assert_eq!(
            "10.0.0.1".parse::<Cidr>().unwrap().to_string(),
            "10.0.0.1/32"
        );
        assert!(
            "0.0.0.0/0"
                .parse::<Cidr>()
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
    }

    #[test]
    fn url_check_requires_https_and_refuses_literal_internal_hosts() {
        let p = PushPolicy::default();
        assert!(p.check_url("https://example.com/hook").is_ok());
        for (url, needle) in [
            ("http://example.com/hook", "https"),
            ("ftp://example.com/hook", "https"),
            ("not a url", "absolute URL"),
            ("https://127.0.0.1/hook", "loopback"),
            ("https://[::1]/hook", "loopback"),
            ("https://169.254.169.254/latest/meta-data", "link-local"),
            ("https://10.0.0.5/hook", "private"),
            ("https://localhost:8443/hook", "loopback"),
            ("https://api.localhost/hook", "loopback"),
            ("https://[::ffff:7f00:1]/hook", "loopback"),
            ("https://user:pw@example.com/hook", "credentials"),
        ] {
            let err = p.check_url(url).unwrap_err().0;
            assert!(err.contains(needle), "{url}: {err}");
        }
        let open = PushPolicy {
            allow: vec!["127.0.0.1/32".parse().unwrap()],
            allow_http: true,
        };
        assert!(open.check_url("http://127.0.0.1:9/hook").is_ok());
    }
}
