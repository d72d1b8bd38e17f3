//! What an operator of a deployment relies on, checked in the template: log groups with their
//! retention, JSON logs, the API's access log and throttling, an alarm for each thing that needs
//! a person (each listed in the README), reserved concurrency for the long-lived functions, the
//! sandbox nodes only when asked for, and IAM without `*` where a narrower grant exists.

use std::collections::BTreeSet;

use agentplane_api::Route;
use agentplane_api::routes::Serving;
use agentplane_store::resources::{QUEUES, TABLES};
use serde_yaml::Value;

use super::{functions, is_function_role, resources, root, served, str_of, template};

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).expect("README.md")
}

/// Every alarm of the template: `(logical id, alarm)`.
fn alarms(t: &Value) -> Vec<(String, &Value)> {
    resources(t)
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::CloudWatch::Alarm")
        .map(|(id, r)| (str_of(id), r))
        .collect()
}

/// The `(namespace, metric name, dimension values)` an alarm watches, directly or through metric
/// math.
fn watched(alarm: &Value) -> Vec<(String, String, Vec<String>)> {
    let p = &alarm["Properties"];
    let dims = |d: &Value| {
        d.as_sequence().map(|s| s.iter().map(|d| str_of(&d["Value"])).collect()).unwrap_or_default()
    };
    if let Some(metrics) = p["Metrics"].as_sequence() {
        metrics
            .iter()
            .filter(|m| m["MetricStat"].is_mapping())
            .map(|m| {
                let metric = &m["MetricStat"]["Metric"];
                (str_of(&metric["Namespace"]), str_of(&metric["MetricName"]), dims(&metric["Dimensions"]))
            })
            .collect()
    } else {
        vec![(str_of(&p["Namespace"]), str_of(&p["MetricName"]), dims(&p["Dimensions"]))]
    }
}

#[test]
fn every_function_logs_json_into_a_log_group_kept_log_retention_days() {
    let t = template();
    assert_eq!(t["Globals"]["Function"]["LoggingConfig"]["LogFormat"], "JSON");
    assert_eq!(t["Parameters"]["LogRetentionDays"]["Default"].as_u64(), Some(30));
    let groups: Vec<(String, &Value)> = resources(&t)
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::Logs::LogGroup")
        .map(|(id, r)| (str_of(id), r))
        .collect();
    assert!(groups.len() >= 2, "{groups:?}");
    for (id, group) in &groups {
        assert_eq!(str_of(&group["Properties"]["RetentionInDays"]), "!Ref LogRetentionDays", "{id}");
    }
    for (id, function) in functions(&t) {
        let group = str_of(&function["Properties"]["LoggingConfig"]["LogGroup"]);
        let group = group.strip_prefix("!Ref ").unwrap_or_else(|| panic!("{id}: LogGroup: !Ref <group>"));
        assert_eq!(resources(&t)[group]["Type"], "AWS::Logs::LogGroup", "{id}");
        // Its role may write there (and the role's Logs statement names only log groups).
        let role = super::role_of(&t, function);
        let logs = role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
            .as_sequence()
            .expect("Statement")
            .iter()
            .find(|s| s["Sid"] == "Logs")
            .unwrap_or_else(|| panic!("{id}: its role's Logs statement"));
        let arns: Vec<String> =
            logs["Resource"].as_sequence().expect("Resource").iter().map(str_of).collect();
        assert!(arns.contains(&format!("!GetAtt {group}.Arn")), "{id}: {arns:?}");
    }
    // The log line's fields and the EMF metrics are the functions crate's (unit-tested there).
    let lib = std::fs::read_to_string(root().join("functions/src/lib.rs")).expect("functions/src/lib.rs");
    assert!(
        lib.contains(".event_format(logs::FlatJson)") && lib.contains("metrics::Emf::new"),
        "init_tracing"
    );
    assert!(lib.contains("from_fn(in_request_span)"), "every route runs in the request span");
    let auth = std::fs::read_to_string(root().join("shared/api/src/client/auth.rs")).expect("auth.rs");
    assert!(auth.contains("Span::current().record(\"project\""), "authentication records the project");
}

