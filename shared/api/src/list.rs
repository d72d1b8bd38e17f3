//! The list object both the client and Core APIs answer:
//! `{object:"list", data, has_more, first_id, last_id}`.

use agentplane_domain::page::Page;
use serde_json::{Value, json};

pub fn body<T>(page: &Page<T>, render: impl Fn(&T) -> Value, id: impl Fn(&T) -> String) -> Value {
    json!({
        "object": "list",
        "data": page.items.iter().map(render).collect::<Vec<_>>(),
        "has_more": page.has_more,
        "first_id": page.items.first().map(&id),
        "last_id": page.items.last().map(&id),
    })
}
