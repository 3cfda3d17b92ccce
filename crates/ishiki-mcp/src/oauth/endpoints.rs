//! The requests this crate makes to authorization servers itself (rmcp makes the others),
//! and which endpoints named by a server's metadata it makes them to.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use rmcp::transport::auth::{AuthError, AuthorizationMetadata};

use super::{MAX_TOKEN_RESPONSE_BYTES, TOKEN_REQUEST_TIMEOUT, failed};

/// The authorization server metadata at the origin of `server_url`, for a server of the
/// 2025-03-26 era (no protected resource metadata) whose metadata names an issuer other than
/// the origin it is served from (RFC 8414 asks them to be the same). The document is taken
/// only when it is the origin's own (`expected` is the origin) and its issuer is on that
/// origin too: it cannot name a foreign authorization server.
pub(super) async fn legacy_metadata(
    server_url: &str,
    expected: &str,
    received: &str,
) -> Result<AuthorizationMetadata, AuthError> {
    let mismatch = || AuthError::AuthorizationServerMismatch {
        expected_issuer: expected.to_owned(),
        received_issuer: received.to_owned(),
    };
    let Ok(server) = url::Url::parse(server_url) else {
        return Err(mismatch());
    };
    if !legacy_issuer_acceptable(&server, expected, received) {
        return Err(mismatch());
    }
    let origin = server.origin();
    let same_origin = |text: &str| url::Url::parse(text).is_ok_and(|u| u.origin() == origin);
    let mut at = server.clone();
    at.set_path("/.well-known/oauth-authorization-server");
    at.set_query(None);
    at.set_fragment(None);
    let body = bounded_get(server_url, at.as_str()).await?;
    let metadata: AuthorizationMetadata = serde_json::from_slice(&body).map_err(|e| {
        failed(format!(
            "the authorization server's metadata is unreadable: {e}"
        ))
    })?;
    let endpoints_here = same_origin(&metadata.authorization_endpoint)
        && same_origin(&metadata.token_endpoint)
        && metadata
            .registration_endpoint
            .as_deref()
            .is_none_or(same_origin);
    if metadata.issuer.as_deref() != Some(received) || !endpoints_here {
        return Err(mismatch());
    }
    Ok(metadata)
}

/// Whether metadata fetched from the origin of `server` (`expected` is that origin) whose
/// issuer is `received` may stand for the server's own authorization server: only when
/// `received` is on the same origin.
fn legacy_issuer_acceptable(server: &url::Url, expected: &str, received: &str) -> bool {
    let origin = server.origin();
    let expected_is_origin = url::Url::parse(expected)
        .is_ok_and(|u| u.origin() == origin && matches!(u.path(), "" | "/"));
    let received_here = url::Url::parse(received).is_ok_and(|u| u.origin() == origin);
    expected_is_origin && received_here
}

/// Whether `endpoint`, named by metadata the server's side sent, may be called from here:
/// an https:// URL (http:// only on loopback), and a host on this machine or its private
/// network (loopback, private, link-local or unspecified addresses, `localhost`) only when
/// the MCP server is there too, so a hostile server cannot aim the client at internal
/// services. The names are checked here as written; [`client_for`] checks the addresses they
/// resolve to by the same rule. (rmcp checks its own requests' resolved addresses.)
pub(crate) fn endpoint_allowed(server: &str, endpoint: &str) -> bool {
    let (Ok(server), Ok(endpoint)) = (url::Url::parse(server), url::Url::parse(endpoint)) else {
        return false;
    };
    let loopback = match endpoint.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    let scheme_ok = endpoint.scheme() == "https" || (endpoint.scheme() == "http" && loopback);
    match (host_local(server.host()), host_local(endpoint.host())) {
        (Some(server_local), Some(endpoint_local)) => {
            scheme_ok && (server_local || !endpoint_local)
        }
        _ => false,
    }
}

