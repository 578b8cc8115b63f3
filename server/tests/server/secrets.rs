//! Secrets for environment setup (docs/ARCHITECTURE.md §6.5): stored sealed on both backends,
//! set, listed and deleted over the API per owner (never shown back), by the `secret` command,
//! and handed to the orchestrator by `values_for`.

use std::fs::Permissions;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use serde_json::{Value, json};
use ultraplan_server::secrets::{KeyFile, Secrets, SecretsError};
use ultraplan_server::store::{SecretRow, Store};

use crate::support::{Backend, TestServer, both, on_both_backends, test_db};

on_both_backends!(
    secrets_are_stored_replaced_listed_and_deleted_per_owner,
    values_for_names_every_missing_secret,
    a_new_key_reseals_every_secret_once,
);

fn row(owner: &str, name: &str, byte: u8, at: i64) -> SecretRow {
    SecretRow {
        owner_id: owner.to_owned(),
        name: name.to_owned(),
        nonce: vec![byte; 12],
        ciphertext: vec![byte; 20],
        created_at: at,
        updated_at: at,
    }
}

async fn secrets_are_stored_replaced_listed_and_deleted_per_owner(store: Arc<dyn Store>) {
    let ada = store.create_user("ada").await.expect("user").id;
    let bob = store.create_user("bob").await.expect("user").id;
    store
        .put_secret(&row(&ada, "B_TOKEN", 1, 10))
        .await
        .expect("put");
    store
        .put_secret(&row(&ada, "A_TOKEN", 2, 11))
        .await
        .expect("put");
    store
        .put_secret(&row(&bob, "A_TOKEN", 3, 12))
        .await
        .expect("put");
    // Replacing keeps created_at and takes the new value and updated_at.
    store
        .put_secret(&row(&ada, "B_TOKEN", 4, 20))
        .await
        .expect("replace");
    let names = store.secret_names(&ada).await.expect("names");
    assert_eq!(
        names,
        vec![("A_TOKEN".to_owned(), 11), ("B_TOKEN".to_owned(), 20)]
    );
    let wanted = ["B_TOKEN", "NOPE", "A_TOKEN"].map(str::to_owned);
    let sealed = store.sealed_secrets(&ada, &wanted).await.expect("sealed");
    let mut replaced = row(&ada, "B_TOKEN", 4, 20);
    replaced.created_at = 10;
    assert_eq!(sealed, vec![row(&ada, "A_TOKEN", 2, 11), replaced]);
    // Another owner's rows are out of reach.
    assert!(!store.delete_secret(&bob, "B_TOKEN").await.expect("delete"));
    let bobs = store.sealed_secrets(&bob, &wanted).await.expect("sealed");
    assert_eq!(bobs, vec![row(&bob, "A_TOKEN", 3, 12)]);
    assert!(store.delete_secret(&ada, "B_TOKEN").await.expect("delete"));
    assert!(!store.delete_secret(&ada, "B_TOKEN").await.expect("delete"));
    let names = store.secret_names(&ada).await.expect("names");
    assert_eq!(names, vec![("A_TOKEN".to_owned(), 11)]);
    assert_eq!(store.secret_names("nobody").await.expect("names"), vec![]);
    // A secret belongs to a user that exists.
    assert!(store.put_secret(&row("nobody", "X", 1, 1)).await.is_err());
}

