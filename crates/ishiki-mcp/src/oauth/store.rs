//! Where a server's OAuth credentials live: in memory, or in a file of the embedder's token
//! directory (`McpServerConfig::token_dir`), so a restarted client needs no new sign-in.
//!
//! A file is `<dir>/<server>-<hash>.json` (the hash of the name and URL, so no two servers
//! share one), readable by its owner only (0600, in a 0700 directory), written whole to a new
//! temporary file and renamed into place, at most 64 KiB when read back. It names the server
//! URL it was granted for: credentials of another URL (the profile now points the name
//! elsewhere) are never loaded, so a token is only ever sent where it was granted. It also
//! names the authorization server that issued them: a refresh token is only used once
//! discovery has named that same issuer again ([`Store::load_bound`]). A damaged file is
//! treated as absent; the next sign-in writes it anew.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rmcp::transport::auth::{
    AuthError, CredentialStore, InMemoryCredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

/// The most of a credentials file read.
const MAX_FILE_BYTES: u64 = 64 * 1024;

/// A server's credential store.
#[derive(Clone)]
pub(crate) struct Store {
    kind: Kind,
    /// The issuer discovery named last; [`Bound::Unset`] until the first discovery.
    bound: Arc<Mutex<Bound>>,
    /// In memory: the issuer of the credentials held.
    saved: Arc<Mutex<Option<String>>>,
    /// The client this store's sign-in registered (RFC 7591) and the secret the authorization
    /// server gave it, if any: kept with the credentials, since refreshing them needs it.
    registered: Arc<Mutex<Option<Registered>>>,
}

/// A dynamically registered client and its secret.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Registered {
    pub(crate) client_id: String,
    pub(crate) secret: String,
}

#[derive(Clone)]
enum Kind {
    Memory(InMemoryCredentialStore),
    File { path: PathBuf, url: String },
}

/// Which authorization server the credentials in use must come from.
#[derive(Clone, PartialEq)]
enum Bound {
    /// No discovery yet (a restarted client): kept credentials are used as they are, for the
    /// URL they were granted for; nothing is refreshed, since no client is configured.
    Unset,
    /// Discovery named this issuer (`None`: a legacy server whose metadata names none).
    Issuer(Option<String>),
}

#[derive(Serialize, Deserialize)]
struct FileBody {
    url: String,
    #[serde(default)]
    issuer: Option<String>,
    credentials: StoredCredentials,
    /// The secret of the registered client the credentials were granted to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    registered: Option<Registered>,
}

