//! File and image parts of a turn's input: each names a ready file of the turn's session, or
//! (an `input_file` with `file_data`) is the file itself. A text file is given to the model
//! inline, within a budget, and so is a document's text (PDF, DOCX, HTML: `documents`); an
//! image travels by reference (a short-lived presigned GET) and only to a model that reads
//! images.

use std::sync::OnceLock;
use std::time::Duration;

use agentplane_documents::Kind;
use agentplane_domain::file::{FileId, FileStatus, SessionFile, is_text_type};
use agentplane_domain::{ProjectId, SessionId, ValidationError};
use agentplane_store::StoreError;

use super::{documents, inline};
use crate::App;
use crate::client::error::ClientError;
use crate::client::responses::validation::FileRef;

/// The bytes of text files given to the model in one message, all files together.
pub const TEXT_BUDGET_BYTES: usize = 64 * 1024;
/// How long the model's image URL works. Every model call of the turn sends the URL again (the
/// provider fetches it each time), so it must outlive the longest turn: a background run's
/// ceiling (30 min; a synchronous turn's is 10), plus 5 minutes for the last call. A pause ends
/// the URL's use: a turn carried on later gets notes in place of its images.
pub const IMAGE_URL_SECONDS: u64 = {
    let sync = agentplane_domain::agent::SYNC_TIMEOUT_CEILING_MS;
    let background = agentplane_domain::agent::BACKGROUND_CEILING_MS;
    (if sync > background { sync } else { background }) / 1000 + 5 * 60
};
/// The models that read images when `AGENTPLANE_IMAGE_MODELS` is not set.
pub const DEFAULT_IMAGE_MODELS: &str = "gpt-4o,gpt-4o-mini,gpt-4.1*,gpt-5*,o4-mini";

/// Whether `model` reads images: `AGENTPLANE_IMAGE_MODELS`, a comma list of names where a
/// trailing `*` matches any rest (default [`DEFAULT_IMAGE_MODELS`]).
pub fn reads_images(model: &str) -> bool {
    static LIST: OnceLock<Vec<String>> = OnceLock::new();
    let list = LIST.get_or_init(|| {
        let text = std::env::var("AGENTPLANE_IMAGE_MODELS").unwrap_or_else(|_| DEFAULT_IMAGE_MODELS.into());
        parse_models(&text)
    });
    matches_any(list, model)
}