/// Whether a host, as a URL writes it, is on this machine or its private network; `None`
/// for a URL without a host.
fn host_local(host: Option<url::Host<&str>>) -> Option<bool> {
    Some(match host? {
        url::Host::Domain(name) => {
            name.eq_ignore_ascii_case("localhost") || name.ends_with(".localhost")
        }
        url::Host::Ipv4(ip) => address_local(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => address_local(IpAddr::V6(ip)),
    })
}

/// Whether an address is not a public one: on this machine or its private network
/// (loopback, private, link-local with cloud instance metadata, shared 100.64.0.0/10,
/// unique-local and the old site-local), or not meant to be connected to at all (this
/// network 0.0.0.0/8, benchmarking 198.18.0.0/15, multicast, broadcast, reserved). An IPv6
/// address that carries an IPv4 one (mapped, compatible, NAT64 64:ff9b::/96, 6to4
/// 2002::/16) is judged by the IPv4 address; Teredo (2001::/32) and local-use NAT64
/// (64:ff9b:1::/48), whose far end cannot be judged, count as not public.
fn address_local(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V4(ip) => return v4_local(ip),
        IpAddr::V6(ip) => ip,
    };
    let s = ip.segments();
    let v4 = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible; `::` and `::1` are themselves).
    if s[..5] == [0; 5] && (s[5] == 0xffff || (s[5] == 0 && (s[6] != 0 || s[7] > 1))) {
        return v4_local(v4(s[6], s[7]));
    }
    // 64:ff9b::a.b.c.d, the well-known NAT64 prefix.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return v4_local(v4(s[6], s[7]));
    }
    // 2002:AABB:CCDD::/48, 6to4: the IPv4 address is in the prefix.
    if s[0] == 0x2002 {
        return v4_local(v4(s[1], s[2]));
    }
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // Unique-local fc00::/7, link-local fe80::/10, the deprecated site-local fec0::/10.
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        // Teredo 2001::/32 and local-use NAT64 64:ff9b:1::/48.
        || (s[0] == 0x2001 && s[1] == 0)
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1)
}

/// [`address_local`] for IPv4.
fn v4_local(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        // 0.0.0.0/8 (this network), 240.0.0.0/4 (reserved).
        || a == 0
        || a >= 240
        // 100.64.0.0/10, shared address space behind carrier NAT and many cloud networks.
        || (a == 100 && (64..128).contains(&b))
        // 198.18.0.0/15, benchmarking.
        || (a == 198 && (b & 0xfe) == 18)
}

/// The HTTP client of the requests made here for the MCP server at `server`: 30 s each, no
/// redirects followed, and connecting only where [`endpoint_allowed`] lets a name point: a
/// public name that resolves to this machine or a private network the server is not on
/// (DNS rebinding, or a hostile record) fails to connect, naming the host.
pub(super) fn client_for(server: &str) -> Result<reqwest::Client, AuthError> {
    guarded_client(server, Arc::new(SystemLookup))
}

