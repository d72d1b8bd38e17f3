//! The list object both the client and Core APIs answer:
//! `{object:"list", data, has_more, first_id, last_id}`, and the page parameters they take.

use agentplane_domain::page::Page;
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

/// One page of a list.
#[derive(Debug, Serialize, ToSchema)]
pub struct List<T> {
    /// Always `list`.
    #[schema(inline, value_type = String, pattern = "^list$")]
    pub object: &'static str,
    pub data: Vec<T>,
    pub has_more: bool,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
}

impl<T> List<T> {
    pub fn of<S>(page: &Page<S>, render: impl Fn(&S) -> T, id: impl Fn(&S) -> String) -> Self {
        Self {
            object: "list",
            data: page.items.iter().map(render).collect(),
            has_more: page.has_more,
            first_id: page.items.first().map(&id),
            last_id: page.items.last().map(&id),
        }
    }
}

/// The keyset page parameters (`agentplane_domain::page::PageRequest` parses them).
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct PageParams {
    /// The id of the last item of the previous page; an unknown id answers 404.
    after: Option<String>,
    /// Page size, 1 to 100 (default 20).
    #[param(minimum = 1, maximum = 100)]
    limit: Option<u16>,
    /// `desc` (newest first, the default) or `asc`.
    #[param(pattern = "^(asc|desc)$")]
    order: Option<String>,
}
