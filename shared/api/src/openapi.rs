//! The contract as a document: one OpenAPI 3.1 document per surface, derived from the route
//! declarations (`Route::declaration`) and the `#[utoipa::path]` and `ToSchema` of their
//! handlers and wire types — never written by hand. The gateway serves them at
//! `/openapi/{surface}.json`; `openapi/*.json` holds the same documents checked in, and a test
//! fails when the two differ (`AGENTPLANE_WRITE_OPENAPI=1` rewrites them). The answers every
//! operation of a surface shares (401, 503, 413 with a body, and on the project-key surfaces the
//! rate limit's 429 with `Retry-After`) are added here, not repeated in each `#[utoipa::path]`.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Paths, Ref, ResponseBuilder,
    SecurityRequirement, ServerBuilder,
};

use crate::Route;

/// A surface with its own document, key and error envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Surface {
    /// `/api/client/v1`: the client API, with a project key.
    Client,
    /// `/core/v1`: the Core admin API, with the Core key.
    Core,
    /// `/node/v1`: what sandbox nodes call, with a node token.
    Node,
    /// `/sandbox/v1`: the E2B-compatible sandbox API, with a project key.
    Sandbox,
    /// `/v1`: the Platform API (environments, sessions, Runs), with a project key.
    Platform,
}

impl Surface {
    pub const ALL: &'static [Surface] =
        &[Surface::Client, Surface::Core, Surface::Node, Surface::Sandbox, Surface::Platform];

    /// The document's name: `/openapi/{name}.json`, `openapi/{name}.json`.
    pub fn name(self) -> &'static str {
        match self {
            Surface::Client => "client",
            Surface::Core => "core",
            Surface::Node => "node",
            Surface::Sandbox => "sandbox",
            Surface::Platform => "platform",
        }
    }

    pub fn by_name(name: &str) -> Option<Surface> {
        Self::ALL.iter().copied().find(|s| s.name() == name)
    }

    pub fn prefix(self) -> &'static str {
        match self {
            Surface::Client => "/api/client/v1/",
            Surface::Core => "/core/v1/",
            Surface::Node => "/node/v1/",
            Surface::Sandbox => "/sandbox/v1/",
            Surface::Platform => "/v1/",
        }
    }

    pub fn of(route: Route) -> Surface {
        let path = route.path();
        Self::ALL.iter().copied().find(|s| path.starts_with(s.prefix())).unwrap_or(Surface::Core)
    }

    fn title(self) -> &'static str {
        match self {
            Surface::Client => "Agentplane client API",
            Surface::Core => "Agentplane Core admin API",
            Surface::Node => "Agentplane node API",
            Surface::Sandbox => "Agentplane sandbox API (E2B-compatible)",
            Surface::Platform => "Agentplane Platform API",
        }
    }

    /// The schema of the surface's error answers.
    fn error_schema(self) -> &'static str {
        match self {
            Surface::Client | Surface::Core | Surface::Node => "ErrorEnvelope",
            Surface::Sandbox => "SandboxError",
            Surface::Platform => "PlatformErrorEnvelope",
        }
    }

    /// Whether a project key authenticates the surface, so its requests count against the key's
    /// rate limit.
    fn rate_limited(self) -> bool {
        matches!(self, Surface::Client | Surface::Sandbox | Surface::Platform)
    }

    /// What the 401 of every operation says.
    fn unauthorized(self) -> &'static str {
        match self {
            Surface::Client | Surface::Sandbox => "No valid project key.",
            Surface::Core => "No valid Core key.",
            Surface::Node => "No valid node token.",
            Surface::Platform => "Missing or invalid Platform API token.",
        }
    }

    fn security(self) -> (&'static str, SecurityScheme) {
        let bearer = |description: &str| {
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).description(Some(description)).build(),
            )
        };
        match self {
            Surface::Client => ("project_key", bearer("A project API key (`cpeer_…`).")),
            Surface::Platform => {
                ("platform_token", bearer("A project API key (`cpeer_…`) as the Platform API token."))
            }
            Surface::Core => ("core_key", bearer("The deployment's Core key.")),
            Surface::Node => ("node_token", bearer("A sandbox node's token (`apnode_…`).")),
            Surface::Sandbox => (
                "project_key",
                SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                    "X-API-Key",
                    "A project API key (`cpeer_…`); `Authorization: Bearer` is accepted too.",
                ))),
            ),
        }
    }
}

