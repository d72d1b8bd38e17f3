//! Building SDK configuration: from the environment in Lambda and the local gateway, or pointed
//! at an explicit emulator endpoint in tests.

use aws_config::{BehaviorVersion, Region, SdkConfig};

/// The standard chain: region, credentials and `AWS_ENDPOINT_URL` from the environment.
pub async fn sdk_config_from_env() -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest()).load().await
}

/// An emulator at `endpoint` with LocalStack's well-known credentials (`test`/`test`): it
/// checks presigned URLs' signatures against that secret.
pub async fn emulator_sdk_config(endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test", "test", None, None, "emulator",
        ))
        .load()
        .await
}
