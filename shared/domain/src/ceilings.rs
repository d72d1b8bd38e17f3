//! How long a turn may last: a synchronous call's ceiling (`AGENT_SYNC_TIMEOUT_MS`, the spec's
//! 600 s by default) and a background run's (`AGENT_BACKGROUND_MAX_DURATION_MS`, 30 min). A
//! deployment may raise either as well as lower it; an agent's Execution settings may only
//! lower them.
//!
//! A turn must never be killed by Lambda before its ceiling. A synchronous turn runs inside its
//! route's function, so its ceiling is at most that function's timeout (the template passes it
//! as `AGENTPLANE_FUNCTION_TIMEOUT_S`) less [`FUNCTION_MARGIN_MS`], the time the function keeps
//! to record the turn's end after answering. A background run spans as many invocations as it
//! needs (each hands the turn over before it ends), so its ceiling is bounded by
//! [`BACKGROUND_MAX_MS`] only; what must fit the `run-execution` function is one invocation's
//! budget (`AGENTPLANE_RUN_INVOCATION_BUDGET_MS`), under the same margin. A setting that does not
//! fit is clamped, and the deployment logs why ([`Resolved::warning`]).

/// The spec's synchronous call ceiling.
pub const SYNC_DEFAULT_MS: u64 = 600_000;
/// The spec's background run ceiling.
pub const BACKGROUND_DEFAULT_MS: u64 = 1_800_000;
/// The longest a Lambda function may run.
pub const LAMBDA_MAX_TIMEOUT_S: u64 = 900;
/// What a turn-running function keeps past a turn's ceiling: to record the turn's end (and,
/// for a background run's invocation, to hand it over).
pub const FUNCTION_MARGIN_MS: u64 = 60_000;
/// The most a synchronous ceiling may be: Lambda's longest timeout less the margin.
pub const SYNC_MAX_MS: u64 = LAMBDA_MAX_TIMEOUT_S * 1000 - FUNCTION_MARGIN_MS;
/// The most a background run's ceiling may be (a day: it holds a slot of its tenant as long).
pub const BACKGROUND_MAX_MS: u64 = 24 * 3_600_000;
/// The least a deployment ceiling may be.
pub const MIN_CEILING_MS: u64 = 1_000;

/// The deployment's ceilings, which bound an agent's Execution settings (and are their
/// defaults for a new agent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ceilings {
    pub sync_ms: u64,
    pub background_ms: u64,
}

impl Default for Ceilings {
    fn default() -> Self {
        Self { sync_ms: SYNC_DEFAULT_MS, background_ms: BACKGROUND_DEFAULT_MS }
    }
}

/// A setting as the deployment resolved it: the value in force, and why it is not the value
/// asked for (to be logged), if it is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub ms: u64,
    pub warning: Option<String>,
}

/// The longest a turn may take in a function that lives `timeout_s` (its timeout less the
/// margin); `None` outside Lambda (the local gateway, tests), where nothing kills a turn.
pub fn function_limit_ms(timeout_s: Option<u64>) -> Option<u64> {
    timeout_s.map(|s| s.saturating_mul(1000).saturating_sub(FUNCTION_MARGIN_MS))
}

/// The bounds a setting is read within.
struct Bounds {
    default_ms: u64,
    min_ms: u64,
    max_ms: u64,
    /// A function's limit, when the value must run within one invocation.
    limit_ms: Option<u64>,
}

/// Reads `setting` (ms; absent: the default) within `min_ms..=max_ms`, then fits it under the
/// function's limit.
fn resolve(name: &str, setting: Option<&str>, bounds: &Bounds) -> Resolved {
    let Bounds { default_ms, min_ms, max_ms, limit_ms } = *bounds;
    let mut warning = None;
    let asked = match setting.map(str::trim).filter(|s| !s.is_empty()) {
        None => default_ms,
        Some(text) => match text.parse::<u64>() {
            Ok(ms) if ms < min_ms => {
                warning = Some(format!("{name}={ms} is under {min_ms} ms; using {min_ms}"));
                min_ms
            }
            Ok(ms) if ms > max_ms => {
                warning =
                    Some(format!("{name}={ms} is over the most it may be, {max_ms} ms; using {max_ms}"));
                max_ms
            }
            Ok(ms) => ms,
            Err(_) => {
                warning =
                    Some(format!("{name}={text:?} is not a number of milliseconds; using {default_ms}"));
                default_ms
            }
        },
    };
    match limit_ms {
        Some(limit) if asked > limit => {
            let ms = limit.max(min_ms);
            Resolved {
                ms,
                warning: Some(format!(
                    "{name} asks for {asked} ms, but this function's timeout allows {limit} ms (its timeout less \
                     {} s to record the turn's end); using {ms}: raise the function's Timeout and \
                     AGENTPLANE_FUNCTION_TIMEOUT_S together to allow more",
                    FUNCTION_MARGIN_MS / 1000
                )),
            }
        }
        _ => Resolved { ms: asked, warning },
    }
}

