//! Documents (PDF, DOCX, HTML) given to the model: their text, read off the async runtime and
//! abandoned after a timeout, and rendered like a text file within the message's text budget.

use std::time::Duration;

use agentplane_documents::{DocumentError, Extracted, Kind, Limits};

use super::input::TEXT_BUDGET_BYTES;
use crate::client::error::ClientError;
use crate::client::responses::validation::FileRef;

/// What is read of a document: 10 MiB of it, inflating to at most 20 MiB, its first 100 pages
/// (4 MiB of content each), and as much text as a message takes of text files.
pub const LIMITS: Limits = Limits { text_bytes: TEXT_BUDGET_BYTES, ..Limits::DEFAULT };
/// How long reading one document's text may take.
pub const EXTRACT_TIMEOUT: Duration = Duration::from_secs(5);

/// A 400 naming the part, with one of the document codes.
pub fn refused(part: &FileRef, code: &'static str, message: impl Into<String>) -> ClientError {
    ClientError::DocumentRefused { param: part.param.clone(), code, message: message.into() }
}

/// A document larger than [`LIMITS`] reads, refused before its bytes are fetched.
pub fn too_large(part: &FileRef, size: u64) -> ClientError {
    let limit = LIMITS.input_bytes;
    refused(
        part,
        "document_too_large",
        format!("the document is {size} bytes: at most {limit} bytes of a document are read"),
    )
}

/// The text of `bytes`, a document of `kind`; what gives none is a 400 naming the part.
pub async fn extract(part: &FileRef, kind: Kind, bytes: Vec<u8>) -> Result<Extracted, ClientError> {
    let task = tokio::task::spawn_blocking(move || agentplane_documents::extract(kind, &bytes, &LIMITS));
    // A task past its time runs on (a blocking thread cannot be stopped), within the limits.
    let extracted = match tokio::time::timeout(EXTRACT_TIMEOUT, task).await {
        Ok(Ok(extracted)) => extracted,
        Ok(Err(_)) => Err(DocumentError::Unreadable("it could not be read".into())),
        Err(_) => {
            return Err(refused(
                part,
                "document_unreadable",
                format!("reading the document's text took longer than {} s", EXTRACT_TIMEOUT.as_secs()),
            ));
        }
    };
    extracted.map_err(|err| {
        let code = match err {
            DocumentError::TooLarge { .. } | DocumentError::Inflates { .. } => "document_too_large",
            DocumentError::Encrypted => "document_encrypted",
            DocumentError::Unreadable(_) => "document_unreadable",
        };
        refused(part, code, err.to_string())
    })
}

/// A document as the model reads it: a header naming it, its text within what is left of
/// `budget`, and what was left out.
pub fn render(
    filename: &str,
    content_type: &str,
    size: u64,
    extracted: &Extracted,
    budget: &mut usize,
) -> String {
    let mut end = extracted.text.len().min(*budget);
    while !extracted.text.is_char_boundary(end) {
        end -= 1;
    }
    *budget -= end;
    let shown = &extracted.text[..end];
    let mut out = format!("\n\n[file {filename} ({content_type}, {size} bytes): its text]\n{shown}");
    if extracted.text.trim().is_empty() {
        out.push_str("[no text could be read from it: a scanned document holds only images]");
    }
    let mut notes: Vec<String> = extracted.note().into_iter().collect();
    if end < extracted.text.len() {
        notes.push(format!("{end} of the {} bytes of its text are shown", extracted.text.len()));
    }
    if !notes.is_empty() {
        out.push_str(&format!("\n[the document is cut here: {}]", notes.join("; ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_cut_to_the_budget_and_says_so() {
        let extracted = Extracted { text: "ééé".into(), ..Extracted::default() };
        let mut budget = 3;
        let text = render("a.pdf", "application/pdf", 10, &extracted, &mut budget);
        assert_eq!(budget, 1);
        assert!(text.ends_with("[file a.pdf (application/pdf, 10 bytes): its text]\né\n[the document is cut here: 2 of the 6 bytes of its text are shown]"), "{text}");
        let mut budget = 100;
        let whole = render("a.pdf", "application/pdf", 10, &extracted, &mut budget);
        assert!(!whole.contains("cut here"), "{whole}");
    }
}