fn parse_models(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

fn matches_any(list: &[String], model: &str) -> bool {
    list.iter().any(|pattern| match pattern.strip_suffix('*') {
        Some(prefix) => model.starts_with(prefix),
        None => model == pattern,
    })
}

/// What the file parts add to the turn: text to append to the message, and images.
#[derive(Debug, Default)]
pub struct Resolved {
    pub text: String,
    pub images: Images,
}

/// The image files of a turn's input, and their presigned URLs (now).
#[derive(Debug, Default)]
pub struct Images {
    pub urls: Vec<String>,
    pub files: Vec<FileId>,
}

fn refused(file: &FileRef, message: impl Into<String>) -> ClientError {
    ValidationError::new(file.param.clone(), message).into()
}

/// Reads each referenced file of `session` (checking a pending one against the bucket) or sent
/// inline, and turns it into text or an image URL; any that is missing, not ready, of a kind
/// the model cannot take, a document that gives no text, or an image for a model that reads
/// none, is a 400 naming its part.
pub async fn resolve(
    app: &App,
    project: &ProjectId,
    session: &SessionId,
    files: &[FileRef],
    model: &str,
) -> Result<Resolved, ClientError> {
    let mut out = Resolved::default();
    let mut budget = TEXT_BUDGET_BYTES;
    for part in files {
        if let Some(given) = &part.inline {
            out.text.push_str(&inline_text(part, inline::decode(part, given)?, &mut budget).await?);
            continue;
        }
        let file = load(app, project, session, part).await?;
        if part.image || file.is_image() {
            if !file.is_image() {
                return Err(refused(part, format!("`{}` is not an image ({})", file.id, file.content_type)));
            }
            if !reads_images(model) {
                return Err(refused(
                    part,
                    format!(
                        "the model `{model}` does not read images (the deployment's AGENTPLANE_IMAGE_MODELS)"
                    ),
                ));
            }
            let url = app
                .store
                .file_objects(file.bucket.as_ref())?
                .presign_get(&file.object_key(), Duration::from_secs(IMAGE_URL_SECONDS))
                .await?;
            out.images.urls.push(url);
            out.images.files.push(file.id.clone());
        } else if let Some(kind) = Kind::of(&file.content_type) {
            if file.size > documents::LIMITS.input_bytes as u64 {
                return Err(documents::too_large(part, file.size));
            }
            let bytes = app
                .store
                .file_objects(file.bucket.as_ref())?
                .get_prefix(&file.object_key(), file.size)
                .await?;
            let extracted = documents::extract(part, kind, bytes).await?;
            out.text.push_str(&documents::render(
                &file.filename,
                &file.content_type,
                file.size,
                &extracted,
                &mut budget,
            ));
        } else if file.is_text() {
            let shown = budget.min(usize::try_from(file.size).unwrap_or(usize::MAX));
            let bytes = if shown == 0 {
                Vec::new()
            } else {
                app.store
                    .file_objects(file.bucket.as_ref())?
                    .get_prefix(&file.object_key(), shown as u64)
                    .await?
            };
            budget -= bytes.len().min(budget);
            out.text.push_str(&render_text(&file.filename, &file.content_type, file.size, &bytes));
        } else {
            return Err(refused(part, format!("`{}` is {}: {TAKEN}", file.id, file.content_type)));
        }
    }
    Ok(out)
}

/// What the model can be given, for a refusal.
const TAKEN: &str =
    "only text files (text/*, JSON), documents (PDF, DOCX, HTML) and images can be given to the model";

/// An inline file as text: a document's, or a text file's (within what is left of `budget`).
async fn inline_text(
    part: &FileRef,
    file: inline::Decoded,
    budget: &mut usize,
) -> Result<String, ClientError> {
    let size = file.bytes.len() as u64;
    if let Some(kind) = Kind::of(&file.media_type) {
        let extracted = documents::extract(part, kind, file.bytes).await?;
        return Ok(documents::render(&file.filename, &file.media_type, size, &extracted, budget));
    }
    if is_text_type(&file.media_type) {
        let shown = &file.bytes[..file.bytes.len().min(*budget)];
        *budget -= shown.len();
        return Ok(render_text(&file.filename, &file.media_type, size, shown));
    }
    let what = match file.media_type.as_str() {
        "" => "of no type its data URL or its name tells".to_owned(),
        media_type if media_type.starts_with("image/") => {
            format!("{media_type}: an image is given as an `input_image` part naming a session file")
        }
        media_type => media_type.to_owned(),
    };
    Err(refused(part, format!("`{}` is {what}: {TAKEN}", file.filename)))
}

async fn load(
    app: &App,
    project: &ProjectId,
    session: &SessionId,
    part: &FileRef,
) -> Result<SessionFile, ClientError> {
    let missing = || refused(part, format!("no file `{}` in this session", part.file_id));
    let id: FileId = part.file_id.parse().map_err(|_| missing())?;
    let file = match app.store.files().get(project, session, &id).await {
        Ok(file) => file,
        Err(StoreError::NotFound) => return Err(missing()),
        Err(err) => return Err(err.into()),
    };
    let file = super::settle::settle(app, file).await?;
    if file.status != FileStatus::Ready {
        return Err(refused(part, format!("the file `{id}` is not ready: upload its bytes first")));
    }
    Ok(file)
}

/// A text file as the model reads it: a header naming it, its text (a cut one says so).
fn render_text(filename: &str, content_type: &str, size: u64, bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = format!("\n\n[file {filename} ({content_type}, {size} bytes)]\n{text}");
    if (bytes.len() as u64) < size {
        out.push_str(&format!("\n[the file is cut here: {} of its {size} bytes are shown]", bytes.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_models_match_by_name_or_prefix() {
        let list = parse_models(DEFAULT_IMAGE_MODELS);
        for yes in ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-nano", "gpt-5-mini"] {
            assert!(matches_any(&list, yes), "{yes}");
        }
        for no in ["gpt-3.5-turbo", "gpt-4o-2", "text-embedding-3", ""] {
            assert!(!matches_any(&list, no), "{no}");
        }
        assert_eq!(parse_models(" a , b* ,,"), vec!["a".to_owned(), "b*".to_owned()]);
    }
}
