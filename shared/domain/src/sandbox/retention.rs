//! Output retention: at most 1 MiB / 1024 chunks per process and 4 MiB / 4096 chunks per
//! sandbox, across at most 256 observations. The oldest chunks go first and every process that
//! lost output is flagged, so truncation is always explicit.

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::ProcessId;
use super::command::Stream;
use crate::Timestamp;

pub const PROCESS_MAX_BYTES: u64 = 1024 * 1024;
pub const PROCESS_MAX_CHUNKS: usize = 1024;
pub const SANDBOX_MAX_BYTES: u64 = 4 * 1024 * 1024;
pub const SANDBOX_MAX_CHUNKS: usize = 4096;
pub const MAX_OBSERVATIONS: usize = 256;
/// The largest chunk a node may report (it splits longer reads).
pub const MAX_CHUNK_BYTES: usize = 32 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkMeta {
    pub seq: u64,
    pub process: ProcessId,
    pub bytes: u32,
}

/// What admitting something pushed out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Eviction {
    pub chunks: Vec<ChunkMeta>,
    /// Observations dropped whole (their records and chunks go).
    pub observations: Vec<ProcessId>,
    /// Retained processes that lost output.
    pub truncated: BTreeSet<ProcessId>,
}

impl Eviction {
    pub fn merge(&mut self, other: Eviction) {
        self.chunks.extend(other.chunks);
        self.observations.extend(other.observations);
        self.truncated.extend(other.truncated);
    }
}

/// The retained window of one sandbox, oldest first. Stored beside the sandbox and changed only
/// by these rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionIndex {
    pub next_seq: u64,
    pub chunks: VecDeque<ChunkMeta>,
    pub observations: VecDeque<ProcessId>,
}

impl RetentionIndex {
    pub fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| u64::from(c.bytes)).sum()
    }

    pub fn process_usage(&self, process: ProcessId) -> (u64, usize) {
        self.chunks
            .iter()
            .filter(|c| c.process == process)
            .fold((0, 0), |(b, n), c| (b + u64::from(c.bytes), n + 1))
    }

    /// Adds an observation. Beyond 256, the oldest that `is_finished` goes first (the oldest
    /// of all when every one is still running), with its chunks.
    pub fn admit_observation(
        &mut self,
        process: ProcessId,
        is_finished: impl Fn(ProcessId) -> bool,
    ) -> Eviction {
        let mut eviction = Eviction::default();
        if self.observations.contains(&process) {
            return eviction;
        }
        self.observations.push_back(process);
        while self.observations.len() > MAX_OBSERVATIONS {
            let victim_at =
                self.observations.iter().position(|p| *p != process && is_finished(*p)).unwrap_or(0);
            let Some(victim) = self.observations.remove(victim_at) else { break };
            let (gone, kept): (Vec<ChunkMeta>, Vec<ChunkMeta>) =
                self.chunks.drain(..).partition(|c| c.process == victim);
            self.chunks = kept.into();
            eviction.chunks.extend(gone);
            eviction.observations.push(victim);
        }
        eviction
    }

    /// Adds a chunk of `bytes` for `process` and returns its sequence number and what it
    /// pushed out.
    pub fn admit_chunk(&mut self, process: ProcessId, bytes: u32) -> (u64, Eviction) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.chunks.push_back(ChunkMeta { seq, process, bytes });
        let mut eviction = Eviction::default();
        // Per process first: drop this process's oldest chunks.
        loop {
            let (b, n) = self.process_usage(process);
            if b <= PROCESS_MAX_BYTES && n <= PROCESS_MAX_CHUNKS {
                break;
            }
            let Some(at) = self.chunks.iter().position(|c| c.process == process) else { break };
            if let Some(gone) = self.chunks.remove(at) {
                eviction.truncated.insert(gone.process);
                eviction.chunks.push(gone);
            }
        }
        // Then per sandbox: drop the oldest chunks of anyone.
        while self.bytes() > SANDBOX_MAX_BYTES || self.chunks.len() > SANDBOX_MAX_CHUNKS {
            let Some(gone) = self.chunks.pop_front() else { break };
            eviction.truncated.insert(gone.process);
            eviction.chunks.push(gone);
        }
        (seq, eviction)
    }
}

impl RetentionIndex {
    /// Forgets every retained chunk of `process` (its id now names another process, such as a
    /// PID reused after a gap) and returns them, for deletion.
    pub fn forget_output(&mut self, process: ProcessId) -> Vec<ChunkMeta> {
        let (gone, kept): (Vec<ChunkMeta>, Vec<ChunkMeta>) =
            self.chunks.drain(..).partition(|c| c.process == process);
        self.chunks = kept.into();
        gone
    }

    /// Whether a read of `process`'s output after `after` missed chunks this index still lists:
    /// every listed chunk up to the last one `returned` (all of them when the read reached the
    /// end) must be there. A listed chunk the table no longer holds outlived its retention.
    pub fn output_lost(
        &self,
        process: ProcessId,
        after: Option<u64>,
        returned: &[u64],
        reached_end: bool,
    ) -> bool {
        let upto = if reached_end { Some(u64::MAX) } else { returned.iter().max().copied() };
        let Some(upto) = upto else { return false };
        self.chunks
            .iter()
            .filter(|c| c.process == process && after.is_none_or(|a| c.seq > a) && c.seq <= upto)
            .any(|c| !returned.contains(&c.seq))
    }
}