fn io(what: &str, path: &Path, e: std::io::Error) -> AuthError {
    AuthError::InternalError(format!("cannot {what} {}: {e}", path.display()))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Store {
    /// The store of server `name` at `url`: a file under `dir` when one is given.
    pub(crate) fn new(dir: Option<&Path>, name: &str, url: &str) -> Store {
        let kind = match dir {
            None => Kind::Memory(InMemoryCredentialStore::new()),
            Some(dir) => {
                use std::fmt::Write;
                let digest = ring::digest::digest(
                    &ring::digest::SHA256,
                    format!("{name}\n{url}").as_bytes(),
                );
                let mut hash = String::new();
                for byte in &digest.as_ref()[..6] {
                    let _ = write!(hash, "{byte:02x}");
                }
                Kind::File {
                    path: dir.join(format!("{}-{hash}.json", file_stem(name))),
                    url: url.to_owned(),
                }
            }
        };
        Store {
            kind,
            bound: Arc::new(Mutex::new(Bound::Unset)),
            saved: Arc::default(),
            registered: Arc::default(),
        }
    }

    /// Records the client a sign-in just registered and its secret, to be saved with the
    /// credentials granted to it.
    pub(crate) fn registered(&self, client: Registered) {
        *lock(&self.registered) = Some(client);
    }

    /// The registered client: the one a sign-in registered, else the one the file kept.
    fn registered_client(&self) -> Option<Registered> {
        lock(&self.registered)
            .clone()
            .or_else(|| self.read()?.registered)
    }

    /// The secret of `client_id` if this store's sign-in registered it (now, or before a
    /// restart, as the file says); held from then on, so [`Store::held_secret`] has it.
    pub(crate) fn registered_secret(&self, client_id: &str) -> Option<String> {
        let client = self
            .registered_client()
            .filter(|r| r.client_id == client_id)?;
        let secret = client.secret.clone();
        *lock(&self.registered) = Some(client);
        Some(secret)
    }

    /// The secret of the registered client in use, for redacting errors (never read from
    /// the file: a secret not in use cannot be in an error).
    pub(crate) fn held_secret(&self) -> Option<String> {
        lock(&self.registered).as_ref().map(|r| r.secret.clone())
    }

    /// Records the issuer discovery just named. From now on only credentials it issued are
    /// given out (to rmcp too, so no refresh token goes to another authorization server),
    /// and credentials saved are its.
    pub(crate) fn bind_issuer(&self, issuer: Option<String>) {
        *lock(&self.bound) = Bound::Issuer(issuer);
    }

    /// The kept credentials of the issuer last bound, for a refresh before any sign-in:
    /// none when no issuer is bound or the credentials name none.
    pub(crate) async fn load_bound(&self) -> Option<StoredCredentials> {
        let Bound::Issuer(Some(bound)) = lock(&self.bound).clone() else {
            return None;
        };
        let (issuer, credentials) = self.held().await?;
        (issuer.as_deref() == Some(bound.as_str())).then_some(credentials)
    }

    /// The credentials held and the issuer they came from.
    async fn held(&self) -> Option<(Option<String>, StoredCredentials)> {
        match &self.kind {
            Kind::Memory(store) => {
                let credentials = store.load().await.ok().flatten()?;
                Some((lock(&self.saved).clone(), credentials))
            }
            Kind::File { .. } => self.read().map(|body| (body.issuer, body.credentials)),
        }
    }

    /// The file's body, if it is this URL's.
    fn read(&self) -> Option<FileBody> {
        let Kind::File { path, url } = &self.kind else {
            return None;
        };
        use std::io::Read;
        let file = std::fs::File::open(path).ok()?;
        let mut text = String::new();
        file.take(MAX_FILE_BYTES).read_to_string(&mut text).ok()?;
        serde_json::from_str::<FileBody>(&text)
            .ok()
            .filter(|body| &body.url == url)
    }
}

/// `name` as a file name: anything but ASCII letters, digits, `-` and `_` becomes `_`.
fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[async_trait::async_trait]
impl CredentialStore for Store {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some((issuer, credentials)) = self.held().await else {
            return Ok(None);
        };
        Ok(match lock(&self.bound).clone() {
            Bound::Unset => Some(credentials),
            Bound::Issuer(bound) => (bound == issuer).then_some(credentials),
        })
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let issuer = match lock(&self.bound).clone() {
            Bound::Unset => None,
            Bound::Issuer(issuer) => issuer,
        };
        match &self.kind {
            Kind::Memory(store) => {
                *lock(&self.saved) = issuer;
                store.save(credentials).await
            }
            Kind::File { path, url } => {
                // The registered client's secret, when these credentials are that client's:
                // the one registered now, else the one the file kept for it.
                let registered = self
                    .registered_client()
                    .filter(|r| r.client_id == credentials.client_id);
                let body = FileBody {
                    url: url.clone(),
                    issuer,
                    credentials,
                    registered,
                };
                let text = serde_json::to_vec(&body)
                    .map_err(|e| AuthError::InternalError(format!("cannot encode tokens: {e}")))?;
                write_private(path, &text)
            }
        }
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match &self.kind {
            Kind::Memory(store) => store.clear().await,
            Kind::File { path, .. } => match std::fs::remove_file(path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io("remove", path, e)),
            },
        }
    }
}

