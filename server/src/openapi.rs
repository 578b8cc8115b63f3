//! The OpenAPI document, generated from the handlers' annotations and the protocol types.

use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

use crate::api;

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
        api::sessions::create,
        api::sessions::list,
        api::sessions::get,
        api::sessions::archive,
        api::sessions::plans,
        api::sessions::decide,
        api::patch::get,
        api::events::list,
        api::events::post,
        crate::pages::login::mint,
    ),
    modifiers(&BearerAuth)
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

/// The document served at `/v1/openapi.json`.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc
}
