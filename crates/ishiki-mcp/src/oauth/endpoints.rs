//! The requests this crate makes to authorization servers itself (rmcp makes the others),
//! and which endpoints named by a server's metadata it makes them to.

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
    let body = bounded_get(at.as_str()).await?;
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
/// services. (rmcp checks its own requests' resolved addresses; these are the requests made
/// here, whose names are checked as written.)
pub(crate) fn endpoint_allowed(server: &str, endpoint: &str) -> bool {
    fn v4_local(ip: std::net::Ipv4Addr) -> bool {
        let [a, b, ..] = ip.octets();
        ip.is_loopback()
            || ip.is_private()
            || ip.is_link_local()
            || ip.is_unspecified()
            // 100.64.0.0/10, shared address space behind carrier NAT and many cloud networks.
            || (a == 100 && (64..128).contains(&b))
    }
    fn local(host: Option<url::Host<&str>>) -> Option<bool> {
        Some(match host? {
            url::Host::Domain(name) => {
                name.eq_ignore_ascii_case("localhost") || name.ends_with(".localhost")
            }
            url::Host::Ipv4(ip) => v4_local(ip),
            url::Host::Ipv6(ip) => {
                let first = ip.segments()[0];
                ip.to_ipv4_mapped().is_some_and(v4_local)
                    || ip.is_loopback()
                    || ip.is_unspecified()
                    || (first & 0xfe00) == 0xfc00
                    || (first & 0xffc0) == 0xfe80
            }
        })
    }
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
    match (local(server.host()), local(endpoint.host())) {
        (Some(server_local), Some(endpoint_local)) => {
            scheme_ok && (server_local || !endpoint_local)
        }
        _ => false,
    }
}

/// The HTTP client of the requests made here: 30 s each, no redirects followed.
pub(super) fn client() -> Result<reqwest::Client, AuthError> {
    reqwest::Client::builder()
        .timeout(TOKEN_REQUEST_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| failed(format!("cannot build an HTTP client: {e}")))
}

/// The body of a GET to `url`, within the token request's limits.
async fn bounded_get(url: &str) -> Result<Vec<u8>, AuthError> {
    let client = client()?;
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
}