async fn values_for_names_every_missing_secret(store: Arc<dyn Store>) {
    let dir = tempfile::tempdir().expect("dir");
    let key = Arc::new(KeyFile::new(dir.path().join("secrets.key")));
    let secrets = Secrets::new(store.clone(), key);
    let ada = store.create_user("ada").await.expect("user").id;
    let bob = store.create_user("bob").await.expect("user").id;
    secrets
        .set(&ada, "PIP_TOKEN", "pip-value")
        .await
        .expect("set");
    secrets
        .set(&ada, "NPM_TOKEN", "npm\nvalue")
        .await
        .expect("set");
    secrets.set(&bob, "GH_TOKEN", "bob's").await.expect("set");

    let names = ["PIP_TOKEN", "NPM_TOKEN", "PIP_TOKEN"].map(str::to_owned);
    let values = secrets.values_for(&ada, &names).await.expect("values");
    let values: Vec<_> = values
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        values,
        vec![("NPM_TOKEN", "npm\nvalue"), ("PIP_TOKEN", "pip-value")]
    );
    assert!(
        secrets
            .values_for(&ada, &[])
            .await
            .expect("none")
            .is_empty()
    );

    let names = ["ZED", "PIP_TOKEN", "GH_TOKEN", "ALPHA"].map(str::to_owned);
    match secrets.values_for(&ada, &names).await {
        Err(SecretsError::Missing(missing)) => assert_eq!(missing, ["ALPHA", "GH_TOKEN", "ZED"]),
        other => panic!("{other:?}"),
    }
    let bad = ["PATH".to_owned()];
    let refused = secrets.values_for(&ada, &bad).await;
    assert!(
        matches!(refused, Err(SecretsError::InvalidName(_))),
        "{refused:?}"
    );

    // A row moved to another owner does not open there.
    let mut moved = store
        .sealed_secrets(&ada, &["PIP_TOKEN".to_owned()])
        .await
        .expect("sealed")
        .remove(0);
    moved.owner_id = bob.clone();
    store.put_secret(&moved).await.expect("put");
    let opened = secrets.values_for(&bob, &["PIP_TOKEN".to_owned()]).await;
    assert!(
        matches!(opened, Err(SecretsError::Unreadable(_))),
        "{opened:?}"
    );
}

async fn put(server: &TestServer, token: &str, name: &str, body: &Value) -> (u16, Value) {
    server
        .put(&format!("/v1/secrets/{name}"), token, body)
        .await
}

async fn delete(server: &TestServer, token: &str, name: &str) -> (u16, Value) {
    server.delete(&format!("/v1/secrets/{name}"), token).await
}

/// `GET /v1/secrets` as text, and parsed.
async fn list(server: &TestServer, token: &str) -> (String, Value) {
    let (status, body) = server.get_raw("/v1/secrets", token).await;
    assert_eq!(status, 200);
    let text = String::from_utf8(body).expect("utf-8");
    let value = serde_json::from_str(&text).expect("json");
    (text, value)
}

const VALUE: &str = "pypi-AgEIcHlwaS5vcmcCJDU4ZjRhYmQ2";

both!(
    secrets_round_trip_over_the_api_per_owner,
    |backend| async move {
        let server = TestServer::start(backend).await;
        let ada = server.user("ada").await;
        let bob = server.user("bob").await;
        assert_eq!(list(&server, &ada).await.1, json!({"secrets": []}));

        let (status, _) = put(&server, &ada, "PIP_TOKEN", &json!({"value": VALUE})).await;
        assert_eq!(status, 204);
        let (text, listed) = list(&server, &ada).await;
        assert!(!text.contains(VALUE), "{text}");
        assert_eq!(listed["secrets"][0]["name"], "PIP_TOKEN");
        let first = listed["secrets"][0]["updated_at"]
            .as_str()
            .expect("time")
            .to_owned();
        assert_eq!(listed["secrets"].as_array().map(Vec::len), Some(1));

        // Replacing moves updated_at on; the value is never shown. (Timestamps have
        // millisecond precision: wait for the clock to pass the first one.)
        while ultraplan_server::store::format_ms(ultraplan_server::store::now_ms()) == first {
            tokio::task::yield_now().await;
        }
        let (status, _) = put(&server, &ada, "PIP_TOKEN", &json!({"value": "second"})).await;
        assert_eq!(status, 204);
        let (text, listed) = list(&server, &ada).await;
        assert!(!text.contains("second"), "{text}");
        let second = listed["secrets"][0]["updated_at"]
            .as_str()
            .expect("time")
            .to_owned();
        assert!(
            parse_time(&second) > parse_time(&first),
            "{first} then {second}"
        );

        // Bob sees none of it and cannot delete it.
        assert_eq!(list(&server, &bob).await.1, json!({"secrets": []}));
        let (status, body) = delete(&server, &bob, "PIP_TOKEN").await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (404, Some("not_found"))
        );
        assert_eq!(
            list(&server, &ada).await.1["secrets"][0]["name"],
            "PIP_TOKEN"
        );

        let (status, _) = delete(&server, &ada, "PIP_TOKEN").await;
        assert_eq!(status, 204);
        let (status, body) = delete(&server, &ada, "PIP_TOKEN").await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (404, Some("not_found"))
        );
        assert_eq!(list(&server, &ada).await.1, json!({"secrets": []}));

        // No token, no secrets.
        let (status, _) = server.get("/v1/secrets", "").await;
        assert_eq!(status, 401);
    }
);

