//! Named environments (docs/ARCHITECTURE.md §6.5) over the API on both backends: each user's
//! own, the operator's shared ones beside them, definitions checked as a session reads them,
//! and a session that names one it cannot use refused at creation.

use serde_json::{Value, json};
use ultraplan_server::environments::Scope;

use crate::support::{TestServer, both, create_body};

const PY: &str =
    "[setup]\ncommands = [\"python3 -m pip install tinypkg\"]\nnetwork = [\"pypi.org:443\"]\n";

async fn put(server: &TestServer, token: &str, name: &str, definition: &str) -> (u16, Value) {
    let body = json!({ "definition": definition });
    server
        .put(&format!("/v1/environments/{name}"), token, &body)
        .await
}

fn names(list: &Value) -> Vec<(String, bool)> {
    list["environments"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|e| {
                    (
                        e["name"].as_str().unwrap_or_default().to_owned(),
                        e["shared"] == true,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

both!(
    environments_are_kept_per_owner_beside_the_shared_ones,
    |backend| async move {
        let server = TestServer::start(backend).await;
        let ada = server.user("ada").await;
        let bob = server.user("bob").await;
        let (status, body) = put(&server, &ada, "py312", PY).await;
        assert_eq!(status, 204, "{body}");
        let environments = server.state.core.environments();
        environments
            .set(Scope::Shared, "team", "[setup]\ncommands = [\"true\"]\n")
            .await
            .expect("shared");
        // Ada's own shadows a shared one of the same name, for Ada only.
        environments
            .set(Scope::Shared, "py312", "[setup]\ncommands = [\"false\"]\n")
            .await
            .expect("shared");

        let (status, list) = server.get("/v1/environments", &ada).await;
        assert_eq!(status, 200);
        let want =
            [("py312", false), ("py312", true), ("team", true)].map(|(n, s)| (n.to_owned(), s));
        assert_eq!(names(&list), want);
        let (_, own) = server.get("/v1/environments/py312", &ada).await;
        assert_eq!(
            (own["definition"].as_str(), own["shared"].as_bool()),
            (Some(PY), Some(false))
        );
        let (_, list) = server.get("/v1/environments", &bob).await;
        let want = [("py312", true), ("team", true)].map(|(n, s)| (n.to_owned(), s));
        assert_eq!(names(&list), want);
        let (_, seen) = server.get("/v1/environments/py312", &bob).await;
        assert_eq!(seen["shared"], true, "Bob sees the shared one, not Ada's");

        // Bob cannot delete Ada's, nor a shared one; Ada deletes hers.
        let (status, body) = server.delete("/v1/environments/py312", &bob).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (404, Some("not_found"))
        );
        let (status, _) = server.delete("/v1/environments/team", &ada).await;
        assert_eq!(status, 404);
        let (status, _) = server.delete("/v1/environments/py312", &ada).await;
        assert_eq!(status, 204);
        let (_, own) = server.get("/v1/environments/py312", &ada).await;
        assert_eq!(own["shared"], true, "the shared one shows through again");

        // Sessions name one they can use, or are refused before anything starts.
        let bundle = server.upload_repo(&bob).await;
        let mut body = create_body(&bundle, "plan it");
        body["session_context"]["environment"] = json!("team");
        let (status, created) = server.post("/v1/sessions", &bob, &body).await;
        assert_eq!(status, 201, "{created}");
        body["session_context"]["environment"] = json!("nope");
        let (status, refused) = server.post("/v1/sessions", &bob, &body).await;
        assert_eq!(status, 400, "{refused}");
        assert_eq!(refused["error"]["code"], "unknown_environment");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("no environment named nope"),
            "{refused}"
        );

        let (status, _) = server.get("/v1/environments", "").await;
        assert_eq!(status, 401);
    }
);

both!(
    bad_environment_names_and_definitions_are_refused_with_reasons,
    |backend| async move {
        let server = TestServer::start(backend).await;
        let ada = server.user("ada").await;
        let cases: [(&str, &str, &str, &str); 6] = [
            (
                "Py",
                PY,
                "invalid_environment_name",
                "starts with a lower-case",
            ),
            ("a%20b", PY, "invalid_environment_name", "only a-z"),
            (
                "x",
                "[setup]\nbogus = 1\n",
                "invalid_environment",
                "unknown field",
            ),
            (
                "x",
                "[agent]\nnetwork = [\"*\", \"x\"]\n",
                "invalid_environment",
                "[agent] network",
            ),
            (
                "x",
                "[setup]\nnetwork = [\"*\", \"pypi.org\"]\n",
                "invalid_environment",
                "[setup] network",
            ),
            (
                "x",
                "[verify]\ncommands = [\"make test\"]\n",
                "invalid_environment",
                "[verify] belongs",
            ),
        ];
        for (name, definition, code, says) in cases {
            let (status, body) = put(&server, &ada, name, definition).await;
            assert_eq!(status, 400, "{name}: {body}");
            assert_eq!(body["error"]["code"], code, "{name}: {body}");
            let message = body["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{name}: {message}");
        }
        let (_, list) = server.get("/v1/environments", &ada).await;
        assert_eq!(list, json!({"environments": []}), "nothing half-stored");
    }
);
