//! Human-readable logs for the local gateway and tests (the Lambda functions log JSON: see
//! functions/).

pub fn init_local_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,aws_config=warn,aws_smithy_runtime=warn")
    });
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).try_init();
}
