//! Text out of the documents a turn gives the model: PDF, DOCX and HTML. Pure and bounded:
//! bytes in, text out, no I/O. Every limit is a field of [`Limits`], and a document that would
//! pass one (a decompression bomb, a file too large to read) is an error, never an unbounded
//! allocation. What the caller must still bound is time: run [`extract`] where it can be
//! abandoned (a blocking task with a timeout).

mod docx;
mod html;
mod kind;
mod pdf;
mod text;

pub use kind::{Kind, guess_media_type};

/// How much of a document is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes of a document read at all; a larger one is [`DocumentError::TooLarge`].
    pub input_bytes: usize,
    /// The most bytes the compressed parts of a document (a PDF's streams, a DOCX's zip
    /// entries) may inflate to, all together; past it, [`DocumentError::Inflates`].
    pub inflated_bytes: usize,
    /// The most bytes one PDF page's content may inflate to: a page past it is skipped, said so.
    pub page_content_bytes: usize,
    /// The most PDF pages read: later pages are left out, said so.
    pub pages: usize,
    /// The most bytes of text extracted: the rest is left out, said so.
    pub text_bytes: usize,
}

impl Limits {
    /// 10 MiB read, 20 MiB inflated, 4 MiB per page, 100 pages, 64 KiB of text.
    pub const DEFAULT: Self = Self {
        input_bytes: 10 * 1024 * 1024,
        inflated_bytes: 20 * 1024 * 1024,
        page_content_bytes: 4 * 1024 * 1024,
        pages: 100,
        text_bytes: 64 * 1024,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A document's text, and what of it was left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extracted {
    pub text: String,
    /// The text was cut at [`Limits::text_bytes`].
    pub text_cut: bool,
    /// A PDF's pages: how many were read, of how many.
    pub pages: Option<Pages>,
    /// PDF pages skipped because their content inflates past [`Limits::page_content_bytes`].
    pub skipped_pages: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pages {
    pub read: usize,
    pub total: usize,
}

impl Extracted {
    /// What was left out, as a note for the reader (`None`: nothing).
    pub fn note(&self) -> Option<String> {
        let mut notes = Vec::new();
        if let Some(pages) = self.pages.filter(|p| p.read < p.total) {
            notes.push(format!("only its first {} of {} pages are read", pages.read, pages.total));
        }
        if !self.skipped_pages.is_empty() {
            let list: Vec<String> = self.skipped_pages.iter().map(u32::to_string).collect();
            notes.push(format!("pages {} are left out (their content is too large)", list.join(", ")));
        }
        if self.text_cut {
            notes.push(format!("its text is cut after {} bytes", self.text.len()));
        }
        (!notes.is_empty()).then(|| notes.join("; "))
    }
}

/// Why a document gives no text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("the document is {size} bytes: at most {limit} bytes of a document are read")]
    TooLarge { size: usize, limit: usize },
    #[error("the document inflates past {limit} bytes (a decompression bomb?): it is not read")]
    Inflates { limit: usize },
    #[error("the PDF is encrypted: send it without a password")]
    Encrypted,
    #[error("the document cannot be read: {0}")]
    Unreadable(String),
}

/// The text of `bytes`, a document of `kind`, within `limits`.
pub fn extract(kind: Kind, bytes: &[u8], limits: &Limits) -> Result<Extracted, DocumentError> {
    if bytes.len() > limits.input_bytes {
        return Err(DocumentError::TooLarge { size: bytes.len(), limit: limits.input_bytes });
    }
    match kind {
        Kind::Pdf => pdf::extract(bytes, limits),
        Kind::Docx => docx::extract(bytes, limits),
        Kind::Html => Ok(html::extract(&String::from_utf8_lossy(bytes), limits)),
    }
}
