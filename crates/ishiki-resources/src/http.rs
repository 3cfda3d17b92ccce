//! `http://` and `https://` (cargo feature `http`): network content for `read` (RES-2).
//!
//! A plain [`SchemeHandler`]: the body's magic bytes decide text or media (never the
//! `Content-Type` alone); text comes back without a read source, since a web page is not a
//! file that can be paged by offset later. Bodies are capped in size and requests in time.
//!
//! Where a request may go is an [`AddressPolicy`], asked for every address the client would
//! connect to: after DNS resolution (a custom resolver drops the addresses it refuses) and for
//! the IP literal of every URL, the first and each redirect hop. The default,
//! [`PublicAddresses`], refuses loopback, private, link-local (cloud metadata at
//! 169.254.169.254), shared, reserved and multicast ranges in every spelling the URL parser
//! reads as one (`2130706433`, `0177.0.0.1`, `0x7f.1`, `127.1`, `[::ffff:127.0.0.1]`). A URL
//! with user info is refused: credentials never come from a URL the model wrote.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use url::{Host, Url};

use crate::path_safety::show;
use crate::{ReadResult, ResourceError, ResourceErrorKind, SchemeHandler, sniff};

/// Limits and client settings of an [`HttpScheme`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// Bodies larger than this are refused (default 16 MiB).
    pub max_bytes: u64,
    /// The whole request, body included, must finish within this (default 30 s).
    pub timeout: Duration,
    /// Whether to honour `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY` from the environment (default
    /// false). A proxy resolves names itself, so with one the [`AddressPolicy`] sees only the
    /// IP literals of URLs, not where a name leads.
    pub use_env_proxy: bool,
    /// At most this many redirects are followed (default 5); each hop is checked like the
    /// first URL.
    pub max_redirects: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            max_bytes: 16 << 20,
            timeout: Duration::from_secs(30),
            use_env_proxy: false,
            max_redirects: 5,
        }
    }
}

/// Decides which addresses an [`HttpScheme`] may connect to. `host` is the URL's host as
/// parsed (a name, or an IP literal in its canonical form); `addr` one address it stands for.
/// A closure `Fn(&str, IpAddr) -> bool` is a policy.
pub trait AddressPolicy: Send + Sync {
    /// Whether a request to `host` may connect to `addr`.
    fn allows(&self, host: &str, addr: IpAddr) -> bool;
}

impl<F> AddressPolicy for F
where
    F: Fn(&str, IpAddr) -> bool + Send + Sync,
{
    fn allows(&self, host: &str, addr: IpAddr) -> bool {
        self(host, addr)
    }
}

/// The default policy: only publicly routable unicast addresses ([`is_public`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct PublicAddresses;

impl AddressPolicy for PublicAddresses {
    fn allows(&self, _host: &str, addr: IpAddr) -> bool {
        is_public(addr)
    }
}