fn parse_time(rfc3339: &str) -> time::OffsetDateTime {
    time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .expect("RFC 3339")
}

both!(
    bad_names_and_values_are_refused_with_reasons,
    |backend| async move {
        let server = TestServer::start(backend).await;
        let ada = server.user("ada").await;
        let long_name = format!("A{}", "B".repeat(64));
        let names: [(&str, &str); 6] = [
            ("pip_token", "upper-case"),
            ("1TOKEN", "digit"),
            ("PIP-TOKEN", "upper-case"),
            ("PATH", "set by the sandbox"),
            ("LD_PRELOAD", "set by the sandbox"),
            (&long_name, "at most 64"),
        ];
        for (name, reason) in names {
            let (status, body) = put(&server, &ada, name, &json!({"value": "v"})).await;
            assert_eq!(status, 400, "{name}");
            assert_eq!(body["error"]["code"], "invalid_secret_name", "{name}");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(reason), "{name}: {message}");
            let (status, body) = delete(&server, &ada, name).await;
            assert_eq!(
                (status, body["error"]["code"].as_str()),
                (400, Some("invalid_secret_name"))
            );
        }
        let too_big = "x".repeat(64 * 1024 + 1);
        let values: [(&str, &str); 2] = [("a\0b", "NUL"), (&too_big, "64 KiB")];
        for (value, reason) in values {
            let (status, body) = put(&server, &ada, "OK_NAME", &json!({"value": value})).await;
            assert_eq!(status, 400);
            assert_eq!(body["error"]["code"], "invalid_secret_value");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(reason), "{message}");
        }
        let (status, body) = put(&server, &ada, "OK_NAME", &json!({"nope": 1})).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("invalid_request"))
        );
        let (status, _) = put(
            &server,
            &ada,
            "OK_NAME",
            &json!({"value": "x".repeat(64 * 1024)}),
        )
        .await;
        assert_eq!(status, 204);
        assert_eq!(list(&server, &ada).await.1["secrets"][0]["name"], "OK_NAME");
    }
);

both!(the_database_holds_no_plaintext, |backend| async move {
    let server = TestServer::start(backend).await;
    let ada = server.user("ada").await;
    let (status, _) = put(&server, &ada, "PIP_TOKEN", &json!({"value": VALUE})).await;
    assert_eq!(status, 204);
    let rows = raw_rows(backend, server.state.core.config.database_url.expose()).await;
    assert_eq!(rows.len(), 1);
    let (name, nonce, ciphertext) = &rows[0];
    assert_eq!(name, "PIP_TOKEN");
    assert_eq!(nonce.len(), 12);
    assert_eq!(ciphertext.len(), VALUE.len() + 16, "ciphertext and tag");
    let leaked = ciphertext
        .windows(6)
        .any(|w| VALUE.as_bytes().windows(6).any(|v| v == w));
    assert!(!leaked, "the plaintext is in the row");
    // The key file was made in the data dir, readable by its owner only.
    let key = &server.state.core.config.secrets_key_file;
    let mode = std::fs::metadata(key).expect("key").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
});

/// Every secrets row as the database holds it: name, nonce, ciphertext.
async fn raw_rows(backend: Backend, url: &str) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let sql = "SELECT name, nonce, ciphertext FROM secrets";
    match backend {
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.expect("connect");
            sqlx::query_as(sql).fetch_all(&pool).await.expect("rows")
        }
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.expect("connect");
            sqlx::query_as(sql).fetch_all(&pool).await.expect("rows")
        }
    }
}