/// Writes `bytes` to `path` for its owner alone: a 0700 directory, a 0600 file, replaced whole.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), AuthError> {
    use std::io::Write;
    #[cfg(unix)]
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

    let dir = path
        .parent()
        .ok_or_else(|| AuthError::InternalError("a token file needs a directory".into()))?;
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    builder.mode(0o700);
    builder.create(dir).map_err(|e| io("create", dir, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| io("protect", dir, e))?;
    }
    let temporary = path.with_extension("json.tmp");
    // A leftover of a write that was cut; never written through (no symlink followed).
    let _ = std::fs::remove_file(&temporary);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    options.mode(0o600);
    let mut file = options
        .open(&temporary)
        .map_err(|e| io("write", &temporary, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| io("write", &temporary, e))?;
    std::fs::rename(&temporary, path).map_err(|e| io("replace", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(token: &str) -> StoredCredentials {
        let response = serde_json::from_value(serde_json::json!({
            "access_token": token, "token_type": "Bearer", "expires_in": 3600
        }))
        .unwrap();
        StoredCredentials::new(
            "client".into(),
            Some(response),
            vec!["read".into()],
            Some(1),
        )
    }

    #[tokio::test]
    async fn credentials_in_memory_are_given_out_only_for_the_issuer_that_granted_them() {
        let store = Store::new(None, "s", "https://a.example/mcp");
        store.bind_issuer(Some("https://as1.example".into()));
        store.save(credentials("tok")).await.unwrap();
        assert!(store.load_bound().await.is_some());
        store.bind_issuer(Some("https://as2.example".into()));
        assert!(store.load_bound().await.is_none());
        assert!(store.load().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_file_store_keeps_credentials_for_its_url_only_and_for_its_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        let store = Store::new(Some(&tokens), "linear/../x", "https://a.example/mcp");
        store.save(credentials("tok-1")).await.unwrap();
        let files: Vec<_> = std::fs::read_dir(&tokens)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "one file per server");
        let file = files[0].clone();
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("linear____x-") && name.ends_with(".json"),
            "{name}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&file), 0o600);
            assert_eq!(mode(&tokens), 0o700);
        }
        let loaded = store.load().await.unwrap().expect("kept");
        assert_eq!(loaded.client_id, "client");
        // The same name pointed at another server loads nothing.
        let moved = Store::new(Some(&tokens), "linear/../x", "https://evil.example/mcp");
        assert!(moved.load().await.unwrap().is_none());
        // A refresh token is offered only to the issuer that granted it.
        assert!(store.load_bound().await.is_none(), "no issuer named yet");
        store.bind_issuer(Some("https://as.example".into()));
        store.save(credentials("tok-1")).await.unwrap();
        let reopened = Store::new(Some(&tokens), "linear/../x", "https://a.example/mcp");
        reopened.bind_issuer(Some("https://other-as.example".into()));
        assert!(reopened.load_bound().await.is_none());
        // Nor does rmcp get them once another issuer is named: no refresh can reach it.
        assert!(reopened.load().await.unwrap().is_none());
        reopened.bind_issuer(Some("https://as.example".into()));
        assert!(reopened.load_bound().await.is_some());
        // A damaged file is no credentials, not an error.
        std::fs::write(&file, "{not json").unwrap();
        assert!(store.load().await.unwrap().is_none());
        store.save(credentials("tok-2")).await.unwrap();
        assert!(store.load().await.unwrap().is_some());
        store.clear().await.unwrap();
        assert!(!file.exists());
        store.clear().await.unwrap();
    }

    #[tokio::test]
    async fn a_registered_clients_secret_is_kept_with_its_credentials_and_for_that_client_only() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        let url = "https://a.example/mcp";
        let store = Store::new(Some(&tokens), "s", url);
        store.registered(Registered {
            client_id: "client".into(),
            secret: "dcr-secret".into(),
        });
        store.save(credentials("tok")).await.unwrap();
        // A restart reads it back for that client, and for no other.
        let reopened = Store::new(Some(&tokens), "s", url);
        assert_eq!(reopened.held_secret(), None, "not in use until asked for");
        assert_eq!(
            reopened.registered_secret("client").as_deref(),
            Some("dcr-secret")
        );
        // In use from then on, so errors are redacted of it.
        assert_eq!(reopened.held_secret().as_deref(), Some("dcr-secret"));
        assert_eq!(reopened.registered_secret("another"), None);
        // Refreshed credentials saved after the restart keep it.
        reopened.save(credentials("tok-2")).await.unwrap();
        let again = Store::new(Some(&tokens), "s", url);
        assert_eq!(
            again.registered_secret("client").as_deref(),
            Some("dcr-secret")
        );
        // Credentials of another client (pre-registered now) do not carry it on.
        let mut other = credentials("tok-3");
        other.client_id = "configured".into();
        again.save(other).await.unwrap();
        let last = Store::new(Some(&tokens), "s", url);
        assert_eq!(last.registered_secret("client"), None);
        // In memory it lives as long as the store.
        let memory = Store::new(None, "s", url);
        memory.registered(Registered {
            client_id: "client".into(),
            secret: "dcr-secret".into(),
        });
        assert_eq!(
            memory.registered_secret("client").as_deref(),
            Some("dcr-secret")
        );
    }
}
