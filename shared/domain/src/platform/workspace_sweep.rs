//! The rules of the workspaces bucket's retention: which objects are candidates, when one may
//! be deleted, when a checkpoint may rely on an object it finds, and the states of the sweep's
//! cycle (kept in one cursor item).
//!
//! A cycle is a mark-and-sweep started at `started_at`:
//!
//! 1. **Mark.** Every manifest an environment or Run item names (`initial_checkpoint`,
//!    `rollback.manifest`, `start_manifest`, `checkpoint.snapshot_id`) is read and its blobs are
//!    marked, then the manifest itself (so a marked manifest always has every blob marked, even
//!    after a pass that stopped half-way). Those items are never deleted and their manifest
//!    fields never cleared, so a reference recorded before `started_at` is seen.
//! 2. **Sweep.** The bucket is listed, blobs then manifests; an object is deleted only when it is
//!    unmarked *and* last written more than [`GRACE_SECONDS`] before `started_at`
//!    ([`deletable`]).
//!
//! Why nothing a checkpoint relies on is deleted (a checkpoint records its manifest within
//! [`CHECKPOINT_WITHIN_SECONDS`] of its first look-up, which the checkpoint enforces):
//! - a blob it *uploads* at `u` is last written at `u`; deleting it needs
//!   `u < started_at - GRACE`, so its reference was recorded before `started_at` and is marked;
//! - a blob it finds present is relied on as is only when written within
//!   [`REUSE_WITHIN_SECONDS`] ([`reusable`]): found at `h`, written at `w >= h - REUSE`;
//!   deleting it needs `w < started_at - GRACE`, so `h < started_at - GRACE + REUSE` and the
//!   reference was recorded by `h + CHECKPOINT_WITHIN < started_at`: marked;
//! - an older one is *refreshed* first (rewritten in place, which makes it young); a sweep
//!   page that listed it before the refresh sends its deletes within [`DELETE_WITHIN_MS`] of
//!   its listing or not at all, so the checkpoint looks again [`REFRESH_SETTLE_SECONDS`] after
//!   refreshing and fails (never records a manifest with a hole) if it is gone;
//! - a page's deletes are claimed by a conditional write of the cursor first, so two sweeps
//!   never delete from the same listing.
//!
//! Scratch objects (`scratch/…`: a node's scan listing, an upload or restore plan) are neither
//! blobs nor manifests. Each lives minutes and its checkpoint deletes it after use; one a crash
//! left behind goes once it is a day old ([`scratch_expired`]). Transcripts are never touched.

use serde::{Deserialize, Serialize};

use crate::Timestamp;

/// How long an unreferenced object is kept after it was last written.
pub const GRACE_SECONDS: i64 = 3_600;
/// The longest a checkpoint may take from its first look-up in the bucket to its manifest
/// being recorded (two node commands of 600 s, presigned URLs of 15 minutes, and margin).
pub const CHECKPOINT_WITHIN_SECONDS: i64 = 1_800;
/// Margin for clock skew between the bucket and the functions.
pub const SKEW_SECONDS: i64 = 60;
/// How recently written an object a checkpoint finds must be to be relied on without refresh.
pub const REUSE_WITHIN_SECONDS: i64 = GRACE_SECONDS - CHECKPOINT_WITHIN_SECONDS - SKEW_SECONDS;
/// A sweep page sends its deletes within this long of its listing, or leaves them.
pub const DELETE_WITHIN_MS: i64 = 10_000;
/// How long after refreshing an object a checkpoint looks again that it is still there (three
/// times [`DELETE_WITHIN_MS`]: a delete request sent in time may still be on its way).
pub const REFRESH_SETTLE_SECONDS: i64 = 30;
/// A new cycle starts at least this long after the previous one started, so each pass is a
/// second look at least a grace period after the first.
pub const CYCLE_EVERY_SECONDS: i64 = GRACE_SECONDS;
/// How long a cycle's marks are kept (the item TTL).
pub const MARK_TTL_SECONDS: i64 = 7 * 86_400;
/// An unfinished cycle this old is given up for a new one, long before its marks may expire
/// (a sweep trusting expired marks would delete what they kept).
pub const CYCLE_ABANDONED_SECONDS: i64 = MARK_TTL_SECONDS / 2;

