//! Session files: create (an upload URL), list, get (turns `ready` once the object is there),
//! delete.

pub mod handlers;
pub mod input;
pub mod settle;
pub mod view;
pub mod wire;
