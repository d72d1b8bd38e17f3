//! PDF: the text of its first pages, with its fonts' encodings (lopdf). Before lopdf sees the
//! file, [`inflated_total`] bounds what all its streams inflate to together, since lopdf
//! bounds each stream alone and decodes object streams while it loads.

use lopdf::{DecompressError, Document, Error, LoadOptions};

use crate::text::Gathered;
use crate::{DocumentError, Extracted, Limits, Pages};

mod streams;

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Extracted, DocumentError> {
    if !bytes.starts_with(b"%PDF-") && !bytes[..bytes.len().min(1024)].windows(5).any(|w| w == b"%PDF-") {
        return Err(DocumentError::Unreadable("it is not a PDF (no %PDF- header)".into()));
    }
    streams::inflated_total(bytes, limits.inflated_bytes)?;
    let options =
        LoadOptions { max_decompressed_size: Some(limits.inflated_bytes), ..LoadOptions::default() };
    let document = Document::load_mem_with_options(bytes, options).map_err(|err| refused(&err, limits))?;
    // An encrypted PDF that opens without a password (an owner password only) is decrypted
    // as it loads; one that needs a user password loads with nothing readable in it.
    if document.trailer.has(b"Encrypt") && document.encryption_state.is_none() {
        return Err(DocumentError::Encrypted);
    }
    let pages = document.get_pages();
    let mut out = Gathered::new(limits.text_bytes);
    let mut content_left = limits.inflated_bytes;
    let mut read = 0;
    let mut skipped_pages = Vec::new();
    for (&number, &page) in pages.iter().take(limits.pages) {
        if out.full() || content_left == 0 {
            break;
        }
        read += 1;
        let bound = limits.page_content_bytes.min(content_left);
        // Measured first, so that the pages together stay within the bound as well as each.
        let size = match document.get_page_content_with_limit(page, bound) {
            Ok(content) => content.len(),
            Err(Error::Decompress(DecompressError::MemoryLimitExceeded { .. })) => {
                skipped_pages.push(number);
                continue;
            }
            Err(err) => return Err(refused(&err, limits)),
        };
        content_left -= size.min(content_left);
        // A chunk in a font whose encoding cannot be read is left out, as a reader would.
        for text in document.extract_text_chunks_with_limit(&[number], bound).into_iter().flatten() {
            out.push_str(&text);
        }
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
    }
    let (text, text_cut) = out.finish();
    Ok(Extracted { text, text_cut, pages: Some(Pages { read, total: pages.len() }), skipped_pages })
}

fn refused(err: &Error, limits: &Limits) -> DocumentError {
    match err {
        Error::InvalidPassword | Error::Decryption(_) | Error::UnsupportedSecurityHandler(_) => {
            DocumentError::Encrypted
        }
        Error::Decompress(DecompressError::MemoryLimitExceeded { .. }) => {
            DocumentError::Inflates { limit: limits.inflated_bytes }
        }
        // lopdf's own messages name its internals (and its issue tracker): the reader needs less.
        _ => DocumentError::Unreadable("it is not a well-formed PDF".into()),
    }
}

#[cfg(test)]
pub(crate) mod tests;
