//! Which documents are read, by media type (or, for a file sent without one, its name).

/// A document whose text is extracted (text files are read as they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pdf,
    Docx,
    Html,
}

const DOCX: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";

impl Kind {
    /// The kind of a document of `media_type` (parameters such as `; charset=…` ignored).
    pub fn of(media_type: &str) -> Option<Self> {
        let base = media_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        match base.as_str() {
            "application/pdf" => Some(Self::Pdf),
            DOCX => Some(Self::Docx),
            "text/html" | "application/xhtml+xml" => Some(Self::Html),
            _ => None,
        }
    }
}

/// The media type a file's name suggests, for a file sent without a usable one.
pub fn guess_media_type(filename: &str) -> Option<&'static str> {
    let (_, extension) = filename.rsplit_once('.')?;
    Some(match extension.to_ascii_lowercase().as_str() {
        "pdf" => "application/pdf",
        "docx" => DOCX,
        "html" | "htm" => "text/html",
        "xhtml" => "application/xhtml+xml",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "txt" | "text" | "log" => "text/plain",
        "json" => "application/json",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_known_by_media_type_and_names_suggest_one() {
        assert_eq!(Kind::of("application/pdf"), Some(Kind::Pdf));
        assert_eq!(Kind::of("Text/HTML; charset=utf-8"), Some(Kind::Html));
        assert_eq!(Kind::of(DOCX), Some(Kind::Docx));
        for other in ["text/markdown", "text/csv", "application/zip", "image/png", ""] {
            assert_eq!(Kind::of(other), None, "{other}");
        }
        assert_eq!(guess_media_type("Report.PDF"), Some("application/pdf"));
        assert_eq!(guess_media_type("notes.md"), Some("text/markdown"));
        assert_eq!(guess_media_type("archive.zip"), None);
        assert_eq!(guess_media_type("README"), None);
    }
}
