//! `ishiki mcp-conformance-client URL` (hidden): the client the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, run by `cargo xtask mcp-conformance`) starts with its
//! test server's URL. It connects the way `ishiki chat` connects a profile's `url:` server
//! (`ishiki_mcp::McpServer` over Streamable HTTP), lists the tools and calls each one with
//! arguments made from its input schema, as a model would, accepting any elicitation form with
//! its defaults; the suite judges what the server saw.
//!
//! OAuth: every server is configured for OAuth, as a profile's `auth:` would say, and the
//! flow runs only if the server asks for it (a 401). The suite's `MCP_CONFORMANCE_CONTEXT`
//! stands for the person's configuration: a `client_id` with a `client_secret` is a
//! pre-registered client (a client-credentials one in the `auth/client-credentials-*`
//! scenarios, whose names say which grant the person chose), a `private_key_pem` a
//! `private_key_jwt` client. Everything else (discovery, registration, scopes, step-up,
//! refresh, retry limits) is the library's own behaviour, the same for every server. The
//! authorization server approves without a person, so [`HeadlessAuthorizer`] follows its
//! redirect.

use std::io::Write;
use std::time::Duration;

use std::sync::Arc;

use ishiki_mcp::{
    AcceptDefaults, ClientCredential, HeadlessAuthorizer, JwtAlgorithm, McpServer, McpServerConfig,
    OAuthConfig, Secret,
};
use serde_json::{Map, Value, json};

/// How long the suite's server may take for one request.
const TIMEOUT: Duration = Duration::from_secs(20);
/// Where the authorization server sends the person back (nothing listens: the headless
/// authorizer reads the redirect itself).
const REDIRECT_URI: &str = "http://127.0.0.1:3000/callback";
/// The client metadata document (SEP-991) the suite stands for, used as the client ID where
/// the authorization server accepts one. The suite never fetches it; a real client's URL is
/// its profile's `clientMetadataUrl`.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// What the suite's context says about the client (`MCP_CONFORMANCE_CONTEXT`).
#[derive(Debug, Default, serde::Deserialize)]
struct Context {
    #[serde(default)]
    name: String,
    client_id: Option<String>,
    client_secret: Option<String>,
    private_key_pem: Option<String>,
    signing_algorithm: Option<String>,
    idp_id_token: Option<String>,
    idp_issuer: Option<String>,
    idp_token_endpoint: Option<String>,
    idp_client_id: Option<String>,
}

/// The OAuth configuration the context stands for.
fn oauth_config(context: &Context) -> OAuthConfig {
    let client_credentials = context.name.starts_with("auth/client-credentials");
    if let (Some(id_token), Some(issuer), Some(endpoint), Some(idp_client), Some(id)) = (
        &context.idp_id_token,
        &context.idp_issuer,
        &context.idp_token_endpoint,
        &context.idp_client_id,
        &context.client_id,
    ) {
        return OAuthConfig::EnterpriseManaged {
            id_token: Secret::Value(id_token.clone()),
            idp_issuer: issuer.clone(),
            idp_token_endpoint: endpoint.clone(),
            idp_client_id: idp_client.clone(),
            idp_client_secret: None,
            client_id: id.clone(),
            client_secret: context.client_secret.clone().map(Secret::Value),
            scopes: Vec::new(),
        };
    }
    match (
        &context.client_id,
        &context.client_secret,
        &context.private_key_pem,
    ) {
        (Some(id), _, Some(pem)) => OAuthConfig::ClientCredentials {
            client_id: id.clone(),
            credential: ClientCredential::PrivateKey {
                key: Secret::Value(pem.clone()),
                algorithm: context
                    .signing_algorithm
                    .as_deref()
                    .and_then(JwtAlgorithm::from_name)
                    .unwrap_or(JwtAlgorithm::Es256),
            },
            scopes: Vec::new(),
        },
        (Some(id), Some(secret), None) if client_credentials => OAuthConfig::ClientCredentials {
            client_id: id.clone(),
            credential: ClientCredential::Secret(Secret::Value(secret.clone())),
            scopes: Vec::new(),
        },
        (id, secret, _) => OAuthConfig::AuthorizationCode {
            client_id: id.clone(),
            client_secret: secret.clone().map(Secret::Value),
            client_metadata_url: Some(CLIENT_METADATA_URL.to_owned()),
            scopes: Vec::new(),
        },
    }
}

/// Runs the client against `url`; the exit code is 0 when every step succeeded.
pub fn run(url: &str, err: &mut impl Write) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(err, "ishiki mcp-conformance-client: no async runtime: {e}");
            return 1;
        }
    };
    let context: Context = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    runtime.block_on(async {
        let config = McpServerConfig::http("conformance", url)
            .timeout(TIMEOUT)
            .oauth(oauth_config(&context));
        let authorizer = Arc::new(HeadlessAuthorizer::new(REDIRECT_URI));
        // A person who accepts every form as offered: each field takes its default.
        let started =
            McpServer::start_authorized(config, Some(Arc::new(AcceptDefaults)), Some(authorizer))
                .await;
        let server = match started {
            Ok(server) => server,
            Err(e) => {
                let _ = writeln!(err, "ishiki mcp-conformance-client: {e}");
                return 1;
            }
        };
        let mut failed = 0u8;
        for tool in server.listed_tools() {
            let arguments = sample_arguments(&Value::Object((*tool.input_schema).clone()));
            match server.call(&tool.name, arguments).await {
                Ok(result) => {
                    let _ = writeln!(err, "called {}: {result}", tool.name);
                }
                Err(e) => {
                    let _ = writeln!(err, "ishiki mcp-conformance-client: {e}");
                    failed = 1;
                }
            }
        }
        server.stop().await;
        failed
    })
}

/// Arguments for a tool: every property its schema requires, with a plain value of its type
/// (its `default` when it has one).
fn sample_arguments(schema: &Value) -> Value {
    let mut arguments = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let property = properties.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
        arguments.insert(name.to_owned(), sample_value(property));
    }
    Value::Object(arguments)
}

fn sample_value(schema: &Value) -> Value {
    if let Some(default) = schema.get("default") {
        return default.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("number" | "integer") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some("object") => sample_arguments(schema),
        _ => json!("x"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_arguments_fill_what_the_schema_requires() {
        let schema = json!({
            "type": "object",
            "properties": { "a": { "type": "number" }, "b": { "type": "integer" }, "c": { "type": "string" } },
            "required": ["a", "b"]
        });
        assert_eq!(sample_arguments(&schema), json!({ "a": 1, "b": 1 }));
    }
}