// The inequalities the safety argument rests on, checked when the crate builds.
const _: () = assert!(REUSE_WITHIN_SECONDS > 0);
const _: () = assert!(GRACE_SECONDS >= REUSE_WITHIN_SECONDS + CHECKPOINT_WITHIN_SECONDS + SKEW_SECONDS);
const _: () = assert!(REFRESH_SETTLE_SECONDS * 1000 >= 3 * DELETE_WITHIN_MS);
const _: () = assert!(CYCLE_ABANDONED_SECONDS < MARK_TTL_SECONDS);

pub const BLOB_PREFIX: &str = "blobs/sha256/";
pub const SCRATCH_PREFIX: &str = "scratch/";
/// How old a scratch object is when the sweep deletes it: far past the longest use of one (a
/// presigned URL's 15 minutes, a node command's 10).
pub const SCRATCH_RETENTION_SECONDS: i64 = 86_400;

/// Whether a scratch object written at `written` is left over at `now`.
pub fn scratch_expired(written: Timestamp, now: Timestamp) -> bool {
    written.plus_seconds(SCRATCH_RETENTION_SECONDS) <= now
}
pub const MANIFEST_PREFIX: &str = "manifests/";

/// What a sweep phase lists and deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Swept {
    Blobs,
    Manifests,
}

impl Swept {
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Blobs => BLOB_PREFIX,
            Self::Manifests => MANIFEST_PREFIX,
        }
    }

    /// The digest (blob) or id (manifest) an object key of this kind names; `None` for a key
    /// that is not exactly one of ours (never deleted).
    pub fn digest_of(self, key: &str) -> Option<&str> {
        let rest = key.strip_prefix(self.prefix())?;
        let digest = match self {
            Self::Blobs => rest,
            Self::Manifests => rest.strip_suffix(".json")?,
        };
        is_digest(digest).then_some(digest)
    }
}

/// 64 lowercase hexadecimal digits (a SHA-256 as keys and references spell it).
pub fn is_digest(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The manifest ids among the values an item holds in its reference fields; anything that is
/// not a digest is left out (it names no object of the bucket).
pub fn referenced<'a>(values: impl IntoIterator<Item = &'a str>) -> std::collections::BTreeSet<String> {
    values.into_iter().filter(|v| is_digest(v)).map(str::to_owned).collect()
}

/// Whether an object last written at `written` may be relied on by a checkpoint at `now`
/// without refreshing it.
pub fn reusable(written: Timestamp, now: Timestamp) -> bool {
    written >= now.plus_seconds(-REUSE_WITHIN_SECONDS)
}

/// Whether the sweep of the cycle started at `started_at` deletes an object last written at
/// `written` (`marked`: referenced in that cycle).
pub fn deletable(written: Timestamp, marked: bool, started_at: Timestamp) -> bool {
    !marked && written < started_at.plus_seconds(-GRACE_SECONDS)
}

/// Where a scan of the main table stopped (its last evaluated key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanPosition {
    pub pk: String,
    pub sk: String,
}

/// Where a cycle is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Marking what the items reference, the scan after `after`.
    Mark {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<ScanPosition>,
    },
    /// Listing `kind` after the key `after` (S3's `StartAfter`: a key, valid however long the
    /// cycle waits, unlike a continuation token).
    Sweep {
        kind: Swept,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        after: Option<String>,
    },
    Done {
        finished_at: Timestamp,
    },
}

/// The sweep's cursor: one cycle and where it is. `version` is what the next conditional write
/// expects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cycle {
    pub number: u64,
    pub started_at: Timestamp,
    #[serde(flatten)]
    pub phase: Phase,
    #[serde(default)]
    pub version: u64,
}

