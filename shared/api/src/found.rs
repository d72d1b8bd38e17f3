//! Store reads of a named record, for every surface: `NotFound` is the caller's own 404 (each
//! surface names which), any other failure the surface's storage error (503).

use agentplane_store::StoreError;

pub trait Found<T> {
    fn or_not_found<E: From<StoreError>>(self, not_found: E) -> Result<T, E>;
}

impl<T> Found<T> for Result<T, StoreError> {
    fn or_not_found<E: From<StoreError>>(self, not_found: E) -> Result<T, E> {
        match self {
            Ok(value) => Ok(value),
            Err(StoreError::NotFound) => Err(not_found),
            Err(err) => Err(E::from(err)),
        }
    }
}
