use std::net::IpAddr;

use super::signature::{SigningSecret, sign};
use super::*;

fn now() -> Timestamp {
    Timestamp::from_unix_seconds(1_700_000_000)
}

fn endpoint(url: &str) -> Endpoint {
    let secret = StoredSecret { sealed: "s0".into(), created_at: now(), expires_at: None };
    let fields = EndpointFields { url: Some(url.into()), ..Default::default() };
    new_endpoint(
        fields,
        EndpointId::from_random([1; 12]),
        Owner::Project(ProjectId::from_random([2; 16])),
        secret,
        now(),
    )
    .expect("valid")
}

#[test]
fn ids_are_prefixed_hex() {
    assert_eq!(EndpointId::from_random([0xab; 12]).as_str(), "ep_abababababababababababab");
    assert_eq!(MessageId::from_random([0x01; 12]).as_str(), "evt_010101010101010101010101");
    for bad in ["ep_", "ep_ABABABABABABABABABABABAB", "evt_abababababababababababab", ""] {
        assert!(bad.parse::<EndpointId>().is_err(), "{bad}");
    }
    assert!("evt_abababababababababababab".parse::<MessageId>().is_ok());
}

#[test]
fn the_reference_vector_signs_as_the_spec_says() {
    // From the Standard Webhooks reference libraries' tests (checked with the Python library).
    let secret = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("secret");
    let headers = sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, br#"{"test": 2432232314}"#, &[secret]);
    assert_eq!(headers.signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    assert_eq!(headers.timestamp, "1614265330");
    assert_eq!(headers.id, "msg_p5jXN8AQM9LWM0D4loKWxJek");
}

#[test]
fn several_secrets_give_space_separated_signatures() {
    let a = SigningSecret::from_random([1; 32]);
    let b = SigningSecret::from_random([2; 32]);
    let both = sign("evt_1", 5, b"{}", &[a.clone(), b.clone()]);
    assert_eq!(both.signature, format!("{} {}", a.sign("evt_1", 5, b"{}"), b.sign("evt_1", 5, b"{}")));
    assert_ne!(a.sign("evt_1", 5, b"{}"), a.sign("evt_1", 6, b"{}"));
    assert_ne!(a.sign("evt_1", 5, b"{}"), a.sign("evt_2", 5, b"{}"));
}

#[test]
fn secrets_are_whsec_and_base64_and_round_trip() {
    let secret = SigningSecret::from_random([7; 32]);
    let text = secret.expose();
    assert!(text.starts_with("whsec_"));
    assert_eq!(SigningSecret::parse(&text).expect("parses"), secret);
    for bad in ["", "whsec_", "whsec_!!!", "sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "whsec_AAAA"] {
        assert!(SigningSecret::parse(bad).is_err(), "{bad}");
    }
    assert_eq!(format!("{secret:?}"), "SigningSecret(…)");
}

#[test]
fn the_retry_schedule_is_the_documented_one() {
    let delays: Vec<Option<i64>> = (0..=9).map(schedule::delay_after).collect();
    assert_eq!(
        delays,
        vec![
            None,
            Some(5),
            Some(300),
            Some(1800),
            Some(7200),
            Some(18000),
            Some(36000),
            Some(86400),
            None,
            None
        ]
    );
    assert_eq!(schedule::MAX_ATTEMPTS, 8);
}

#[test]
fn urls_must_be_plain_http_or_https() {
    for good in ["https://example.com/hook", "http://example.com:8080/a?b=c", "https://[2001:db9::1]/x"] {
        assert!(check_url(good).is_ok(), "{good}");
    }
    let target = check_url("https://Example.COM/x").expect("valid");
    assert_eq!(target, Target { host: UrlHost::Name("example.com".into()), port: 443 });
    assert_eq!(
        check_url("http://10.0.0.1:81/").expect("valid").host,
        UrlHost::Address("10.0.0.1".parse().expect("ip"))
    );
    let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
    for bad in [
        "ftp://example.com/",
        "file:///etc/passwd",
        "example.com/hook",
        "https://user:pw@example.com/",
        "https://user@example.com/",
        "https://example.com/#frag",
        "https:///path",
        "https://exa mple.com/",
        "https://example.com:0/",
        "https://example.com:99999/",
        "http://2130706433/",
        "http://0x7f.1/",
        "https://[::1/",
        long.as_str(),
    ] {
        let err = check_url(bad).expect_err(bad);
        assert_eq!(err.param.as_deref(), Some("url"), "{bad}");
    }
}

#[test]
fn event_types_are_known_and_distinct() {
    assert!(check_event_types(&[]).is_ok());
    assert!(check_event_types(&["session.idled".into(), "agent_run.failed".into()]).is_ok());
    let err = check_event_types(&["session.idled".into(), "nope".into()]).expect_err("unknown");
    assert_eq!(err.param.as_deref(), Some("eventTypes[1]"));
    let err = check_event_types(&["budget.reached".into(), "budget.reached".into()]).expect_err("dup");
    assert_eq!(err.param.as_deref(), Some("eventTypes[1]"));
}

#[test]
fn an_empty_filter_receives_everything_and_a_disabled_endpoint_nothing() {
    let mut ep = endpoint("https://example.com/");
    assert!(ep.receives("session.idled"));
    ep.event_types = vec!["agent_run.failed".into()];
    assert!(!ep.receives("session.idled"));
    assert!(ep.receives("agent_run.failed"));
    assert!(ep.receives(TEST_EVENT_TYPE));
    ep.enabled = false;
    assert!(!ep.receives("agent_run.failed"));
}

#[test]
fn a_patch_is_checked_whole_before_it_changes_anything() {
    let mut ep = endpoint("https://example.com/");
    let before = ep.clone();
    let fields = EndpointFields {
        url: Some("https://other.example/".into()),
        event_types: Some(vec!["bogus".into()]),
        ..Default::default()
    };
    assert!(patch_endpoint(&mut ep, fields, now().plus_seconds(1)).is_err());
    assert_eq!(ep, before);
    let fields =
        EndpointFields { description: Some("d".repeat(MAX_DESCRIPTION_CHARS + 1)), ..Default::default() };
    assert_eq!(
        patch_endpoint(&mut ep, fields, now()).expect_err("long").param.as_deref(),
        Some("description")
    );
    let missing = new_endpoint(
        EndpointFields::default(),
        EndpointId::from_random([1; 12]),
        Owner::Project(ProjectId::from_random([2; 16])),
        StoredSecret { sealed: "s".into(), created_at: now(), expires_at: None },
        now(),
    );
    assert_eq!(missing.expect_err("no url").param.as_deref(), Some("url"));
}

#[test]
fn rotation_keeps_the_old_secret_signing_for_the_overlap_only() {
    let mut ep = endpoint("https://example.com/");
    ep.rotate("s1".into(), 24, now());
    let signing = |ep: &Endpoint, at: Timestamp| -> Vec<String> {
        ep.signing_secrets(at).iter().map(|s| s.sealed.clone()).collect()
    };
    assert_eq!(signing(&ep, now().plus_seconds(3600)), vec!["s1", "s0"]);
    assert_eq!(signing(&ep, now().plus_seconds(24 * 3600)), vec!["s1"]);
    // A second rotation drops what expired and never extends an earlier expiry.
    ep.rotate("s2".into(), 48, now().plus_seconds(3600));
    assert_eq!(signing(&ep, now().plus_seconds(7200)), vec!["s2", "s1", "s0"]);
    assert_eq!(signing(&ep, now().plus_seconds(25 * 3600)), vec!["s2", "s1"]);
    ep.rotate("s3".into(), 0, now().plus_seconds(30 * 3600));
    assert_eq!(signing(&ep, now().plus_seconds(30 * 3600)), vec!["s3"]);
    assert_eq!(ep.secrets.len(), 1, "expired secrets are dropped: {:?}", ep.secrets);
}

#[test]
fn answers_decide_the_message() {
    let attempt = |number, status_code| Attempt {
        message_id: MessageId::from_random([3; 12]),
        number,
        at: now(),
        status_code,
        duration_ms: 1,
        error: None,
        response_excerpt: None,
    };
    let mut message = Message {
        id: MessageId::from_random([3; 12]),
        owner: Owner::Project(crate::ProjectId::from_random([4; 16])),
        endpoint_id: EndpointId::from_random([1; 12]),
        event_type: "webhook.test".into(),
        payload: "{}".into(),
        url: None,
        status: MessageStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        created_at: now(),
    };
    assert_eq!(settle(&mut message, &attempt(1, Some(500))), Verdict::Retry);
    assert_eq!(
        (message.status, message.next_attempt_at),
        (MessageStatus::Pending, Some(now().plus_seconds(5)))
    );
    assert_eq!(settle(&mut message, &attempt(2, None)), Verdict::Retry);
    assert_eq!(message.next_attempt_at, Some(now().plus_seconds(300)));
    assert_eq!(settle(&mut message, &attempt(8, Some(503))), Verdict::Retry);
    assert_eq!((message.status, message.next_attempt_at), (MessageStatus::Failed, None));
    assert_eq!(settle(&mut message, &attempt(3, Some(204))), Verdict::Delivered);
    assert_eq!(message.status, MessageStatus::Succeeded);
    assert_eq!(settle(&mut message, &attempt(4, Some(410))), Verdict::Gone);
    assert_eq!(message.status, MessageStatus::Failed);
    assert_eq!(verdict(Some(301)), Verdict::Retry, "redirects are not followed, so not delivered");
}

#[test]
fn excerpts_are_bounded_at_a_character_boundary() {
    assert_eq!(excerpt(b"ok"), "ok");
    let long = "é".repeat(300);
    let cut = excerpt(long.as_bytes());
    assert!(cut.len() <= MAX_EXCERPT_BYTES && cut.chars().all(|c| c == 'é'));
    assert_eq!(cut.len(), MAX_EXCERPT_BYTES);
}

#[test]
fn private_and_special_addresses_are_forbidden() {
    for bad in [
        "127.0.0.1",
        "127.255.0.1",
        "0.0.0.0",
        "10.0.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "169.254.169.254",
        "169.254.0.1",
        "100.64.0.1",
        "100.127.255.255",
        "224.0.0.1",
        "255.255.255.255",
        "198.18.0.1",
        "::1",
        "::",
        "fc00::1",
        "fd00:ec2::254",
        "fe80::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "::127.0.0.1",
        "64:ff9b::a00:1",
        "2002:7f00:1::",
        "2001:db8::1",
        "fec0::1",
    ] {
        let ip: IpAddr = bad.parse().expect(bad);
        assert!(address::forbidden(ip).is_some(), "{bad} should be forbidden");
    }
    for good in ["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"]
    {
        let ip: IpAddr = good.parse().expect(good);
        assert_eq!(address::forbidden(ip), None, "{good} should be allowed");
    }
    assert_eq!(
        address::forbidden("169.254.169.254".parse().expect("ip")),
        Some("the cloud metadata service")
    );
}

#[test]
fn an_owner_is_stored_as_its_id_field_and_covers_its_projects() {
    let project = ProjectId::from_random([2; 16]);
    let other = ProjectId::from_random([3; 16]);
    let tenant = crate::tenant::TenantId::from_random([5; 16]);
    let endpoint = endpoint("https://h.example/");
    let json = serde_json::to_value(&endpoint).expect("json");
    assert_eq!(json["project_id"], project.to_string());
    assert!(json.get("tenant_id").is_none());
    let mut of_tenant = endpoint.clone();
    of_tenant.owner = Owner::Tenant(tenant);
    let json = serde_json::to_value(&of_tenant).expect("json");
    assert_eq!(json["tenant_id"], tenant.to_string());
    assert!(json.get("project_id").is_none());
    let back: Endpoint = serde_json::from_value(json).expect("back");
    assert_eq!(back.owner, Owner::Tenant(tenant));

    assert!(Owner::Project(project).covers(project, Some(tenant)));
    assert!(!Owner::Project(project).covers(other, Some(tenant)));
    assert!(Owner::Tenant(tenant).covers(other, Some(tenant)));
    assert!(!Owner::Tenant(tenant).covers(project, None));
}

#[test]
fn the_callback_signer_keeps_its_mark_through_storage_shapes() {
    #[derive(serde::Serialize, serde::Deserialize)]
    struct Wrapped {
        #[serde(rename = "PK")]
        pk: String,
        #[serde(flatten)]
        endpoint: Endpoint,
    }
    let signer = callback_signer(
        ProjectId::from_random([2; 16]),
        StoredSecret { sealed: "s".into(), created_at: now(), expires_at: None },
        now(),
    );
    let json = serde_json::to_value(Wrapped { pk: "p".into(), endpoint: signer.clone() }).expect("json");
    assert_eq!(json["callback"], true, "{json}");
    let back: Wrapped = serde_json::from_value(json).expect("back");
    assert!(back.endpoint.callback);
    assert_eq!(back.endpoint.id, callback_signer_id(&ProjectId::from_random([2; 16])));
}