impl Cycle {
    /// The cycle a pass at `now` works on: the stored one while unfinished, a new one once the
    /// stored one is done and [`CYCLE_EVERY_SECONDS`] passed since it started; `None`: nothing
    /// to do yet. An unfinished cycle older than [`CYCLE_ABANDONED_SECONDS`] is replaced.
    pub fn to_work_on(stored: Option<&Cycle>, now: Timestamp) -> Option<Cycle> {
        match stored {
            None => Some(Self::first(1, now, 0)),
            Some(c) if now >= c.started_at.plus_seconds(CYCLE_ABANDONED_SECONDS) => {
                Some(Self::first(c.number + 1, now, c.version))
            }
            Some(c) if !matches!(c.phase, Phase::Done { .. }) => Some(c.clone()),
            Some(c) if now >= c.started_at.plus_seconds(CYCLE_EVERY_SECONDS) => {
                Some(Self::first(c.number + 1, now, c.version))
            }
            Some(_) => None,
        }
    }

    fn first(number: u64, now: Timestamp, version: u64) -> Self {
        Self { number, started_at: now, phase: Phase::Mark { after: None }, version }
    }

    /// The cycle after a page of its phase, which ended at `next` (`None`: the phase is
    /// through), at `now`.
    pub fn advanced(&self, next: Next, now: Timestamp) -> Cycle {
        let phase = match (&self.phase, next) {
            (Phase::Mark { .. }, Next::Scan(Some(after))) => Phase::Mark { after: Some(after) },
            (Phase::Mark { .. }, _) => Phase::Sweep { kind: Swept::Blobs, after: None },
            (Phase::Sweep { kind, .. }, Next::Key(Some(after))) => {
                Phase::Sweep { kind: *kind, after: Some(after) }
            }
            (Phase::Sweep { kind: Swept::Blobs, .. }, _) => {
                Phase::Sweep { kind: Swept::Manifests, after: None }
            }
            (Phase::Sweep { kind: Swept::Manifests, .. }, _) | (Phase::Done { .. }, _) => {
                Phase::Done { finished_at: now }
            }
        };
        Cycle { number: self.number, started_at: self.started_at, phase, version: self.version + 1 }
    }
}