/// The OpenAPI document of `surface`: every route whose path is under its prefix.
pub fn document(surface: Surface) -> OpenApi {
    let mut paths = Paths::new();
    let mut schemas = Vec::new();
    for route in Route::ALL.iter().copied().filter(|r| Surface::of(*r) == surface) {
        let (route_schemas, route_paths, _) = (route.declaration().serve)();
        paths.merge(route_paths);
        schemas.extend(route_schemas);
    }
    add_shared_responses(surface, &mut paths);
    schemas.sort_by(|a, b| a.0.cmp(&b.0));
    schemas.dedup_by(|a, b| a.0 == b.0);
    let (scheme_name, scheme) = surface.security();
    let mut components =
        ComponentsBuilder::new().schemas_from_iter(schemas).security_scheme(scheme_name, scheme);
    if surface == Surface::Node {
        // `POST /node/v1/enroll` is the one node operation authenticated otherwise.
        let enrollment = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some("The deployment's node enrollment key (its `NodeEnrollmentSecret`)."))
            .build();
        components = components.security_scheme("enrollment_key", SecurityScheme::Http(enrollment));
    }
    let components = components.build();
    OpenApiBuilder::new()
        .info(InfoBuilder::new().title(surface.title()).version(env!("CARGO_PKG_VERSION")).build())
        .servers(Some([ServerBuilder::new().url("/").build()]))
        .paths(paths)
        .components(Some(components))
        .security(Some([SecurityRequirement::new(scheme_name, Vec::<String>::new())]))
        .build()
}

/// What every operation of a surface may answer, the same on each, so its `#[utoipa::path]`
/// lists only its own: 401 (no valid credential), 503 (storage unavailable), when it takes
/// a body 413, and on a project-key surface 429 (the key's rate limit, with `Retry-After`). An
/// operation that says more about one of them (a 503 that also names the node) keeps its own.
fn add_shared_responses(surface: Surface, paths: &mut Paths) {
    let answer = |description: &str| {
        let content =
            ContentBuilder::new().schema(Some(Ref::from_schema_name(surface.error_schema()))).build();
        ResponseBuilder::new().description(description).content("application/json", content).build()
    };
    for item in paths.paths.values_mut() {
        let operations = [&mut item.get, &mut item.put, &mut item.post, &mut item.delete, &mut item.patch];
        for operation in operations.into_iter().flatten() {
            let mut shared =
                vec![("401", surface.unauthorized()), ("503", "Storage is unavailable; try again.")];
            if operation.request_body.is_some() {
                shared.push(("413", "The body is too large."));
            }
            for (status, description) in shared {
                operation
                    .responses
                    .responses
                    .entry(status.to_owned())
                    .or_insert_with(|| answer(description).into());
            }
            if surface.rate_limited() {
                const RATE_LIMITED: &str = "`rate_limit_exceeded`: the key made the most requests its window \
                     allows (`AGENTPLANE_RATE_LIMIT_PER_MINUTE`); `Retry-After` says in how many seconds the \
                     window ends.";
                match operation.responses.responses.entry("429".to_owned()) {
                    // The route has a 429 of its own (a cap): the rate limit's is one more reason.
                    std::collections::btree_map::Entry::Occupied(mut own) => {
                        if let utoipa::openapi::RefOr::T(response) = own.get_mut() {
                            response.description = format!("{} Or {RATE_LIMITED}", response.description);
                            response.headers.insert("Retry-After".to_owned(), retry_after_header().into());
                        }
                    }
                    std::collections::btree_map::Entry::Vacant(vacant) => {
                        let mut response = answer(RATE_LIMITED);
                        response.headers.insert("Retry-After".to_owned(), retry_after_header().into());
                        vacant.insert(response.into());
                    }
                }
            }
        }
    }
}