/// `AGENT_SYNC_TIMEOUT_MS` in a function that lives `function_timeout_s`.
pub fn sync_ceiling(setting: Option<&str>, function_timeout_s: Option<u64>) -> Resolved {
    let bounds = Bounds {
        default_ms: SYNC_DEFAULT_MS,
        min_ms: MIN_CEILING_MS,
        max_ms: SYNC_MAX_MS,
        limit_ms: function_limit_ms(function_timeout_s),
    };
    resolve("AGENT_SYNC_TIMEOUT_MS", setting, &bounds)
}

/// `AGENT_BACKGROUND_MAX_DURATION_MS`: spans invocations, so no function bounds it.
pub fn background_ceiling(setting: Option<&str>) -> Resolved {
    let bounds = Bounds {
        default_ms: BACKGROUND_DEFAULT_MS,
        min_ms: MIN_CEILING_MS,
        max_ms: BACKGROUND_MAX_MS,
        limit_ms: None,
    };
    resolve("AGENT_BACKGROUND_MAX_DURATION_MS", setting, &bounds)
}

/// `AGENTPLANE_RUN_INVOCATION_BUDGET_MS` (how long one invocation runs a background turn before
/// handing it over, at least 100 ms) in a function that lives `function_timeout_s`.
pub fn invocation_budget(
    setting: Option<&str>,
    default_ms: u64,
    function_timeout_s: Option<u64>,
) -> Resolved {
    let bounds = Bounds {
        default_ms,
        min_ms: 100,
        max_ms: SYNC_MAX_MS,
        limit_ms: function_limit_ms(function_timeout_s),
    };
    resolve("AGENTPLANE_RUN_INVOCATION_BUDGET_MS", setting, &bounds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_ceilings_are_the_specs() {
        assert_eq!(sync_ceiling(None, None), Resolved { ms: 600_000, warning: None });
        assert_eq!(sync_ceiling(Some(" "), Some(660)), Resolved { ms: 600_000, warning: None });
        assert_eq!(background_ceiling(None), Resolved { ms: 1_800_000, warning: None });
    }

    #[test]
    fn a_deployment_may_raise_a_ceiling_as_well_as_lower_it() {
        assert_eq!(sync_ceiling(Some("5000"), Some(660)).ms, 5000);
        assert_eq!(sync_ceiling(Some("840000"), Some(900)), Resolved { ms: 840_000, warning: None });
        assert_eq!(sync_ceiling(Some("700000"), None).ms, 700_000);
        assert_eq!(background_ceiling(Some("7200000")), Resolved { ms: 7_200_000, warning: None });
        assert_eq!(background_ceiling(Some("60000")).ms, 60_000);
    }

    #[test]
    fn a_sync_ceiling_never_outlives_its_function() {
        // The template's turn functions live 660 s: 600 s is the most, whatever is asked.
        let r = sync_ceiling(Some("840000"), Some(660));
        assert_eq!(r.ms, 600_000);
        assert!(r.warning.as_deref().is_some_and(|w| w.contains("660") || w.contains("600000")), "{r:?}");
        // Exactly at the limit is fine.
        assert_eq!(sync_ceiling(Some("600000"), Some(660)), Resolved { ms: 600_000, warning: None });
        assert_eq!(sync_ceiling(Some("600001"), Some(660)).ms, 600_000);
        // Past Lambda's own maximum, whatever the function.
        assert_eq!(sync_ceiling(Some("900000"), None).ms, SYNC_MAX_MS);
        assert!(sync_ceiling(Some("900000"), None).warning.is_some());
        // For every timeout and every setting: the ceiling plus the margin fits the function.
        for timeout in [61_u64, 120, 300, 660, 900] {
            for asked in [1_000_u64, 59_000, 600_000, 840_000, 2_000_000] {
                let r = sync_ceiling(Some(&asked.to_string()), Some(timeout));
                assert!(r.ms + FUNCTION_MARGIN_MS <= timeout * 1000, "{timeout} s, {asked} ms: {r:?}");
                assert!(r.ms <= asked, "{timeout} s, {asked} ms: {r:?}");
            }
        }
    }

    #[test]
    fn nonsense_settings_fall_back_with_a_warning() {
        let r = sync_ceiling(Some("ten minutes"), None);
        assert_eq!(r.ms, SYNC_DEFAULT_MS);
        assert!(r.warning.is_some());
        assert_eq!(sync_ceiling(Some("10"), None).ms, MIN_CEILING_MS);
        assert_eq!(background_ceiling(Some("999999999999")).ms, BACKGROUND_MAX_MS);
        assert!(background_ceiling(Some("-1")).warning.is_some());
    }

    #[test]
    fn an_invocation_budget_fits_the_run_execution_function() {
        let default = 13 * 60_000;
        assert_eq!(invocation_budget(None, default, Some(900)), Resolved { ms: default, warning: None });
        let r = invocation_budget(Some("1200000"), default, Some(900));
        assert_eq!(r.ms, 840_000);
        assert!(r.warning.is_some());
        assert_eq!(invocation_budget(Some("600000"), default, Some(600)).ms, 540_000);
        // Tests hand over after a fraction of a second.
        assert_eq!(invocation_budget(Some("200"), default, None), Resolved { ms: 200, warning: None });
    }
}