/// Bytes that a base64 text decodes to.
pub fn base64_decoded_len(text: &str) -> usize {
    let padding = text.bytes().rev().take_while(|b| *b == b'=').count().min(2);
    (text.len() / 4 * 3).saturating_sub(padding)
}

/// Before a node sends a batch of events, the oldest output of a process beyond what one
/// process may retain (1 MiB / 1024 chunks) is certain to be dropped by Core: the node drops it
/// first and says so with one `OutputDropped` per process, placed where the last dropped chunk
/// was. Everything else keeps its order.
pub fn trim_batch(events: Vec<super::command::NodeEvent>) -> Vec<super::command::NodeEvent> {
    use std::collections::BTreeMap;

    use super::command::NodeEvent;

    let mut kept_bytes: BTreeMap<(String, ProcessId), (u64, usize)> = BTreeMap::new();
    let mut drop = vec![false; events.len()];
    // Newest first: the newest output of each process is what stays.
    for (i, event) in events.iter().enumerate().rev() {
        if let NodeEvent::Output { sandbox_id, process, data, .. } = event {
            let bytes = base64_decoded_len(data) as u64;
            let used = kept_bytes.entry((sandbox_id.to_string(), *process)).or_default();
            if used.0 + bytes > PROCESS_MAX_BYTES || used.1 + 1 > PROCESS_MAX_CHUNKS {
                drop[i] = true;
            } else {
                used.0 += bytes;
                used.1 += 1;
            }
        }
    }
    let mut dropped: BTreeMap<(String, ProcessId), (u64, u64, usize)> = BTreeMap::new();
    for (i, event) in events.iter().enumerate() {
        if let (true, NodeEvent::Output { sandbox_id, process, data, .. }) = (drop[i], event) {
            let entry = dropped.entry((sandbox_id.to_string(), *process)).or_default();
            entry.0 += base64_decoded_len(data) as u64;
            entry.1 += 1;
            entry.2 = i;
        }
    }
    let mut out = Vec::with_capacity(events.len());
    for (i, event) in events.into_iter().enumerate() {
        if !drop[i] {
            out.push(event);
            continue;
        }
        if let NodeEvent::Output { sandbox_id, process, .. } = event
            && let Some(&(bytes, chunks, last)) = dropped.get(&(sandbox_id.to_string(), process))
            && last == i
        {
            out.push(NodeEvent::OutputDropped { sandbox_id, process, bytes, chunks });
        }
    }
    out
}

/// The retention index of a sandbox plus which report events it already includes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RetentionState {
    pub index: RetentionIndex,
    pub applied_connection: Option<String>,
    pub applied_seq: u64,
}