/// Run `ultraplan-server` with `stdin` as its input: stdout, stderr and success.
fn server_cli(data_dir: &std::path::Path, url: Option<&str>, args: &[&str], stdin: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ultraplan-server"));
    command
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("ULTRAPLAN_SECRETS_KEY_FILE")
        .env("ULTRAPLAN_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(url) = url {
        command.env("DATABASE_URL", url);
    }
    let mut child = command.spawn().expect("run ultraplan-server");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write stdin");
    drop(input);
    child.wait_with_output().expect("wait")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

both!(
    the_secret_command_sets_lists_and_removes,
    |backend| async move {
        let db = test_db(backend).await;
        let data_dir = db.dir.path().join("data");
        let url = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(db.url.as_str()),
        };
        let cli = |args: &[&str], stdin: &str| server_cli(&data_dir, url, args, stdin);
        let added = cli(&["user", "add", "ada"], "");
        assert!(added.status.success(), "{}", text(&added.stderr));

        let set = cli(
            &["secret", "set", "--user", "ada", "PIP_TOKEN"],
            "from-stdin\n",
        );
        assert!(set.status.success(), "{}", text(&set.stderr));
        let listed = cli(&["secret", "list", "--user", "ada"], "");
        assert!(listed.status.success(), "{}", text(&listed.stderr));
        let out = text(&listed.stdout);
        assert!(
            out.contains("PIP_TOKEN") && !out.contains("from-stdin"),
            "{out}"
        );

        let refused = cli(&["secret", "set", "--user", "ada", "HOME"], "x");
        assert!(!refused.status.success());
        assert!(
            text(&refused.stderr).contains("set by the sandbox"),
            "{}",
            text(&refused.stderr)
        );
        let nobody = cli(&["secret", "list", "--user", "nobody"], "");
        assert!(
            text(&nobody.stderr).contains("no user named nobody"),
            "{}",
            text(&nobody.stderr)
        );

        // What the command stored opens with the key file it made, trailing newline dropped.
        let db_url = url.map_or_else(
            || ultraplan_server::config::sqlite_url(&data_dir),
            str::to_owned,
        );
        let store = ultraplan_server::store::connect(&db_url)
            .await
            .expect("connect");
        let ada = store
            .user_by_name("ada")
            .await
            .expect("user")
            .expect("ada")
            .id;
        let key = Arc::new(KeyFile::new(data_dir.join("secrets.key")));
        let values = Secrets::new(store, key)
            .values_for(&ada, &["PIP_TOKEN".to_owned()])
            .await
            .expect("values");
        assert_eq!(
            values.get("PIP_TOKEN").map(String::as_str),
            Some("from-stdin")
        );

        // Rotation: everything is re-sealed under the new file, which the commands then use.
        let new_key = db.dir.path().join("new.key");
        let new_arg = new_key.to_str().expect("utf-8 path");
        let same = cli(
            &[
                "secret",
                "rotate-key",
                "--new-key-file",
                data_dir.join("secrets.key").to_str().expect("utf-8"),
            ],
            "",
        );
        assert!(!same.status.success(), "refuses the key in use");
        let rotated = cli(&["secret", "rotate-key", "--new-key-file", new_arg], "");
        assert!(rotated.status.success(), "{}", text(&rotated.stderr));
        assert!(
            text(&rotated.stderr).contains("Re-sealed 1 secret(s)"),
            "{}",
            text(&rotated.stderr)
        );
        let mode = std::fs::metadata(&new_key)
            .expect("made")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        let new_key = Arc::new(KeyFile::new(new_key.clone()));
        let store = ultraplan_server::store::connect(&db_url)
            .await
            .expect("connect");
        let values = Secrets::new(store, new_key)
            .values_for(&ada, &["PIP_TOKEN".to_owned()])
            .await
            .expect("opens under the new key");
        assert_eq!(
            values.get("PIP_TOKEN").map(String::as_str),
            Some("from-stdin")
        );

        let removed = cli(&["secret", "rm", "--user", "ada", "PIP_TOKEN"], "");
        assert!(removed.status.success(), "{}", text(&removed.stderr));
        let again = cli(&["secret", "rm", "--user", "ada", "PIP_TOKEN"], "");
        assert!(!again.status.success());
        assert!(
            text(&again.stderr).contains("no secret named PIP_TOKEN"),
            "{}",
            text(&again.stderr)
        );
    }
);

