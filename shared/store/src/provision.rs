//! Creates whatever of `resources` is missing. Idempotent: running it twice, or against a stack
//! that already has everything, changes nothing. Only the local gateway (at start) and the test
//! harness provision; the deployed stack's resources come from infra/template.yaml, and no Lambda
//! function builds a `Provisioner` (tests/infra.rs checks their sources).

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_s3::types::{
    PublicAccessBlockConfiguration, ServerSideEncryption, ServerSideEncryptionByDefault,
    ServerSideEncryptionConfiguration, ServerSideEncryptionRule,
};
use aws_sdk_sqs::types::QueueAttributeName;

use crate::StoreError;
use crate::resources::{
    AttrType, BUCKETS, KeySpec, QUEUES, QueueSpec, ResourceNames, TABLES, TableSpec, dlq_name,
};

/// Creates whatever of `names`' tables, buckets and queues is missing.
pub async fn provision(sdk: &SdkConfig, names: &ResourceNames) -> Result<(), StoreError> {
    Provisioner::new(sdk).provision(names).await
}

/// The clients provisioning needs: DynamoDB, and the S3 and SQS clients nothing else builds.
#[derive(Clone, Debug)]
pub struct Provisioner {
    pub dynamo: aws_sdk_dynamodb::Client,
    pub s3: aws_sdk_s3::Client,
    pub sqs: aws_sdk_sqs::Client,
}

impl Provisioner {
    pub fn new(sdk: &SdkConfig) -> Self {
        Self {
            dynamo: aws_sdk_dynamodb::Client::new(sdk),
            s3: s3_client(sdk),
            sqs: aws_sdk_sqs::Client::new(sdk),
        }
    }

    pub async fn provision(&self, names: &ResourceNames) -> Result<(), StoreError> {
        for spec in &TABLES {
            ensure_table(self, names.table(spec), spec).await?;
        }
        for spec in &BUCKETS {
            ensure_bucket(self, names.bucket(spec)).await?;
        }
        for spec in &QUEUES {
            provision_queue(self, names.queue(spec), spec).await?;
        }
        Ok(())
    }

    pub async fn queue_url(&self, name: &str) -> Result<String, StoreError> {
        self.sqs
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .map_err(|e| StoreError::unavailable(aws_sdk_sqs::error::DisplayErrorContext(e)))?
            .queue_url
            .ok_or_else(|| StoreError::unavailable("no queue url"))
    }
}

/// S3 needs path-style addressing against an emulator (`bucket.localhost` does not resolve).
fn s3_client(sdk: &SdkConfig) -> aws_sdk_s3::Client {
    let config =
        aws_sdk_s3::config::Builder::from(sdk).force_path_style(sdk.endpoint_url().is_some()).build();
    aws_sdk_s3::Client::from_conf(config)
}

