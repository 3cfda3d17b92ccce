//! `private_key_jwt` (RFC 7523): the client assertion, signed with ring, and the token
//! request it authenticates.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use rmcp::transport::auth::{AuthError, OAuthTokenResponse};

use super::{failed, now_secs, read_bounded};
use crate::auth::JwtAlgorithm;

/// How long a client assertion is valid.
const ASSERTION_LIFETIME_SECS: u64 = 300;

/// A `private_key_jwt` client assertion (RFC 7523): `iss` and `sub` the client, `aud` the
/// authorization server, valid for five minutes, with a random `jti`.
pub(super) fn sign_assertion(
    pem: &str,
    algorithm: JwtAlgorithm,
    client_id: &str,
    audience: &str,
) -> Result<String, AuthError> {
    use ring::rand::{SecureRandom, SystemRandom};
    use ring::signature::{self, EcdsaKeyPair, RsaKeyPair};

    // The base64 between the BEGIN and END lines; text around them is ignored.
    let body: String = pem
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with("-----BEGIN"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .collect();
    let der = STANDARD
        .decode(body.as_bytes())
        .map_err(|_| failed("the client's private key is not a PEM document"))?;
    let rng = SystemRandom::new();
    let mut jti = [0u8; 16];
    rng.fill(&mut jti)
        .map_err(|_| failed("no random numbers for the client assertion"))?;
    let now = now_secs();
    let header = serde_json::json!({ "alg": algorithm.name(), "typ": "JWT" });
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now,
        "exp": now + ASSERTION_LIFETIME_SECS,
        "jti": URL_SAFE_NO_PAD.encode(jti),
    });
    let input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let bad_key = |_| {
        failed(format!(
            "the client's private key is not a PKCS#8 {} key",
            algorithm.name()
        ))
    };
    let signature = match algorithm {
        JwtAlgorithm::Es256 => {
            let key =
                EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
                    .map_err(bad_key)?;
            key.sign(&rng, input.as_bytes())
                .map_err(|_| failed("signing the client assertion failed"))?
                .as_ref()
                .to_vec()
        }
        JwtAlgorithm::Rs256 => {
            let key = RsaKeyPair::from_pkcs8(&der).map_err(bad_key)?;
            let mut out = vec![0u8; key.public().modulus_len()];
            key.sign(
                &signature::RSA_PKCS1_SHA256,
                &rng,
                input.as_bytes(),
                &mut out,
            )
            .map_err(|_| failed("signing the client assertion failed"))?;
            out
        }
    };
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// The client-credentials grant authenticated by `assertion`, at `endpoint`, for the MCP
/// server at `resource`.
pub(super) async fn jwt_token_request(
    endpoint: &str,
    assertion: &str,
    resource: &str,
    scopes: &[String],
) -> Result<OAuthTokenResponse, AuthError> {
    let form = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials")
            .append_pair(
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            )
            .append_pair("client_assertion", assertion)
            .append_pair("resource", resource);
        if !scopes.is_empty() {
            form.append_pair("scope", &scopes.join(" "));
        }
        form.finish()
    };
    // `resource` is the MCP server's URL: the endpoint's addresses are held to its network.
    let client = super::endpoints::client_for(resource)?;
    let mut response = client
        .post(endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json")
        .body(form)
        .send()
        .await
        .map_err(|e| failed(format!("the token endpoint could not be reached: {e}")))?;
    let status = response.status();
    let body = read_bounded(&mut response).await?;
    if !status.is_success() {
        let error = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
            .unwrap_or_else(|| status.to_string());
        return Err(failed(format!(
            "the token endpoint refused the client: {error}"
        )));
    }
    serde_json::from_slice(&body).map_err(|e| {
        failed(format!(
            "the token endpoint's answer is no token response: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair, UnparsedPublicKey};

    fn pem(der: &[u8]) -> String {
        let body = STANDARD.encode(der);
        let lines: Vec<&str> = body
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap_or_default())
            .collect();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        )
    }

    /// The assertion's header, claims, and the signed input with its signature.
    fn parts(jwt: &str) -> (serde_json::Value, serde_json::Value, String, Vec<u8>) {
        let mut it = jwt.split('.');
        let (h, c, sig) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
        assert!(it.next().is_none(), "three parts");
        let decode = |p: &str| -> serde_json::Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
        };
        (
            decode(h),
            decode(c),
            format!("{h}.{c}"),
            URL_SAFE_NO_PAD.decode(sig).unwrap(),
        )
    }

    #[test]
    fn an_es256_client_assertion_verifies_with_the_clients_public_key() {
        let rng = ring::rand::SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap();
        let key = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            der.as_ref(),
            &rng,
        )
        .unwrap();
        let jwt = sign_assertion(
            &format!("a comment\n{}", pem(der.as_ref())),
            JwtAlgorithm::Es256,
            "client-7",
            "https://as.example.com",
        )
        .unwrap();
        let (header, claims, input, sig) = parts(&jwt);
        assert_eq!(header["alg"], "ES256");
        assert_eq!(sig.len(), 64, "JOSE wants R||S, not DER");
        UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            key.public_key().as_ref(),
        )
        .verify(input.as_bytes(), &sig)
        .expect("the signature verifies");
        assert_eq!(claims["iss"], "client-7");
        assert_eq!(claims["sub"], "client-7");
        assert_eq!(claims["aud"], "https://as.example.com");
        let (iat, exp) = (
            claims["iat"].as_u64().unwrap(),
            claims["exp"].as_u64().unwrap(),
        );
        assert_eq!(exp - iat, ASSERTION_LIFETIME_SECS);
        let again = sign_assertion(&pem(der.as_ref()), JwtAlgorithm::Es256, "c", "a").unwrap();
        assert_ne!(
            parts(&again).1["jti"],
            claims["jti"],
            "each assertion is new"
        );
    }

    #[test]
    fn an_rs256_client_assertion_verifies_and_a_key_of_the_wrong_kind_is_named() {
        let text = include_str!("../../tests/data/rsa-test-key.pem");
        let jwt = sign_assertion(text, JwtAlgorithm::Rs256, "c", "https://as").unwrap();
        let (header, _, input, sig) = parts(&jwt);
        assert_eq!(header["alg"], "RS256");
        let body: String = text
            .lines()
            .skip_while(|l| !l.starts_with("-----BEGIN"))
            .skip(1)
            .take_while(|l| !l.starts_with("-----END"))
            .collect();
        let key = RsaKeyPair::from_pkcs8(&STANDARD.decode(body).unwrap()).unwrap();
        UnparsedPublicKey::new(
            &signature::RSA_PKCS1_2048_8192_SHA256,
            key.public().as_ref(),
        )
        .verify(input.as_bytes(), &sig)
        .expect("the signature verifies");
        let wrong = sign_assertion(text, JwtAlgorithm::Es256, "c", "a").unwrap_err();
        assert!(
            wrong.to_string().contains("not a PKCS#8 ES256 key"),
            "{wrong}"
        );
        let garbage = sign_assertion("no pem here", JwtAlgorithm::Es256, "c", "a").unwrap_err();
        assert!(garbage.to_string().contains("PKCS#8"), "{garbage}");
    }
}