/// [`client_for`] with the name lookup given, so a test can make a name resolve anywhere.
fn guarded_client(server: &str, lookup: Arc<dyn Resolve>) -> Result<reqwest::Client, AuthError> {
    let server_local = url::Url::parse(server)
        .ok()
        .and_then(|u| host_local(u.host()))
        .unwrap_or(false);
    // A proxy is resolved instead of the target (and resolves the target itself): its own
    // host, configured by whoever runs the process, is not filtered.
    let proxies = [
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .filter_map(|var| std::env::var(var).ok())
    .filter_map(|proxy| {
        let proxy = if proxy.contains("://") {
            proxy
        } else {
            format!("http://{proxy}")
        };
        url::Url::parse(&proxy).ok()?.host_str().map(normalized)
    })
    .collect();
    let resolver = GuardedResolver {
        server_local,
        proxies: Arc::new(proxies),
        lookup,
    };
    crate::http::crypto_provider();
    reqwest::Client::builder()
        .timeout(TOKEN_REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(resolver)
        .build()
        .map_err(|e| failed(format!("cannot build an HTTP client: {e}")))
}

/// A host name as resolvers compare it: lower case, without a final dot.
fn normalized(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// The operating system's resolver, through tokio.
struct SystemLookup;

impl Resolve for SystemLookup {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// Keeps only the resolved addresses [`endpoint_allowed`]'s rule lets a request reach.
struct GuardedResolver {
    server_local: bool,
    proxies: Arc<Vec<String>>,
    lookup: Arc<dyn Resolve>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = normalized(name.as_str());
        let unfiltered = self.server_local || self.proxies.contains(&host);
        let lookup = self.lookup.resolve(name);
        Box::pin(async move {
            let resolved: Vec<SocketAddr> = lookup.await?.collect();
            if unfiltered {
                return Ok(Box::new(resolved.into_iter()) as Addrs);
            }
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| !address_local(addr.ip()))
                .collect();
            if allowed.is_empty() {
                return Err(format!(
                    "`{host}` resolves only to this machine or a private network, which the \
                     MCP server is not on"
                )
                .into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// The body of a GET to `url` for the MCP server at `server`, within the token request's
/// limits.
async fn bounded_get(server: &str, url: &str) -> Result<Vec<u8>, AuthError> {
    let client = client_for(server)?;
    let mut response = client
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| failed(format!("{url} could not be fetched: {e}")))?;
    if !response.status().is_success() {
        return Err(failed(format!("{url} answered {}", response.status())));
    }
    read_bounded(&mut response).await
}

/// A response body, at most [`MAX_TOKEN_RESPONSE_BYTES`].
pub(crate) async fn read_bounded(response: &mut reqwest::Response) -> Result<Vec<u8>, AuthError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| failed(format!("the answer broke off: {e}")))?
    {
        if body.len() + chunk.len() > MAX_TOKEN_RESPONSE_BYTES {
            return Err(failed(format!(
                "the answer is longer than {MAX_TOKEN_RESPONSE_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_metadata_may_name_an_issuer_only_on_the_servers_own_origin() {
        let server = url::Url::parse("http://localhost:4000/mcp").unwrap();
        let ok = |e: &str, r: &str| legacy_issuer_acceptable(&server, e, r);
        assert!(ok("http://localhost:4000/", "http://localhost:4000/oauth"));
        assert!(!ok(
            "http://localhost:4000/",
            "https://evil.example.com/oauth"
        ));
        assert!(!ok("http://localhost:4000/", "http://localhost:4001/oauth"));
        // A mismatch found elsewhere (an authorization server the metadata named) stays one.
        assert!(!ok(
            "http://localhost:4000/tenant",
            "http://localhost:4000/oauth"
        ));
        assert!(!ok("https://as.example.com/", "https://as.example.com/x"));
    }

    #[test]
    fn endpoints_named_by_a_server_may_not_reach_a_private_network_it_is_not_on() {
        let public = "https://mcp.example.com/mcp";
        assert!(endpoint_allowed(public, "https://as.example.com/token"));
        for internal in [
            "https://169.254.169.254/latest",
            "https://10.0.0.9/token",
            "https://localhost/token",
            "https://[::1]/token",
            "https://[fd00::1]/token",
            "https://[::ffff:169.254.169.254]/latest",
            "https://100.100.100.200/latest",
            "http://as.example.com/token",
            "not a url",
        ] {
            assert!(!endpoint_allowed(public, internal), "{internal}");
        }
        let local = "http://localhost:4000/mcp";
        assert!(endpoint_allowed(local, "http://localhost:4000/token"));
        assert!(endpoint_allowed(local, "https://10.0.0.9/token"));
        assert!(
            !endpoint_allowed(local, "http://10.0.0.9/token"),
            "cleartext past loopback"
        );
    }

    /// Answers every name with `to`.
    struct Pinned(IpAddr);

    impl Resolve for Pinned {
        fn resolve(&self, _name: Name) -> Resolving {
            let addr = SocketAddr::new(self.0, 0);
            Box::pin(async move { Ok(Box::new(std::iter::once(addr)) as Addrs) })
        }
    }

    /// A listener on loopback answering each connection `200 {}`; its port.
    async fn answering() -> u16 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
                    )
                    .await;
            }
        });
        port
    }

    #[tokio::test]
    async fn a_public_name_that_resolves_to_a_private_network_is_not_reached_for_a_public_server() {
        let port = answering().await;
        let rebound = format!("http://as.example.com:{port}/token");
        let loopback = Arc::new(Pinned(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        // The name passes the check as written; its address does not.
        let public = "https://mcp.example.com/mcp";
        let client = guarded_client(public, loopback.clone()).unwrap();
        let error = client.get(&rebound).send().await.unwrap_err();
        let text = format!("{error:?}");
        assert!(
            text.contains("`as.example.com` resolves only to this machine or a private network"),
            "{text}"
        );
        // A server on this machine may name endpoints here, by any name.
        let local = "http://localhost:4000/mcp";
        let client = guarded_client(local, loopback).unwrap();
        let answer = client.get(&rebound).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        // Public addresses stay reachable for a public server (the lookup decides, not the
        // name): a name pinned to a public address is let through to connecting.
        let outside = Arc::new(Pinned(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))));
        let resolver = GuardedResolver {
            server_local: false,
            proxies: Arc::new(Vec::new()),
            lookup: outside,
        };
        let addrs: Vec<SocketAddr> = resolver
            .resolve("as.example.com".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert_eq!(
            addrs,
            [SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)), 0)]
        );
    }

    #[test]
    fn public_addresses_stay_public_in_every_form() {
        for ip in [
            "93.184.216.34",
            "2606:2800:220:1:248:1893:25c8:1946",
            "::ffff:93.184.216.34",
            "64:ff9b::5db8:d822",
            "2002:5db8:d822::1",
        ] {
            assert!(!address_local(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn every_private_kind_of_address_is_filtered_out_of_a_resolution() {
        for ip in [
            "10.1.2.3",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "0.1.2.3",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::10.0.0.5",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a00:5",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378::1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            let resolver = GuardedResolver {
                server_local: false,
                proxies: Arc::new(Vec::new()),
                lookup: Arc::new(Pinned(ip)),
            };
            let result = resolver.resolve("as.example.com".parse().unwrap()).await;
            assert!(result.is_err(), "{ip} was let through");
        }
    }
}
