//! Session files: create (an upload URL), list, get (turns `ready` once the object is there),
//! delete.

mod documents;
pub mod handlers;
mod inline;
pub mod input;
pub mod settle;
pub mod view;
pub mod wire;
