//! Checkpoints and restores: the workspace's files to and from the workspaces bucket through
//! presigned URLs, so no file travels through Core.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use agentplane_domain::platform::manifest::{RestorePlan, UploadPlan};
use agentplane_domain::sandbox::command::CommandOutcome;
use futures_util::{StreamExt, TryStreamExt};

use super::commands::failed;
use super::workspace;

type Hosted = Option<(PathBuf, u32)>;

/// Files moved at once.
const IN_FLIGHT: usize = 16;

fn http() -> Result<reqwest::Client, String> {
    reqwest::Client::builder().timeout(Duration::from_secs(300)).build().map_err(|e| e.to_string())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, workspace::Failure> + Send + 'static,
) -> Result<T, String> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(failure)) => Err(failure.message()),
        Err(err) => Err(format!("the workspace operation panicked: {err}")),
    }
}

fn done(details: BTreeMap<String, String>) -> CommandOutcome {
    CommandOutcome::Done { pid: None, details }
}

fn answer(result: Result<BTreeMap<String, String>, String>) -> CommandOutcome {
    match result {
        Ok(details) => done(details),
        Err(message) => failed(message),
    }
}

async fn get_json<T: serde::de::DeserializeOwned>(http: &reqwest::Client, url: &str) -> Result<T, String> {
    let response = http.get(url).send().await.map_err(|e| format!("fetching the plan: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("fetching the plan: {}", response.status()));
    }
    response.json().await.map_err(|e| format!("reading the plan: {e}"))
}

pub async fn scan(hosted: &Hosted, upload_url: &str, limits: workspace::Limits) -> CommandOutcome {
    let Some((root, _)) = hosted.clone() else { return failed("this node does not host the sandbox") };
    answer(
        async {
            let (entries, _) = blocking(move || workspace::list(&root, "", usize::MAX, &limits)).await?;
            let body = serde_json::to_vec(&entries).map_err(|e| e.to_string())?;
            let response = http()?
                .put(upload_url)
                .body(body)
                .send()
                .await
                .map_err(|e| format!("uploading the scan: {e}"))?;
            if !response.status().is_success() {
                return Err(format!("uploading the scan: {}", response.status()));
            }
            Ok(BTreeMap::from([("files".to_owned(), entries.len().to_string())]))
        }
        .await,
    )
}

pub async fn upload(hosted: &Hosted, plan_url: &str) -> CommandOutcome {
    let Some((root, _)) = hosted.clone() else { return failed("this node does not host the sandbox") };
    answer(
        async {
            let http = http()?;
            let plan: UploadPlan = get_json(&http, plan_url).await?;
            let count = plan.files.len();
            let bytes: u64 = futures_util::stream::iter(plan.files.into_iter().map(|file| {
                let (root, http) = (root.clone(), http.clone());
                async move {
                    let path = file.path.clone();
                    let bytes =
                        blocking(move || workspace::read_within(&root, &path, workspace::MAX_BLOB_BYTES))
                            .await?;
                    if workspace::sha256_hex(&bytes) != file.sha256 {
                        return Err(format!("workspace:changed:{}", file.path));
                    }
                    let size = bytes.len() as u64;
                    let response = http
                        .put(&file.url)
                        .header("content-type", "application/octet-stream")
                        .body(bytes)
                        .send()
                        .await
                        .map_err(|e| format!("uploading {}: {e}", file.path))?;
                    if !response.status().is_success() {
                        return Err(format!("uploading {}: {}", file.path, response.status()));
                    }
                    Ok(size)
                }
            }))
            .buffer_unordered(IN_FLIGHT)
            .try_fold(0u64, |sum, n| async move { Ok(sum + n) })
            .await?;
            Ok(BTreeMap::from([
                ("uploaded".to_owned(), count.to_string()),
                ("bytes".to_owned(), bytes.to_string()),
            ]))
        }
        .await,
    )
}

pub async fn restore(hosted: &Hosted, plan_url: &str, limits: workspace::Limits) -> CommandOutcome {
    let Some((root, uid)) = hosted.clone() else { return failed("this node does not host the sandbox") };
    answer(
        async {
            let http = http()?;
            let plan: RestorePlan = get_json(&http, plan_url).await?;
            let listed = root.clone();
            // A tree past the caps cannot be listed: it is cleared, and every file fetched.
            let current = blocking(move || match workspace::list(&listed, "", usize::MAX, &limits) {
                Ok((current, _)) => Ok(current),
                Err(workspace::Failure::TooLarge(_)) => {
                    workspace::clear(&listed, &limits).map(|_| Vec::new())
                }
                Err(err) => Err(err),
            })
            .await?;
            let current: BTreeMap<String, (String, u32)> =
                current.into_iter().map(|e| (e.path, (e.sha256, e.mode))).collect();
            let keep: BTreeSet<&str> = plan.fetch.iter().map(|f| f.path.as_str()).collect();
            let mut removed = 0usize;
            for path in current.keys().filter(|p| !keep.contains(p.as_str())) {
                let (root, path) = (root.clone(), path.clone());
                match blocking(move || workspace::delete(&root, &path)).await {
                    Ok(()) => removed += 1,
                    Err(message) if message == workspace::Failure::NotFound.message() => {}
                    Err(message) => return Err(message),
                }
            }
            let mode_of = |f: &agentplane_domain::platform::manifest::PlannedFile| {
                f.mode.unwrap_or(workspace::DEFAULT_MODE) & workspace::MODE_BITS
            };
            // Same content, other mode: only the mode is written back.
            for file in plan.fetch.iter().filter(|f| {
                current.get(&f.path).is_some_and(|(sha, mode)| *sha == f.sha256 && *mode != mode_of(f))
            }) {
                let (root, path, mode) = (root.clone(), file.path.clone(), mode_of(file));
                blocking(move || workspace::set_mode(&root, &path, mode)).await?;
            }
            let wanted: Vec<_> = plan
                .fetch
                .into_iter()
                .filter(|f| current.get(&f.path).is_none_or(|(sha, _)| *sha != f.sha256))
                .collect();
            let fetched = wanted.len();
            futures_util::stream::iter(wanted.into_iter().map(|file| {
                let (root, http) = (root.clone(), http.clone());
                let mode = mode_of(&file);
                async move {
                    let response = http
                        .get(&file.url)
                        .send()
                        .await
                        .map_err(|e| format!("fetching {}: {e}", file.path))?;
                    if !response.status().is_success() {
                        return Err(format!("fetching {}: {}", file.path, response.status()));
                    }
                    let bytes = response.bytes().await.map_err(|e| format!("fetching {}: {e}", file.path))?;
                    if workspace::sha256_hex(&bytes) != file.sha256 {
                        return Err(format!("the blob of {} is not of its digest", file.path));
                    }
                    blocking(move || {
                        workspace::write_within(
                            &root,
                            uid,
                            &file.path,
                            &bytes,
                            workspace::MAX_BLOB_BYTES,
                            mode,
                        )
                    })
                    .await
                }
            }))
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
            Ok(BTreeMap::from([
                ("removed".to_owned(), removed.to_string()),
                ("fetched".to_owned(), fetched.to_string()),
            ]))
        }
        .await,
    )
}