/// Whether `addr` is a publicly routable unicast address: not unspecified, loopback, private,
/// link-local (where cloud metadata services answer), shared (100.64/10), IETF-reserved,
/// documentation, benchmarking, multicast or broadcast; IPv6 forms that carry an IPv4 address
/// (mapped, compatible, NAT64, 6to4) are judged by that address. An embedder's policy can
/// start from this and allow a few more.
pub fn is_public(addr: IpAddr) -> bool {
    match addr {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(v4: Ipv4Addr) -> bool {
    let [a, b, c, _] = v4.octets();
    !(a == 0                                    // "this network", 0.0.0.0
        || a == 10                              // private
        || a == 127                             // loopback
        || (a == 100 && (64..128).contains(&b)) // shared (carrier NAT; Alibaba's metadata)
        || (a == 169 && b == 254)               // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b))  // private
        || (a == 192 && b == 0 && c == 0)       // IETF protocol assignments (Oracle metadata)
        || (a == 192 && b == 0 && c == 2)       // documentation
        || (a == 192 && b == 168)               // private
        || (a == 198 && (b == 18 || b == 19))   // benchmarking
        || (a == 198 && b == 51 && c == 100)    // documentation
        || (a == 203 && b == 0 && c == 113)     // documentation
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(v6: Ipv6Addr) -> bool {
    let s = v6.segments();
    if let Some(v4) = v6.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    // IPv4-compatible (::a.b.c.d, deprecated) and NAT64 (64:ff9b::/96) carry an IPv4 address.
    if s[..6] == [0; 6] || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [a, b] = s[6].to_be_bytes();
        let [c, d] = s[7].to_be_bytes();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    if s[0] == 0x2002 {
        // 6to4: the IPv4 address follows the prefix.
        let [a, b] = s[1].to_be_bytes();
        let [c, d] = s[2].to_be_bytes();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    !((s[0] & 0xfe00) == 0xfc00            // unique local (AWS metadata fd00:ec2::254)
        || (s[0] & 0xffc0) == 0xfe80       // link-local
        || (s[0] & 0xffc0) == 0xfec0       // site-local (deprecated)
        || (s[0] & 0xff00) == 0xff00       // multicast
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2001 && s[1] == 0)) // Teredo
}

/// Why a destination was refused; found again in reqwest's error chain to give the error its
/// kind.
#[derive(Debug)]
struct Refused(String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// The URL's host for the policy and its IP literal, if it is one.
fn literal(url: &Url) -> Option<(String, IpAddr)> {
    match url.host()? {
        Host::Ipv4(v4) => Some((v4.to_string(), IpAddr::V4(v4))),
        Host::Ipv6(v6) => Some((v6.to_string(), IpAddr::V6(v6))),
        Host::Domain(_) => None,
    }
}

/// `url` without user info, for messages (a password must not reach the model's context).
fn without_userinfo(url: &Url) -> Url {
    let mut bare = url.clone();
    let _ = bare.set_username("");
    let _ = bare.set_password(None);
    bare
}

/// What refuses `url` before a connection: a scheme other than http(s), user info, or an IP
/// literal the policy refuses.
fn check_url(url: &Url, policy: &dyn AddressPolicy) -> Result<(), Refused> {
    let shown = show(without_userinfo(url).as_str());
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Refused(format!("`{shown}` is not an http or https URL")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Refused(format!(
            "`{shown}` carries user info (a name or password before `@`); credentials never come from a URL"
        )));
    }
    if let Some((host, addr)) = literal(url)
        && !policy.allows(&host, addr)
    {
        return Err(Refused(format!(
            "`{shown}` goes to {addr}, an address the destination policy refuses (loopback, private, link-local and metadata addresses are refused by default)"
        )));
    }
    Ok(())
}

/// Whether a redirect from the `previous` URLs (the first request's first) to `next` is
/// followed: at most `hops` of them, never from https down to plain http, and `next` checked
/// like a first URL.
fn redirect_hop(
    previous: &[Url],
    next: &Url,
    hops: usize,
    policy: &dyn AddressPolicy,
) -> Result<(), Refused> {
    if previous.len() > hops {
        return Err(Refused(format!("more than {hops} redirects")));
    }
    if next.scheme() == "http" && previous.iter().any(|u| u.scheme() == "https") {
        let shown = show(without_userinfo(next).as_str());
        return Err(Refused(format!(
            "a redirect from https to `{shown}` (plain http) is not followed"
        )));
    }
    check_url(next, policy).map_err(|refused| Refused(format!("a redirect to {refused}")))
}

/// Resolves names with the system resolver and keeps only the addresses the policy allows.
struct PolicyResolver(Arc<dyn AddressPolicy>);

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let (allowed, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = found
                .into_iter()
                .partition(|a| policy.allows(&host, a.ip()));
            if allowed.is_empty() && !refused.is_empty() {
                let list: Vec<String> = refused.iter().map(|a| a.ip().to_string()).collect();
                return Err(Box::new(Refused(format!(
                    "`{}` resolves only to addresses the destination policy refuses ({}; loopback, private, link-local and metadata addresses are refused by default)",
                    show(&host),
                    list.join(", ")
                )))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            let addrs: reqwest::dns::Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

/// Reads `http://` or `https://` URLs with a GET. Register one per scheme.
#[derive(Clone)]
pub struct HttpScheme {
    scheme: &'static str,
    client: reqwest::Client,
    options: HttpOptions,
    policy: Arc<dyn AddressPolicy>,
}

impl fmt::Debug for HttpScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpScheme")
            .field("scheme", &self.scheme)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl HttpScheme {
    /// A handler for `scheme` (`"http"` or `"https"`) that reaches public addresses only
    /// ([`PublicAddresses`]).
    pub fn new(scheme: &str, options: HttpOptions) -> Result<Self, ResourceError> {
        Self::with_policy(scheme, options, Arc::new(PublicAddresses))
    }

    /// A handler whose destinations `policy` decides, for every address after resolution and
    /// every redirect hop.
    pub fn with_policy(
        scheme: &str,
        options: HttpOptions,
        policy: Arc<dyn AddressPolicy>,
    ) -> Result<Self, ResourceError> {
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => "http",
            "https" => "https",
            other => {
                return Err(ResourceError::new(
                    ResourceErrorKind::InvalidParameter,
                    format!(
                        "the http handler serves `http` or `https`, not `{}`",
                        show(other)
                    ),
                ));
            }
        };
        let hops = options.max_redirects;
        let redirect_policy = policy.clone();
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            match redirect_hop(
                attempt.previous(),
                attempt.url(),
                hops,
                redirect_policy.as_ref(),
            ) {
                Ok(()) => attempt.follow(),
                Err(refused) => attempt.error(refused),
            }
        });
        // reqwest takes the process's default crypto provider: ring, unless the embedder set one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(options.timeout)
            .redirect(redirects)
            .dns_resolver(Arc::new(PolicyResolver(policy.clone())));
        if !options.use_env_proxy {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| {
            ResourceError::new(
                ResourceErrorKind::Io,
                format!("cannot start the {scheme} client: {e}"),
            )
        })?;
        Ok(Self {
            scheme,
            client,
            options,
            policy,
        })
    }

    async fn fetch(&self, url: &Url, shown: &str) -> Result<Vec<u8>, ResourceError> {
        check_url(url, self.policy.as_ref())
            .map_err(|r| ResourceError::new(ResourceErrorKind::NotAllowed, r.0))?;
        let failed = |e: reqwest::Error| {
            let mut cause = std::error::Error::source(&e);
            while let Some(inner) = cause {
                if let Some(refused) = inner.downcast_ref::<Refused>() {
                    return ResourceError::new(ResourceErrorKind::NotAllowed, refused.0.clone());
                }
                cause = inner.source();
            }
            if e.is_timeout() {
                ResourceError::new(
                    ResourceErrorKind::Io,
                    format!(
                        "`{shown}` timed out after {} ms",
                        self.options.timeout.as_millis()
                    ),
                )
            } else {
                // reqwest's top-level message ("error sending request") hides the cause.
                let mut causes = Vec::new();
                let mut cause = std::error::Error::source(&e);
                while let Some(inner) = cause {
                    causes.push(inner.to_string());
                    cause = inner.source();
                }
                let mut why = e.without_url().to_string();
                for c in causes {
                    why.push_str(": ");
                    why.push_str(&c);
                }
                ResourceError::new(
                    ResourceErrorKind::Io,
                    format!("cannot fetch `{shown}`: {why}"),
                )
            }
        };
        let mut response = self.client.get(url.clone()).send().await.map_err(failed)?;
        let status = response.status();
        if !status.is_success() {
            let kind = if matches!(status.as_u16(), 404 | 410) {
                ResourceErrorKind::NotFound
            } else {
                ResourceErrorKind::Io
            };
            return Err(ResourceError::new(
                kind,
                format!("`{shown}` answered HTTP {status}"),
            ));
        }
        let max = self.options.max_bytes;
        let too_large = || {
            ResourceError::new(
                ResourceErrorKind::TooLarge,
                format!("`{shown}` is larger than the limit of {max} bytes"),
            )
        };
        if response.content_length().is_some_and(|n| n > max) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if (body.len() + chunk.len()) as u64 > max {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

#[async_trait]
impl SchemeHandler for HttpScheme {
    fn scheme(&self) -> &str {
        self.scheme
    }

    async fn read(&self, url: &Url) -> Result<ReadResult, ResourceError> {
        let mut bare = url.clone();
        bare.set_fragment(None);
        let shown = show(without_userinfo(&bare).as_str());
        let body = self.fetch(&bare, &shown).await?;
        let info = sniff(&body);
        if info.media_type.starts_with("text/") {
            // sniff says text only for valid UTF-8, so this conversion cannot fail.
            let text = String::from_utf8(body).map_err(|_| {
                ResourceError::new(
                    ResourceErrorKind::InvalidData,
                    format!("`{shown}` is not UTF-8 text"),
                )
            })?;
            return Ok(ReadResult::Text { text, source: None });
        }
        Ok(ReadResult::File {
            url: bare.into(),
            media_type: info.media_type,
            data: body,
            source: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).expect("a URL")
    }

    /// Issue 24: an https read redirected to plain http would have been followed, sending the
    /// request (and what it reveals) in clear text. It stops at that hop, whatever the policy.
    #[test]
    fn a_redirect_never_downgrades_https_to_plain_http() {
        let allow_all = |_: &str, _: IpAddr| true;
        let from_https = [url("https://example.com/a")];
        let refused = redirect_hop(&from_https, &url("http://example.com/b"), 5, &allow_all)
            .expect_err("https to http is refused");
        assert_eq!(
            refused.to_string(),
            "a redirect from https to `http://example.com/b` (plain http) is not followed"
        );
        // Even after an https hop to another https URL, and with user info left out.
        let chain = [url("https://example.com/a"), url("https://example.org/b")];
        let refused = redirect_hop(&chain, &url("http://u:pw@example.net/c"), 5, &allow_all)
            .expect_err("a downgrade later in the chain");
        assert!(!refused.to_string().contains("pw"), "{refused}");
        // Up is fine, and so are http to http and https to https.
        for (from, to) in [
            ("http://example.com/a", "https://example.com/b"),
            ("http://example.com/a", "http://example.org/b"),
            ("https://example.com/a", "https://example.org/b"),
        ] {
            redirect_hop(&[url(from)], &url(to), 5, &allow_all)
                .unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
        }
        let six: Vec<Url> = (0..6)
            .map(|k| url(&format!("https://example.com/{k}")))
            .collect();
        assert_eq!(
            redirect_hop(&six, &url("https://example.com/7"), 5, &allow_all)
                .expect_err("past the hop limit")
                .to_string(),
            "more than 5 redirects"
        );
    }
}