/// Where a page stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Scan(Option<ScanPosition>),
    Key(Option<String>),
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timestamp = Timestamp::from_unix_seconds(1_800_000_000);

    fn digest(c: char) -> String {
        c.to_string().repeat(64)
    }

    #[test]
    fn only_keys_that_are_exactly_ours_are_candidates() {
        let d = digest('a');
        assert_eq!(Swept::Blobs.digest_of(&format!("blobs/sha256/{d}")), Some(d.as_str()));
        assert_eq!(Swept::Manifests.digest_of(&format!("manifests/{d}.json")), Some(d.as_str()));
        for key in [
            format!("manifests/{d}"),
            format!("blobs/sha256/{d}.json"),
            format!("blobs/sha256/{}", "A".repeat(64)),
            "blobs/sha256/abc".to_owned(),
            format!("scratch/{d}/scan.json"),
            format!("transcripts/{d}"),
            format!("blobs/sha256/{d}/x"),
        ] {
            assert_eq!(Swept::Blobs.digest_of(&key), None, "{key}");
            assert_eq!(Swept::Manifests.digest_of(&key), None, "{key}");
        }
        assert_eq!(
            referenced([d.as_str(), "m1", "", d.as_str()]).into_iter().collect::<Vec<_>>(),
            std::slice::from_ref(&d)
        );
    }

    #[test]
    fn an_object_is_deletable_only_unmarked_and_older_than_the_grace_before_the_cycle() {
        let old = T.plus_seconds(-GRACE_SECONDS - 1);
        assert!(deletable(old, false, T));
        assert!(!deletable(old, true, T), "referenced");
        assert!(!deletable(T.plus_seconds(-GRACE_SECONDS), false, T), "exactly the grace");
        assert!(!deletable(T.plus_seconds(-60), false, T), "a checkpoint in flight");
        assert!(!deletable(T.plus_seconds(60), false, T), "written after the cycle started");
    }

    #[test]
    fn what_a_checkpoint_reuses_as_is_cannot_be_deleted_before_its_reference_is_seen() {
        // Found at `h`, written at the oldest reusable time; the reference recorded by
        // `h + CHECKPOINT_WITHIN`. Any cycle that may delete the object started after that.
        for h in [T, T.plus_seconds(12_345)] {
            let written = h.plus_seconds(-REUSE_WITHIN_SECONDS);
            assert!(reusable(written, h));
            assert!(!reusable(written.plus_millis(-1), h));
            let recorded = h.plus_seconds(CHECKPOINT_WITHIN_SECONDS);
            // The earliest cycle start at which it is deletable unmarked.
            let start = written.plus_seconds(GRACE_SECONDS).plus_millis(1);
            assert!(deletable(written, false, start));
            assert!(!deletable(written, false, start.plus_millis(-1)));
            assert!(recorded.plus_seconds(SKEW_SECONDS) < start, "seen by that cycle's mark");
        }
    }

    #[test]
    fn a_cycle_marks_then_sweeps_blobs_then_manifests_then_waits_for_the_next() {
        let c = Cycle::to_work_on(None, T).unwrap_or_else(|| panic!("a first cycle"));
        assert_eq!((c.number, c.started_at, &c.phase, c.version), (1, T, &Phase::Mark { after: None }, 0));
        let at = ScanPosition { pk: "PROJECT#p".into(), sk: "RUN#r".into() };
        let c = c.advanced(Next::Scan(Some(at.clone())), T);
        assert_eq!((&c.phase, c.version), (&Phase::Mark { after: Some(at) }, 1));
        // A stored unfinished cycle is worked on as it is, until it is so old that its marks
        // could expire: then a new cycle starts over.
        assert_eq!(Cycle::to_work_on(Some(&c), T.plus_seconds(99_999)), Some(c.clone()));
        let abandoned = Cycle::to_work_on(Some(&c), T.plus_seconds(CYCLE_ABANDONED_SECONDS));
        assert_eq!(
            abandoned.map(|a| (a.number, a.phase, a.version)),
            Some((2, Phase::Mark { after: None }, 1))
        );
        let c = c.advanced(Next::Scan(None), T);
        assert_eq!(c.phase, Phase::Sweep { kind: Swept::Blobs, after: None });
        let c = c.advanced(Next::Key(Some("blobs/sha256/x".into())), T);
        assert_eq!(c.phase, Phase::Sweep { kind: Swept::Blobs, after: Some("blobs/sha256/x".into()) });
        let c = c.advanced(Next::Key(None), T);
        assert_eq!(c.phase, Phase::Sweep { kind: Swept::Manifests, after: None });
        let done = c.advanced(Next::Key(None), T.plus_seconds(5));
        assert_eq!((&done.phase, done.version), (&Phase::Done { finished_at: T.plus_seconds(5) }, 5));
        // The next cycle waits a cycle interval after this one started, keeping the version.
        assert_eq!(Cycle::to_work_on(Some(&done), T.plus_seconds(CYCLE_EVERY_SECONDS - 1)), None);
        let next = Cycle::to_work_on(Some(&done), T.plus_seconds(CYCLE_EVERY_SECONDS));
        assert_eq!(
            next,
            Some(Cycle {
                number: 2,
                started_at: T.plus_seconds(CYCLE_EVERY_SECONDS),
                phase: Phase::Mark { after: None },
                version: 5
            })
        );
    }

    #[test]
    fn the_cursor_round_trips_through_its_stored_form() {
        let c = Cycle {
            number: 3,
            started_at: T,
            phase: Phase::Sweep { kind: Swept::Manifests, after: Some("manifests/a.json".into()) },
            version: 9,
        };
        let json = serde_json::to_value(&c).unwrap_or_default();
        assert_eq!(json["phase"], "sweep");
        assert_eq!(json["kind"], "manifests");
        assert_eq!(serde_json::from_value::<Cycle>(json).ok(), Some(c));
    }

    #[test]
    fn a_scratch_object_is_left_over_only_a_day_after_it_was_written() {
        let written = Timestamp::from_unix_seconds(1_000_000);
        assert!(!scratch_expired(written, written.plus_seconds(SCRATCH_RETENTION_SECONDS - 1)));
        assert!(scratch_expired(written, written.plus_seconds(SCRATCH_RETENTION_SECONDS)));
    }
}