both!(
    a_key_file_others_may_read_stops_the_commands,
    |backend| async move {
        let db = test_db(backend).await;
        let data_dir = db.dir.path().join("data");
        let url = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(db.url.as_str()),
        };
        let key = db.dir.path().join("shared.key");
        std::fs::write(&key, [5u8; 32]).expect("key");
        let key_arg = key.to_str().expect("utf-8 path");
        let cli = |args: &[&str]| server_cli(&data_dir, url, args, "v");
        assert!(cli(&["user", "add", "ada"]).status.success());
        let set = &[
            "--secrets-key-file",
            key_arg,
            "secret",
            "set",
            "--user",
            "ada",
            "A",
        ];
        std::fs::set_permissions(&key, Permissions::from_mode(0o644)).expect("chmod");
        let refused = cli(set);
        assert!(!refused.status.success());
        assert!(
            text(&refused.stderr).contains("chmod 600"),
            "{}",
            text(&refused.stderr)
        );
        std::fs::set_permissions(&key, Permissions::from_mode(0o600)).expect("chmod");
        let set_ok = cli(set);
        assert!(set_ok.status.success(), "{}", text(&set_ok.stderr));
        assert!(
            !data_dir.join("secrets.key").exists(),
            "the flag's file was used"
        );
    }
);

async fn a_new_key_reseals_every_secret_once(store: Arc<dyn Store>) {
    use ultraplan_server::secrets::{Rotation, rotate_key};
    let dir = tempfile::tempdir().expect("dir");
    let old = Arc::new(KeyFile::new(dir.path().join("old.key")));
    let new = Arc::new(KeyFile::new(dir.path().join("new.key")));
    let ada = store.create_user("ada").await.expect("user").id;
    let bob = store.create_user("bob").await.expect("user").id;
    let before = Secrets::new(store.clone(), old.clone());
    before
        .set(&ada, "PIP_TOKEN", "pip-value")
        .await
        .expect("set");
    before.set(&bob, "GH_TOKEN", "bob's").await.expect("set");

    let rotation = rotate_key(store.as_ref(), &old, &new)
        .await
        .expect("rotate");
    assert_eq!(
        rotation,
        Rotation {
            resealed: 2,
            already: 0,
            unreadable: Vec::new()
        }
    );
    let after = Secrets::new(store.clone(), new.clone());
    let pip = after
        .values_for(&ada, &["PIP_TOKEN".to_owned()])
        .await
        .expect("opens");
    assert_eq!(pip.get("PIP_TOKEN").map(String::as_str), Some("pip-value"));
    let gh = after
        .values_for(&bob, &["GH_TOKEN".to_owned()])
        .await
        .expect("opens");
    assert_eq!(gh.get("GH_TOKEN").map(String::as_str), Some("bob's"));
    let stale = before.values_for(&ada, &["PIP_TOKEN".to_owned()]).await;
    assert!(
        matches!(stale, Err(SecretsError::Unreadable(_))),
        "{stale:?}"
    );

    // A value set under the old key meanwhile is picked up by running it again; a row neither
    // key opens is reported and left alone.
    before.set(&ada, "NPM_TOKEN", "npm").await.expect("set");
    let stranger = Arc::new(KeyFile::new(dir.path().join("other.key")));
    Secrets::new(store.clone(), stranger)
        .set(&bob, "ODD", "x")
        .await
        .expect("set");
    let rotation = rotate_key(store.as_ref(), &old, &new).await.expect("again");
    assert_eq!(
        rotation,
        Rotation {
            resealed: 1,
            already: 2,
            unreadable: vec![format!("{bob}/ODD")]
        }
    );
    let npm = after
        .values_for(&ada, &["NPM_TOKEN".to_owned()])
        .await
        .expect("opens");
    assert_eq!(npm.get("NPM_TOKEN").map(String::as_str), Some("npm"));
}