/// `Retry-After`: whole seconds to wait.
fn retry_after_header() -> utoipa::openapi::header::Header {
    let seconds = utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::Integer)
        .minimum(Some(1))
        .build();
    utoipa::openapi::header::HeaderBuilder::new()
        .schema(Some(seconds))
        .description(Some("Seconds until the request may be sent again."))
        .build()
}

/// The document as the gateway serves it and the repository keeps it: pretty JSON, one
/// trailing newline.
pub fn document_json(surface: Surface) -> String {
    let mut text = document(surface).to_pretty_json().unwrap_or_else(|_| "{}".to_owned());
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_in_exactly_one_document_once() {
        let mut seen = 0;
        for surface in Surface::ALL {
            let doc = document(*surface);
            for route in Route::ALL.iter().filter(|r| Surface::of(**r) == *surface) {
                let item = doc.paths.paths.get(route.path()).unwrap_or_else(|| panic!("{route:?}"));
                let operation = match route.method().as_str() {
                    "GET" => item.get.as_ref(),
                    "POST" => item.post.as_ref(),
                    "PATCH" => item.patch.as_ref(),
                    "PUT" => item.put.as_ref(),
                    "DELETE" => item.delete.as_ref(),
                    _ => None,
                };
                let operation = operation.unwrap_or_else(|| panic!("{route:?} has no operation"));
                assert_eq!(operation.operation_id.as_deref(), Some(route.function_name()), "{route:?}");
                seen += 1;
            }
        }
        assert_eq!(seen, Route::ALL.len());
        for route in Route::ALL {
            assert!(route.path().starts_with(Surface::of(*route).prefix()), "{route:?}");
        }
    }

    #[test]
    fn every_operation_answers_the_shared_statuses_in_its_surfaces_envelope() {
        for surface in Surface::ALL {
            let doc = document(*surface);
            let schemas = doc.components.as_ref().map(|c| &c.schemas).expect("components");
            assert!(schemas.contains_key(surface.error_schema()), "{surface:?}");
            for (path, item) in &doc.paths.paths {
                let operations = [&item.get, &item.put, &item.post, &item.delete, &item.patch];
                for operation in operations.into_iter().flatten() {
                    let answers = &operation.responses.responses;
                    let mut shared = vec!["401", "503"];
                    if operation.request_body.is_some() {
                        shared.push("413");
                    }
                    if surface.rate_limited() {
                        shared.push("429");
                    }
                    for status in shared {
                        assert!(answers.contains_key(status), "{path} has no {status}");
                    }
                }
            }
        }
    }

    /// The repository's `openapi/*.json` are the documents the code derives; rewrite them with
    /// `AGENTPLANE_WRITE_OPENAPI=1 cargo test -p agentplane-api openapi`.
    #[test]
    fn checked_in_documents_match_the_code() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../openapi");
        let write = std::env::var_os("AGENTPLANE_WRITE_OPENAPI").is_some();
        for surface in Surface::ALL {
            let file = dir.join(format!("{}.json", surface.name()));
            let derived = document_json(*surface);
            if write {
                std::fs::create_dir_all(&dir).expect("create openapi/");
                std::fs::write(&file, &derived).expect("write the document");
            }
            let stored = std::fs::read_to_string(&file).unwrap_or_default();
            assert!(
                stored == derived,
                "{} is stale: run AGENTPLANE_WRITE_OPENAPI=1 cargo test -p agentplane-api openapi",
                file.display()
            );
        }
    }
}
