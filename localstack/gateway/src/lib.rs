//! The local gateway as a library: its HTTP server (`server`), so that tests serve through the
//! very code the gateway runs.

pub mod server;
