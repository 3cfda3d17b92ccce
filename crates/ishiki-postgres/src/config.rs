//! Connection strings (libpq's, with the `PG*` environment filling the gaps) and conversation
//! ids.

use std::str::FromStr;

use ishiki_store::{StoreError, StoreErrorKind};
use tokio_postgres::Config;

use crate::MAX_CONVERSATION_BYTES;

/// Parses a connection string and fills what it leaves out from the environment as libpq
/// does: `PGHOST` (a path is a Unix socket directory), `PGPORT`, `PGUSER` (else `USER`),
/// `PGPASSWORD`, `PGDATABASE`, `PGAPPNAME`. `env` reads a variable (`std::env::var` in
/// [`PostgresStore::connect`](crate::PostgresStore::connect)); passing it in keeps this testable.
pub fn config_from(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, StoreError> {
    // The parser's message never repeats the string, so a password in it does not leak.
    let mut config = Config::from_str(url).map_err(|e| {
        StoreError::new(
            StoreErrorKind::Database,
            format!("invalid postgres connection string: {e}"),
        )
    })?;
    if config.get_hosts().is_empty() {
        let hosts = env("PGHOST").unwrap_or_else(|| "localhost".to_owned());
        for host in hosts.split(',').filter(|h| !h.is_empty()) {
            if host.starts_with('/') {
                config.host_path(host);
            } else {
                config.host(host);
            }
        }
    }
    if config.get_ports().is_empty()
        && let Some(port) = env("PGPORT")
    {
        let port: u16 = port.parse().map_err(|_| {
            StoreError::new(
                StoreErrorKind::Database,
                format!("PGPORT `{port}` is not a port number"),
            )
        })?;
        config.port(port);
    }
    if config.get_user().is_none() {
        match env("PGUSER").or_else(|| env("USER")) {
            Some(user) => config.user(&user),
            None => {
                return Err(StoreError::new(
                    StoreErrorKind::Database,
                    "the postgres connection string names no user, and neither PGUSER nor USER is set",
                ));
            }
        };
    }
    if config.get_password().is_none()
        && let Some(password) = env("PGPASSWORD")
    {
        config.password(password);
    }
    if config.get_dbname().is_none()
        && let Some(dbname) = env("PGDATABASE")
    {
        config.dbname(&dbname);
    }
    if config.get_application_name().is_none() {
        config.application_name(env("PGAPPNAME").as_deref().unwrap_or("ishiki"));
    }
    Ok(config)
}

/// The Unix socket directories `config` connects through (`host=/run/postgresql`, a
/// percent-encoded path as the host, or a `PGHOST` path): an embedder declares them to the
/// runtime as store locations, so the model cannot plant or replace a socket through a root.
pub fn socket_dirs(config: &Config) -> Vec<std::path::PathBuf> {
    config
        .get_hosts()
        .iter()
        .filter_map(|host| match host {
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(path) => Some(path.clone()),
            tokio_postgres::config::Host::Tcp(_) => None,
        })
        .collect()
}

pub(crate) fn check_conversation(conversation: &str) -> Result<(), StoreError> {
    let why = if conversation.is_empty() {
        "is empty"
    } else if conversation.len() > MAX_CONVERSATION_BYTES {
        "is longer than 256 bytes"
    } else if conversation.contains('\0') {
        "contains a NUL character"
    } else {
        return Ok(());
    };
    Err(StoreError::new(
        StoreErrorKind::Database,
        format!("the conversation id {why}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_dirs_come_from_the_url_and_from_pghost() {
        let none = |_: &str| None;
        let config = config_from("host=/run/pg,db.example port=5432 user=u", &none)
            .expect("a connection string");
        assert_eq!(
            socket_dirs(&config),
            vec![std::path::PathBuf::from("/run/pg")]
        );
        let config = config_from("postgresql://u@%2Fvar%2Frun%2Fpostgresql/db", &none)
            .expect("a URL with a socket host");
        assert_eq!(
            socket_dirs(&config),
            vec![std::path::PathBuf::from("/var/run/postgresql")]
        );
        let env = |name: &str| (name == "PGHOST").then(|| "/tmp/sock".to_owned());
        let config = config_from("postgresql://u@/db", &env).expect("PGHOST fills the host");
        assert_eq!(
            socket_dirs(&config),
            vec![std::path::PathBuf::from("/tmp/sock")]
        );
        let config = config_from("postgresql://u@localhost/db", &none).expect("a TCP host");
        assert!(socket_dirs(&config).is_empty());
    }
}