async fn provision_queue(clients: &Provisioner, name: &str, spec: &QueueSpec) -> Result<(), StoreError> {
    let dlq_url = ensure_queue(clients, &dlq_name(name), &[]).await?;
    let dlq_arn = queue_arn(clients, &dlq_url).await?;
    let redrive =
        format!(r#"{{"deadLetterTargetArn":"{dlq_arn}","maxReceiveCount":"{}"}}"#, spec.max_receive_count);
    let visibility = spec.visibility_timeout_s.to_string();
    ensure_queue(
        clients,
        name,
        &[
            (QueueAttributeName::RedrivePolicy, redrive.as_str()),
            (QueueAttributeName::VisibilityTimeout, visibility.as_str()),
        ],
    )
    .await?;
    Ok(())
}

fn attr_type(t: AttrType) -> ScalarAttributeType {
    match t {
        AttrType::S => ScalarAttributeType::S,
        AttrType::N => ScalarAttributeType::N,
    }
}

fn key_schema(key: &KeySpec) -> Result<Vec<KeySchemaElement>, StoreError> {
    let hash = KeySchemaElement::builder()
        .attribute_name(key.partition.0)
        .key_type(KeyType::Hash)
        .build()
        .map_err(StoreError::unavailable)?;
    let range = KeySchemaElement::builder()
        .attribute_name(key.sort.0)
        .key_type(KeyType::Range)
        .build()
        .map_err(StoreError::unavailable)?;
    Ok(vec![hash, range])
}

async fn ensure_table(clients: &Provisioner, name: &str, spec: &TableSpec) -> Result<(), StoreError> {
    let exists = clients.dynamo.describe_table().table_name(name).send().await.is_ok();
    if !exists {
        let mut attributes: Vec<(&str, AttrType)> = vec![spec.key.partition, spec.key.sort];
        for index in spec.indexes {
            attributes.extend([index.key.partition, index.key.sort]);
        }
        let mut seen = Vec::new();
        attributes.retain(|(attr, _)| {
            let first = !seen.contains(attr);
            seen.push(*attr);
            first
        });
        let mut request = clients
            .dynamo
            .create_table()
            .table_name(name)
            .billing_mode(BillingMode::PayPerRequest)
            .set_key_schema(Some(key_schema(&spec.key)?));
        for (attr, kind) in attributes {
            request = request.attribute_definitions(
                AttributeDefinition::builder()
                    .attribute_name(attr)
                    .attribute_type(attr_type(kind))
                    .build()
                    .map_err(StoreError::unavailable)?,
            );
        }
        for index in spec.indexes {
            request = request.global_secondary_indexes(
                GlobalSecondaryIndex::builder()
                    .index_name(index.name)
                    .set_key_schema(Some(key_schema(&index.key)?))
                    .projection(Projection::builder().projection_type(ProjectionType::All).build())
                    .build()
                    .map_err(StoreError::unavailable)?,
            );
        }
        match request.send().await {
            Ok(_) => {}
            Err(err) if err.as_service_error().is_some_and(|e| e.is_resource_in_use_exception()) => {}
            Err(err) => {
                return Err(StoreError::unavailable(aws_sdk_dynamodb::error::DisplayErrorContext(err)));
            }
        }
    }
    let ttl = clients.dynamo.describe_time_to_live().table_name(name).send().await;
    let enabled = ttl
        .ok()
        .and_then(|out| out.time_to_live_description)
        .and_then(|d| d.attribute_name)
        .is_some_and(|attr| attr == spec.ttl_attribute);
    if !enabled {
        clients
            .dynamo
            .update_time_to_live()
            .table_name(name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .attribute_name(spec.ttl_attribute)
                    .enabled(true)
                    .build()
                    .map_err(StoreError::unavailable)?,
            )
            .send()
            .await
            .map_err(|e| StoreError::unavailable(aws_sdk_dynamodb::error::DisplayErrorContext(e)))?;
    }
    Ok(())
}

async fn ensure_bucket(clients: &Provisioner, name: &str) -> Result<(), StoreError> {
    if clients.s3.head_bucket().bucket(name).send().await.is_err() {
        match clients.s3.create_bucket().bucket(name).send().await {
            Ok(_) => {}
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_bucket_already_owned_by_you() || e.is_bucket_already_exists()) => {}
            Err(err) => {
                return Err(StoreError::unavailable(aws_sdk_s3::error::DisplayErrorContext(err)));
            }
        }
    }
    let block = PublicAccessBlockConfiguration::builder()
        .block_public_acls(true)
        .block_public_policy(true)
        .ignore_public_acls(true)
        .restrict_public_buckets(true)
        .build();
    clients
        .s3
        .put_public_access_block()
        .bucket(name)
        .public_access_block_configuration(block)
        .send()
        .await
        .map_err(|e| StoreError::unavailable(aws_sdk_s3::error::DisplayErrorContext(e)))?;
    let rule = ServerSideEncryptionRule::builder()
        .apply_server_side_encryption_by_default(
            ServerSideEncryptionByDefault::builder()
                .sse_algorithm(ServerSideEncryption::Aes256)
                .build()
                .map_err(StoreError::unavailable)?,
        )
        .build();
    clients
        .s3
        .put_bucket_encryption()
        .bucket(name)
        .server_side_encryption_configuration(
            ServerSideEncryptionConfiguration::builder()
                .rules(rule)
                .build()
                .map_err(StoreError::unavailable)?,
        )
        .send()
        .await
        .map_err(|e| StoreError::unavailable(aws_sdk_s3::error::DisplayErrorContext(e)))?;
    Ok(())
}

async fn ensure_queue(
    clients: &Provisioner,
    name: &str,
    attributes: &[(QueueAttributeName, &str)],
) -> Result<String, StoreError> {
    let mut request = clients.sqs.create_queue().queue_name(name);
    for (key, value) in attributes {
        request = request.attributes(key.clone(), *value);
    }
    match request.send().await {
        Ok(out) => out.queue_url.ok_or_else(|| StoreError::unavailable("no queue url")),
        // Exists with other attributes (an older definition): bring them up to date.
        Err(err) if err.as_service_error().is_some_and(|e| e.is_queue_name_exists()) => {
            let url = clients.queue_url(name).await?;
            let mut update = clients.sqs.set_queue_attributes().queue_url(&url);
            for (key, value) in attributes {
                update = update.attributes(key.clone(), *value);
            }
            update
                .send()
                .await
                .map_err(|e| StoreError::unavailable(aws_sdk_sqs::error::DisplayErrorContext(e)))?;
            Ok(url)
        }
        Err(err) => Err(StoreError::unavailable(aws_sdk_sqs::error::DisplayErrorContext(err))),
    }
}

async fn queue_arn(clients: &Provisioner, url: &str) -> Result<String, StoreError> {
    clients
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| StoreError::unavailable(aws_sdk_sqs::error::DisplayErrorContext(e)))?
        .attributes
        .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| StoreError::unavailable("no queue arn"))
}