/// One retained chunk of a process's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredChunk {
    pub seq: u64,
    pub process: ProcessId,
    pub stream: Stream,
    pub at: Timestamp,
    /// Base64, as it travels.
    pub data: String,
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn output_the_table_no_longer_holds_is_lost_output() {
        let mut index = RetentionIndex::default();
        let a = ProcessId::Observed(1);
        let b = ProcessId::Observed(2);
        for p in [a, b, a, a] {
            index.admit_chunk(p, 10);
        }
        // a holds 0, 2, 3; b holds 1.
        assert!(!index.output_lost(a, None, &[0, 2, 3], true));
        assert!(index.output_lost(a, None, &[2, 3], true), "chunk 0 outlived its retention");
        assert!(index.output_lost(a, None, &[0, 2], true), "the newest went too");
        assert!(!index.output_lost(a, None, &[0, 2], false), "a page that stops early misses nothing");
        assert!(!index.output_lost(a, Some(0), &[2, 3], true), "what the cursor passed is not asked for");
        assert!(!index.output_lost(a, None, &[], false));
        assert!(index.output_lost(b, None, &[], true));
        assert_eq!(index.forget_output(a).iter().map(|c| c.seq).collect::<Vec<_>>(), vec![0, 2, 3]);
        assert_eq!(index.chunks.len(), 1);
        assert!(!index.output_lost(a, None, &[], true), "a forgotten process has nothing to lose");
    }

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_decoded_len(""), 0);
        assert_eq!(base64_decoded_len("aGk="), 2);
        assert_eq!(base64_decoded_len("aGkh"), 3);
        assert_eq!(base64_decoded_len("aA=="), 1);
    }

    #[test]
    fn a_batch_keeps_the_newest_mib_per_process_and_says_what_it_dropped() {
        use crate::Timestamp;
        use crate::sandbox::SandboxId;
        use crate::sandbox::command::{NodeEvent, Stream};
        let sandbox = SandboxId::from_random([1; 16]);
        // 32 KiB of data per chunk: "AAAA" decodes to 3 bytes.
        let chunk = "A".repeat(32 * 1024 / 3 * 4);
        let output = |p: ProcessId| NodeEvent::Output {
            sandbox_id: sandbox.clone(),
            process: p,
            stream: Stream::Stdout,
            at: Timestamp::from_unix_millis(0),
            data: chunk.clone(),
        };
        let mut events: Vec<NodeEvent> = (0..40).map(|_| output(P1)).collect();
        events.push(output(P2));
        let trimmed = trim_batch(events);
        let kept = trimmed
            .iter()
            .filter(|e| matches!(e, NodeEvent::Output { process, .. } if *process == P1))
            .count();
        assert!((30..=32).contains(&kept), "{kept}");
        let drops: Vec<_> = trimmed.iter().filter(|e| matches!(e, NodeEvent::OutputDropped { .. })).collect();
        assert_eq!(drops.len(), 1);
        assert!(
            matches!(drops[0], NodeEvent::OutputDropped { process, chunks, .. } if *process == P1 && *chunks == 40 - kept as u64)
        );
        // The drop marker comes before the kept (newer) output, and P2 is untouched.
        assert!(matches!(trimmed[0], NodeEvent::OutputDropped { .. }));
        assert!(matches!(trimmed.last(), Some(NodeEvent::Output { process, .. }) if *process == P2));
    }

    const P1: ProcessId = ProcessId::Observed(1);
    const P2: ProcessId = ProcessId::Observed(2);

    #[test]
    fn a_process_keeps_at_most_one_mib() {
        let mut index = RetentionIndex::default();
        index.admit_observation(P1, |_| true);
        let mut truncated = false;
        for _ in 0..40 {
            let (_, ev) = index.admit_chunk(P1, 32 * 1024);
            truncated |= ev.truncated.contains(&P1);
        }
        assert!(truncated);
        assert_eq!(index.process_usage(P1), (PROCESS_MAX_BYTES, 32));
        // The oldest went first: the window is the newest 32 chunks.
        assert_eq!(index.chunks.front().map(|c| c.seq), Some(8));
    }

    #[test]
    fn a_process_keeps_at_most_1024_chunks() {
        let mut index = RetentionIndex::default();
        for _ in 0..1100 {
            index.admit_chunk(P1, 1);
        }
        assert_eq!(index.process_usage(P1), (1024, 1024));
    }

    #[test]
    fn the_sandbox_keeps_at_most_four_mib_and_takes_from_the_oldest() {
        let mut index = RetentionIndex::default();
        for p in 1..=5 {
            for _ in 0..32 {
                index.admit_chunk(ProcessId::Observed(p), 32 * 1024);
            }
        }
        assert_eq!(index.bytes(), SANDBOX_MAX_BYTES);
        assert_eq!(index.process_usage(ProcessId::Observed(1)), (0, 0));
        assert_eq!(index.process_usage(ProcessId::Observed(5)).1, 32);
    }

    #[test]
    fn beyond_256_observations_the_oldest_finished_one_goes() {
        let mut index = RetentionIndex::default();
        index.admit_observation(P1, |_| true);
        index.admit_chunk(P1, 10);
        for n in 2..=256 {
            index.admit_observation(ProcessId::Observed(n), |_| true);
        }
        assert!(index.observations.contains(&P1));
        // P1 is still running: P2 is the oldest finished one.
        let ev = index.admit_observation(ProcessId::Observed(257), |p| p != P1);
        assert_eq!(ev.observations, vec![P2]);
        assert_eq!(index.observations.len(), MAX_OBSERVATIONS);
        let ev = index.admit_observation(ProcessId::Observed(258), |_| true);
        assert_eq!(ev.observations, vec![P1]);
        assert_eq!(ev.chunks.len(), 1);
    }

    proptest! {
        #[test]
        fn limits_always_hold_and_every_loss_is_flagged(
            writes in proptest::collection::vec((1u32..6, 1u32..=32_768), 1..600)
        ) {
            let mut index = RetentionIndex::default();
            let mut written: std::collections::BTreeMap<ProcessId, u64> = Default::default();
            let mut flagged = BTreeSet::new();
            for (p, bytes) in writes {
                let process = ProcessId::Observed(p);
                index.admit_observation(process, |_| true);
                let (_, ev) = index.admit_chunk(process, bytes);
                flagged.extend(ev.truncated);
                *written.entry(process).or_default() += u64::from(bytes);
                prop_assert!(index.bytes() <= SANDBOX_MAX_BYTES);
                prop_assert!(index.chunks.len() <= SANDBOX_MAX_CHUNKS);
                let (b, n) = index.process_usage(process);
                prop_assert!(b <= PROCESS_MAX_BYTES && n <= PROCESS_MAX_CHUNKS);
            }
            for (process, total) in written {
                let kept = index.process_usage(process).0;
                prop_assert_eq!(kept < total, flagged.contains(&process));
            }
            // Sequence numbers stay in order (oldest first).
            prop_assert!(index.chunks.iter().zip(index.chunks.iter().skip(1)).all(|(a, b)| a.seq < b.seq));
        }
    }
}
