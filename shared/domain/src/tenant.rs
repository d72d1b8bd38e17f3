//! Tenants group projects. Limits the spec gives "per tenant" (concurrent background runs, spend
//! limits, webhook endpoints) count across a tenant's projects; a project without a tenant is its
//! own tenant (its id stands for the tenant's).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::project::Name;
use crate::{ProjectId, Timestamp};

pub use crate::ids::TenantId;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    pub id: TenantId,
    pub name: Name,
    /// The most the tenant's projects may spend on agents in a calendar month (UTC), in USD;
    /// `None`: no limit.
    #[serde(default)]
    pub monthly_spend_limit_usd: Option<f64>,
    pub created_at: Timestamp,
    /// Webhook endpoints across the tenant: its own and all its projects' (at most 50).
    #[serde(default)]
    pub endpoint_count: u32,
    /// Of those, the tenant's own (tenant-wide) endpoints: the projects' state changes emit
    /// events for them too.
    #[serde(default)]
    pub tenant_endpoint_count: u32,
}

/// Whose limits a project's work counts against: its tenant, or the project itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TenantKey {
    Tenant(TenantId),
    Project(ProjectId),
}

impl TenantKey {
    pub fn of(project: ProjectId, tenant: Option<TenantId>) -> Self {
        match tenant {
            Some(t) => Self::Tenant(t),
            None => Self::Project(project),
        }
    }

    /// A storage-safe name, distinct for tenants and lone projects.
    pub fn key(&self) -> String {
        match self {
            Self::Tenant(t) => format!("T-{t}"),
            Self::Project(p) => format!("P-{p}"),
        }
    }

    /// The tenant a [`TenantKey::key`] names; `None` for a lone project's key (or no key).
    pub fn tenant_of(key: &str) -> Option<TenantId> {
        key.strip_prefix("T-").and_then(|id| id.parse().ok())
    }
}

/// The calendar month (UTC) a time falls in, as `YYYY-MM`: the spend counter's period.
pub fn month_of(now: Timestamp) -> String {
    let nanos = i128::from(now.unix_millis()) * 1_000_000;
    match OffsetDateTime::from_unix_timestamp_nanos(nanos) {
        Ok(t) => format!("{:04}-{:02}", t.year(), u8::from(t.month())),
        Err(_) => "0000-00".to_owned(),
    }
}

/// A USD amount as whole nano-dollars (what the atomic spend counter adds, exactly).
pub fn nanos_of(usd: f64) -> i64 {
    if usd.is_finite() && usd > 0.0 { (usd * 1e9).round().min(i64::MAX as f64) as i64 } else { 0 }
}

pub fn usd_of(nanos: i64) -> f64 {
    nanos as f64 / 1e9
}

/// A spend limit and what was spent against it this month.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpendLimit {
    pub spent_usd: f64,
    pub max_cost_usd: f64,
}

impl SpendLimit {
    pub fn reached(&self) -> bool {
        self.spent_usd >= self.max_cost_usd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_tenants_key_names_a_tenant() {
        let id: TenantId = "0b8f7c3e-2a55-4a43-9d3b-5d2f4c1e8a11".parse().expect("an id");
        assert_eq!(TenantKey::tenant_of(&TenantKey::Tenant(id).key()), Some(id));
        let project = ProjectId::from_random([7; 16]);
        assert_eq!(TenantKey::tenant_of(&TenantKey::Project(project).key()), None);
        assert_eq!(TenantKey::tenant_of("T-not-an-id"), None);
    }

    #[test]
    fn months_are_utc_calendar_months() {
        // 2026-12-01T00:00:00Z and one millisecond before it.
        let december = Timestamp::from_unix_seconds(1_796_083_200);
        assert_eq!(month_of(december), "2026-12");
        assert_eq!(month_of(december.plus_millis(-1)), "2026-11");
    }

    #[test]
    fn nanos_are_exact_and_never_negative() {
        assert_eq!(nanos_of(0.000_000_001), 1);
        assert_eq!(nanos_of(1.5), 1_500_000_000);
        assert_eq!(nanos_of(-3.0), 0);
        assert_eq!(nanos_of(f64::NAN), 0);
        assert!((usd_of(nanos_of(12.345_678_9)) - 12.345_678_9).abs() < 1e-12);
    }

    #[test]
    fn lone_projects_and_tenants_have_distinct_keys() {
        let p = ProjectId::from_random([1; 16]);
        let t = TenantId::from_random([1; 16]);
        assert_ne!(TenantKey::of(p, None).key(), TenantKey::of(p, Some(t)).key());
        assert!(SpendLimit { spent_usd: 5.0, max_cost_usd: 5.0 }.reached());
        assert!(!SpendLimit { spent_usd: 4.9, max_cost_usd: 5.0 }.reached());
    }
}
