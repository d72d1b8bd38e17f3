//! An `input_file` sent inline: `file_data`, a base64 data URL, decoded within a bound, its
//! media type from the URL (or, without a usable one, the `filename`).

use agentplane_domain::ValidationError;
use base64::Engine;

use super::documents;
use crate::client::error::ClientError;
use crate::client::responses::validation::{FileRef, InlineFile};

/// An inline file, decoded.
#[derive(Debug)]
pub struct Decoded {
    pub filename: String,
    pub media_type: String,
    pub bytes: Vec<u8>,
}

/// `file_data` decoded (a `data:<type>;base64,<data>` URL, or bare base64); one larger than a
/// document may be is refused before it is decoded.
pub fn decode(part: &FileRef, file: &InlineFile) -> Result<Decoded, ClientError> {
    let invalid = |message: &str| ClientError::from(ValidationError::new(part.param.clone(), message));
    let (declared, data) = match file.file_data.strip_prefix("data:") {
        Some(url) => {
            let (meta, data) =
                url.split_once(',').ok_or_else(|| invalid("`file_data` is not a data URL (no `,`)"))?;
            let mut params = meta.split(';');
            let media_type = params.next().unwrap_or_default().trim().to_ascii_lowercase();
            if !params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
                return Err(invalid("`file_data` must be a base64 data URL (`data:<type>;base64,…`)"));
            }
            (media_type, data)
        }
        None => (String::new(), file.file_data.as_str()),
    };
    let data = data.trim();
    let most = documents::LIMITS.input_bytes;
    if data.len() / 4 * 3 > most {
        return Err(documents::too_large(part, (data.len() / 4 * 3) as u64));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| invalid("`file_data` is not valid base64"))?;
    let filename = file.filename.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| "file".into());
    let media_type = match declared.as_str() {
        "" | "application/octet-stream" => {
            agentplane_documents::guess_media_type(&filename).map_or(declared.clone(), str::to_owned)
        }
        _ => declared,
    };
    Ok(Decoded { filename, media_type, bytes })
}