#[test]
fn the_api_writes_a_json_access_log_and_throttles_its_stage() {
    let t = template();
    let api = &resources(&t)["Api"]["Properties"];
    let format = str_of(&api["AccessLogSetting"]["Format"]);
    let line: serde_json::Value =
        serde_json::from_str(&format).expect("the access log format is a JSON object");
    for field in ["requestId", "lambdaRequestId", "traceId", "status", "latencyMs", "path", "method"] {
        assert!(line.get(field).is_some(), "access log field {field}: {format}");
    }
    let destination = format!("{:?}", api["AccessLogSetting"]["DestinationArn"]);
    assert!(destination.contains("ApiAccessLogGroup.Arn"), "{destination}");
    let group = &resources(&t)["ApiAccessLogGroup"]["Properties"];
    assert_eq!(str_of(&group["RetentionInDays"]), "!Ref LogRetentionDays");
    let settings = &api["MethodSettings"][0];
    assert_eq!(str_of(&settings["ResourcePath"]), "/*");
    assert_eq!(str_of(&settings["HttpMethod"]), "*");
    assert_eq!(str_of(&settings["ThrottlingRateLimit"]), "!Ref ThrottlingRateLimit");
    assert_eq!(str_of(&settings["ThrottlingBurstLimit"]), "!Ref ThrottlingBurstLimit");
    for name in ["ThrottlingRateLimit", "ThrottlingBurstLimit"] {
        assert!(t["Parameters"][name]["Default"].as_u64().is_some_and(|d| d > 0), "{name}");
    }
}

