//! `client-callback-secret-rotate`: POST /api/client/v1/callback_secret. Written by `cargo xtask functions`; do not edit.

agentplane_functions::route_function!(ClientCallbackSecretRotate);
