//! An agent over the A2A protocol (JSON-RPC 2.0): its card and its endpoint.

mod ctx;
pub mod handlers;
mod message;
pub mod rpc;
mod run;
mod stream;
pub mod task;
pub mod wire;