#[test]
fn each_thing_that_needs_a_person_has_an_alarm_on_the_topic_and_a_readme_row() {
    let t = template();
    let alarms = alarms(&t);
    let readme = readme();
    for (id, alarm) in &alarms {
        let actions: Vec<String> = alarm["Properties"]["AlarmActions"]
            .as_sequence()
            .expect("AlarmActions")
            .iter()
            .map(str_of)
            .collect();
        assert_eq!(actions, ["!Ref AlarmTopic"], "{id} notifies the alarm topic");
        assert_eq!(str_of(&alarm["Properties"]["ComparisonOperator"]), "GreaterThanThreshold", "{id}");
        assert!(readme.contains(&format!("| `{id}` |")), "README's alarm table lists {id}");
        if let Some(metrics) = alarm["Properties"]["Metrics"].as_sequence() {
            assert!(metrics.len() <= 10, "{id}: an alarm holds at most 10 metrics");
        }
    }
    let watches = |namespace: &str, metric: &str, dimension: &str| {
        alarms.iter().any(|(_, a)| {
            watched(a)
                .iter()
                .any(|(n, m, d)| n == namespace && m == metric && d.iter().any(|v| v == dimension))
        })
    };
    for queue in &QUEUES {
        let dlq = format!("!GetAtt {}.QueueName", queue.dlq_logical_id);
        assert!(
            watches("AWS/SQS", "ApproximateNumberOfMessagesVisible", &dlq),
            "{} is alarmed",
            queue.dlq_logical_id
        );
    }
    for table in &TABLES {
        let name = format!("!Ref {}", table.logical_id);
        for metric in ["ReadThrottleEvents", "WriteThrottleEvents"] {
            assert!(watches("AWS/DynamoDB", metric, &name), "{} {metric}", table.logical_id);
        }
    }
    // Every function's errors and throttles (account-wide), and the streamed routes' and jobs'
    // by name.
    for metric in ["Errors", "Throttles"] {
        assert!(
            alarms.iter().any(|(_, a)| watched(a) == [("AWS/Lambda".to_owned(), metric.to_owned(), vec![])]),
            "account-wide {metric}"
        );
        for route in Route::ALL.iter().filter(|r| r.streaming()) {
            let id = format!("!Ref {}", super::function_id(&t, *route));
            assert!(watches("AWS/Lambda", metric, &id), "{route:?} {metric}");
        }
        for (id, f) in functions(&t) {
            if agentplane_api::jobs::Job::by_function_name(&served(f)).is_some() {
                assert!(watches("AWS/Lambda", metric, &format!("!Ref {id}")), "{id} {metric}");
            }
        }
    }
    // The functions' own metrics (embedded metric format), in the stack's namespace.
    let namespace = "!Sub Agentplane/${AWS::StackName}";
    let globals = &t["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(str_of(&globals["AGENTPLANE_METRICS_NAMESPACE"]), namespace);
    let custom: BTreeSet<String> = alarms
        .iter()
        .flat_map(|(_, a)| watched(a))
        .filter(|(n, _, _)| n == namespace)
        .map(|(_, m, _)| m)
        .collect();
    let expected: BTreeSet<String> =
        ["BackgroundRunsPastLease", "PlatformRunsResent", "RollbacksGivenUp", "WebhookEndpointsDisabled"]
            .into_iter()
            .map(str::to_owned)
            .collect();
    assert_eq!(custom, expected);
    // Each is emitted by name where it happens.
    let metrics = std::fs::read_to_string(root().join("functions/src/metrics.rs")).expect("metrics.rs");
    for name in &expected {
        assert!(metrics.contains(&format!("\"{name}\"")), "functions/src/metrics.rs names {name}");
    }
    let webhooks =
        std::fs::read_to_string(root().join("shared/engine/src/webhooks/mod.rs")).expect("webhooks");
    assert!(
        webhooks.contains(
            "target: \"agentplane::metric\",\n                    metric = \"WebhookEndpointsDisabled\""
        ),
        "disabling an endpoint emits its metric event"
    );
    let jobs = std::fs::read_to_string(root().join("functions/src/jobs.rs")).expect("jobs.rs");
    assert!(
        jobs.contains("metrics::emit(&stuck_work_metrics(&pass));"),
        "the retention pass emits its metrics"
    );
    // One topic, one optional email subscription, one dashboard (not in a local deploy).
    assert_eq!(resources(&t)["AlarmTopic"]["Type"], "AWS::SNS::Topic");
    assert_eq!(str_of(&resources(&t)["AlarmTopicEmail"]["Condition"]), "HasAlarmEmail");
    assert_eq!(t["Parameters"]["AlarmEmail"]["Default"], "");
    let dashboards: Vec<&Value> =
        resources(&t).values().filter(|r| r["Type"] == "AWS::CloudWatch::Dashboard").collect();
    assert_eq!(dashboards.len(), 1);
    let body = str_of(&dashboards[0]["Properties"]["DashboardBody"]);
    for (id, _) in &alarms {
        assert!(body.contains(&format!("${{{id}.Arn}}")), "the dashboard shows {id}");
    }
}

#[test]
fn long_lived_functions_hold_reserved_concurrency_that_a_parameter_turns_off() {
    let t = template();
    let p = &t["Parameters"];
    assert!(p["StreamReservedConcurrency"]["Default"].as_u64().is_some_and(|d| d > 0));
    assert!(p["TurnReservedConcurrency"]["Default"].as_u64().is_some_and(|d| d > 0));
    for (id, function) in functions(&t) {
        let reserved = &function["Properties"]["ReservedConcurrentExecutions"];
        let expected = match Route::by_function_name(&served(function)).map(|r| r.declaration().serving) {
            Some(Serving::Stream) => {
                Some("[HasStreamReservation, !Ref StreamReservedConcurrency, !Ref AWS::NoValue]")
            }
            Some(Serving::Turn) => {
                Some("[HasTurnReservation, !Ref TurnReservedConcurrency, !Ref AWS::NoValue]")
            }
            _ => None,
        };
        match expected {
            None => assert!(reserved.is_null(), "{id}: only the long-lived functions reserve concurrency"),
            Some(expected) => {
                let Value::Tagged(tagged) = reserved else { panic!("{id}: !If […]: {reserved:?}") };
                assert_eq!(tagged.tag, "!If", "{id}");
                let branches: Vec<String> =
                    tagged.value.as_sequence().expect("!If list").iter().map(str_of).collect();
                assert_eq!(format!("[{}]", branches.join(", ")), expected, "{id}");
            }
        }
    }
    // 0 reserves nothing (a reservation of 0 would stop the function). Compared as the string
    // "0", as CloudFormation compares parameter values (LocalStack compares a Number
    // parameter's "0" with a bare 0 as unequal, so the condition would hold).
    let conditions = &t["Conditions"];
    for (condition, parameter) in [
        ("HasStreamReservation", "StreamReservedConcurrency"),
        ("HasTurnReservation", "TurnReservedConcurrency"),
    ] {
        let text = format!("{:?}", conditions[condition]);
        assert!(
            text.contains("!Not") && text.contains(parameter) && text.contains("String(\"0\")"),
            "{text}"
        );
    }
}

/// Sandbox nodes are an optional stack of their own (infra/nodes.yaml): the main template holds
/// none of their resources (a team without sandboxes deploys none; LocalStack's free edition has
/// no Auto Scaling), only the enrollment key they use.
#[test]
fn sandbox_nodes_are_an_optional_stack_that_admits_nothing() {
    let main = template();
    assert!(
        !resources(&main).values().any(|r| {
            let kind = str_of(&r["Type"]);
            kind.starts_with("AWS::AutoScaling::") || kind.starts_with("AWS::EC2::")
        }),
        "no node resource in the main template"
    );
    // The enrollment key exists without nodes too (Core's enrollment reads it), and is an output.
    let secret = &resources(&main)["NodeEnrollmentSecret"];
    assert!(secret["Condition"].is_null() && secret["Properties"]["GenerateSecretString"].is_mapping());
    assert!(main["Outputs"]["NodeEnrollmentSecretArn"].is_mapping());
    assert!(main["Outputs"]["ApiUrl"].is_mapping());

    let text = std::fs::read_to_string(root().join("infra/nodes.yaml")).expect("infra/nodes.yaml");
    let t: Value = serde_yaml::from_str(&text).expect("nodes.yaml parses");
    let p = &t["Parameters"];
    for name in [
        "CoreUrl",
        "NodeEnrollmentSecretArn",
        "SandboxNodeCount",
        "NodeSubnetIds",
        "NodeVpcId",
        "NodeInstanceType",
        "NodeImageParameter",
        "NodeArtifactBucket",
        "NodeArtifactKey",
    ] {
        assert!(p[name].is_mapping(), "{name} is a parameter");
    }
    assert!(
        str_of(&p["NodeImageParameter"]["Default"])
            .starts_with("/aws/service/ami-amazon-linux-latest/al2023-ami-")
    );
    let ids: BTreeSet<String> = resources(&t).keys().map(str_of).collect();
    let expected: BTreeSet<String> = [
        "NodeAutoScalingGroup",
        "NodeInstanceProfile",
        "NodeLaunchTemplate",
        "NodeRole",
        "NodeSecurityGroup",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(ids, expected);
    let sg = &resources(&t)["NodeSecurityGroup"]["Properties"];
    assert!(sg["SecurityGroupIngress"].is_null(), "the node serves nothing: no inbound rule");
    assert!(!resources(&t).values().any(|r| r["Type"] == "AWS::EC2::SecurityGroupIngress"));
    let asg = &resources(&t)["NodeAutoScalingGroup"]["Properties"];
    for size in ["MinSize", "MaxSize", "DesiredCapacity"] {
        assert_eq!(str_of(&asg[size]), "!Ref SandboxNodeCount", "{size}");
    }
    assert_eq!(asg["HealthCheckType"], "EC2");
    let user_data =
        format!("{:?}", resources(&t)["NodeLaunchTemplate"]["Properties"]["LaunchTemplateData"]["UserData"]);
    for needed in [
        "dnf install -y bubblewrap util-linux e2fsprogs",
        "user.max_user_namespaces",
        "/sys/fs/cgroup/cgroup.controllers",
        "systemd.unified_cgroup_hierarchy=1",
        "s3://${NodeArtifactBucket}/${NodeArtifactKey}",
        "secretsmanager get-secret-value",
        "--secret-id '${NodeEnrollmentSecretArn}'",
        "export AGENTPLANE_NODE_ENROLLMENT_KEY",
        "Environment=AGENTPLANE_CORE_URL=${CoreUrl}",
        "Restart=always",
        "set-instance-health",
    ] {
        assert!(user_data.contains(needed), "user data: {needed}");
    }
    // The node's role: its secret, its artifact, its own health; nothing else.
    let statements = &resources(&t)["NodeRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"];
    let granted: Vec<(String, Vec<String>)> = statements
        .as_sequence()
        .expect("Statement")
        .iter()
        .map(|s| {
            let actions = s["Action"].as_sequence().expect("Action").iter().map(str_of).collect::<Vec<_>>();
            (actions.join(","), s["Resource"].as_sequence().expect("Resource").iter().map(str_of).collect())
        })
        .collect();
    assert_eq!(
        granted[0],
        ("secretsmanager:GetSecretValue".to_owned(), vec!["!Ref NodeEnrollmentSecretArn".to_owned()])
    );
    assert_eq!(
        granted[1],
        (
            "s3:GetObject".to_owned(),
            vec!["!Sub arn:${AWS::Partition}:s3:::${NodeArtifactBucket}/${NodeArtifactKey}".to_owned()]
        )
    );
    assert_eq!(granted[2].0, "autoscaling:SetInstanceHealth");
    assert_eq!(granted.len(), 3, "{granted:?}");
    // A local deploy makes no dashboard or account setting LocalStack cannot make.
    let script = std::fs::read_to_string(root().join("infra/deploy-local.sh")).expect("deploy-local.sh");
    for param in ["CloudWatchDashboard=false", "ConfigureApiGatewayAccount=false"] {
        assert!(script.contains(&format!("\"{param}\"")), "deploy-local.sh passes {param}");
    }
}

/// Actions AWS grants only on `Resource: "*"` (no resource-level permissions), the one place a
/// `*` resource is allowed.
const STAR_ONLY_ACTIONS: &[&str] = &[
    "cloudwatch:PutMetricData",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "ec2:DescribeInstances",
];

/// What is too broad in a template's IAM statements (inline role policies, managed policies of
/// the template, bucket and topic policies): a `*` action, a service-wide `svc:*` action, or a
/// `*` resource for an action that has a narrower one. Deny statements (a bucket's TLS-only
/// guard) narrow, so they are not checked.
fn too_broad(t: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let mut check = |at: String, statement: &Value| {
        if statement["Effect"] == "Deny" {
            return;
        }
        let list = |v: &Value| match v {
            Value::Sequence(s) => s.iter().map(str_of).collect::<Vec<_>>(),
            other => vec![str_of(other)],
        };
        let actions = list(&statement["Action"]);
        let resources = list(&statement["Resource"]);
        for action in &actions {
            if action == "*" || action.ends_with(":*") {
                found.push(format!("{at}: action {action}"));
            }
        }
        if resources.iter().any(|r| r == "*") {
            for action in actions.iter().filter(|a| !STAR_ONLY_ACTIONS.contains(&a.as_str())) {
                found.push(format!("{at}: {action} on Resource \"*\""));
            }
        }
    };
    for (id, r) in resources(t) {
        let id = str_of(id);
        let p = &r["Properties"];
        let mut documents: Vec<(String, &Value)> = Vec::new();
        if let Some(policies) = p["Policies"].as_sequence() {
            for (i, policy) in policies.iter().enumerate() {
                documents.push((format!("{id}.Policies[{i}]"), &policy["PolicyDocument"]));
            }
        }
        if p["PolicyDocument"].is_mapping() {
            documents.push((format!("{id}.PolicyDocument"), &p["PolicyDocument"]));
        }
        for (at, document) in documents {
            match &document["Statement"] {
                Value::Sequence(statements) => {
                    for (i, s) in statements.iter().enumerate() {
                        check(format!("{at}.Statement[{i}]"), s);
                    }
                }
                statement => check(format!("{at}.Statement"), statement),
            }
        }
    }
    found
}

#[test]
fn no_iam_statement_allows_every_action_or_every_resource_where_a_narrower_one_exists() {
    let t = template();
    let found = too_broad(&t);
    assert!(found.is_empty(), "too broad:\n{}", found.join("\n"));
    // The functions' roles take no managed policy (AWSLambdaBasicExecutionRole's logs grant is
    // on "*"); the only managed policies are AWS's for API Gateway's logging and the nodes' SSM
    // agent, each on a role of its own.
    for (id, r) in resources(&t).iter().filter(|(_, r)| r["Type"] == "AWS::IAM::Role") {
        let managed = r["Properties"]["ManagedPolicyArns"].as_sequence().cloned().unwrap_or_default();
        if is_function_role(r) {
            assert!(managed.is_empty(), "{id:?}");
        } else {
            let managed: Vec<String> = managed.iter().map(str_of).collect();
            let allowed = [
                "!Sub arn:${AWS::Partition}:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs",
                "!Sub arn:${AWS::Partition}:iam::aws:policy/AmazonSSMManagedInstanceCore",
            ];
            assert!(managed.iter().all(|m| allowed.contains(&m.as_str())), "{id:?}: {managed:?}");
        }
    }
}

/// The checker catches what it is for.
#[test]
fn the_least_privilege_check_finds_star_actions_and_resources() {
    let bad: Value = serde_yaml::from_str(
        r#"
Resources:
  Wide:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        - PolicyName: p
          PolicyDocument:
            Statement:
              - Effect: Allow
                Action: "*"
                Resource: !GetAtt Table.Arn
              - Effect: Allow
                Action: [dynamodb:*]
                Resource: [!GetAtt Table.Arn]
              - Effect: Allow
                Action: [s3:GetObject, cloudwatch:PutMetricData]
                Resource: "*"
              - Effect: Deny
                Action: "s3:*"
                Resource: "*"
  Fine:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        - PolicyName: p
          PolicyDocument:
            Statement:
              - Effect: Allow
                Action: [cloudwatch:PutMetricData]
                Resource: "*"
              - Effect: Allow
                Action: [sqs:SendMessage*]
                Resource: [!GetAtt Queue.Arn]
"#,
    )
    .expect("yaml");
    let found = too_broad(&bad);
    assert_eq!(
        found,
        [
            "Wide.Policies[0].Statement[0]: action *",
            "Wide.Policies[0].Statement[1]: action dynamodb:*",
            "Wide.Policies[0].Statement[2]: s3:GetObject on Resource \"*\"",
        ],
        "{found:?}"
    );
}
