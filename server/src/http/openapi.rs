//! The OpenAPI document, generated from the handlers' annotations and the protocol types.

use utoipa::OpenApi;
use utoipa::openapi::path::{Operation, ParameterIn, PathItem};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};

use crate::http::api;

#[derive(OpenApi)]
#[openapi(
    info(title = "ultraplan", description = "Remote planning sessions: bundles, sessions, the event log and plan decisions."),
    paths(
        api::meta::healthz,
        api::meta::metrics,
        api::meta::openapi,
        api::meta::eligibility,
        api::bundles::head,
        api::bundles::put,
        api::bundle_uploads::head,
        api::bundle_uploads::patch,
        api::manifests::post,
        api::manifests::put_contents,
        api::sessions::create,
        api::sessions::list,
        api::sessions::get,
        api::sessions::archive,
        api::sessions::plans,
        api::sessions::decide,
        api::comments::create,
        api::comments::list,
        api::comments::reopen,
        api::patch::get,
        api::events::list,
        api::events::post,
        api::environments::put,
        api::environments::list,
        api::environments::get,
        api::environments::delete,
        api::secrets::put,
        api::secrets::list,
        api::secrets::delete,
        crate::http::pages::login::mint,
    ),
    modifiers(&BearerAuth, &CommonResponses)
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Responses every handler can give because of the layers and extractors they share, so clients
/// (and schema-driven fuzzers) are told about them: 401 and 429 where a token is required (the
/// auth extractor and the rate limiter), 400 where a path, query or body is parsed, 404 where a
/// path names a session (unknown, or another user's), 408 and 413 where a body is read (the body
/// deadline and size limits). A response an annotation documents itself is kept as written.
struct CommonResponses;

impl utoipa::Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for item in openapi.paths.paths.values_mut() {
            for op in operations(item) {
                let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
                let has = |at: ParameterIn, named: Option<&str>| {
                    op.parameters.iter().flatten().any(|p| match p {
                        RefOr::T(p) => p.parameter_in == at && named.is_none_or(|n| p.name == n),
                        RefOr::Ref(_) => false,
                    })
                };
                let path = has(ParameterIn::Path, None);
                let session = has(ParameterIn::Path, Some("id"));
                let body = op.request_body.is_some();
                let parsed = path || has(ParameterIn::Query, None) || body;
                let common = [
                    (secured, "401", "missing or invalid API token"),
                    (secured, "429", "rate limited (see Retry-After)"),
                    (parsed, "400", "malformed path, query or body"),
                    (session, "404", "no such session for this user"),
                    (body, "408", "request body too slow or past its deadline"),
                    (body, "413", "request body too large"),
                ];
                for (applies, code, text) in common {
                    if applies {
                        add_error(op, code, text);
                    }
                }
            }
        }
    }
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        item.get.as_mut(),
        item.put.as_mut(),
        item.post.as_mut(),
        item.delete.as_mut(),
        item.head.as_mut(),
        item.patch.as_mut(),
    ]
    .into_iter()
    .flatten()
}

fn add_error(op: &mut Operation, code: &str, description: &str) {
    op.responses
        .responses
        .entry(code.to_owned())
        .or_insert_with(|| {
            let body = ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build();
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content("application/json", body)
                    .build(),
            )
        });
}

/// The document served at `/v1/openapi.json`.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc
}
