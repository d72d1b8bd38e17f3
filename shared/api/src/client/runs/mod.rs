//! Background runs (`agent_run`): `GET /api/client/v1/runs[/{id}]`, `POST …/runs/{id}/cancel`,
//! and the queuing of a turn sent with `background: true` (the turn routes call [`queue`]).

pub mod handlers;
pub mod wire;

pub use handlers::queue;
