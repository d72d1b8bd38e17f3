//! DOCX: the text of `word/document.xml` in its zip container. The entry is read through a
//! bound, never trusting the sizes the archive declares, so a zip bomb stops at the bound.

use std::io::{Cursor, Read};

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::text::Gathered;
use crate::{DocumentError, Extracted, Limits};

const BODY: &str = "word/document.xml";

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Extracted, DocumentError> {
    let unreadable = |what: &str| DocumentError::Unreadable(what.to_owned());
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|_| unreadable("it is not a DOCX (not a zip archive)"))?;
    let entry = archive.by_name(BODY).map_err(|err| match err {
        zip::result::ZipError::FileNotFound => unreadable("it is not a DOCX (it has no word/document.xml)"),
        _ => {
            unreadable("its word/document.xml cannot be opened (encrypted, or compressed in a way not read)")
        }
    })?;
    let mut xml = Vec::new();
    entry
        .take(limits.inflated_bytes as u64 + 1)
        .read_to_end(&mut xml)
        .map_err(|_| unreadable("its word/document.xml is damaged"))?;
    if xml.len() > limits.inflated_bytes {
        return Err(DocumentError::Inflates { limit: limits.inflated_bytes });
    }
    let (text, text_cut) = body_text(&xml, limits.text_bytes)?;
    Ok(Extracted { text, text_cut, ..Extracted::default() })
}

/// The text runs (`w:t`) of a WordprocessingML body: paragraphs on lines, tabs and breaks kept.
fn body_text(xml: &[u8], limit: usize) -> Result<(String, bool), DocumentError> {
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut out = Gathered::new(limit);
    let mut in_text = false;
    while !out.full() {
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|_| DocumentError::Unreadable("its word/document.xml is not well-formed".into()))?;
        match event {
            Event::Start(e) if e.local_name().as_ref() == "t" => in_text = true,
            Event::End(e) => match e.local_name().as_ref() {
                "t" => in_text = false,
                "p" if !out.is_empty() => out.push('\n'),
                _ => {}
            },
            Event::Empty(e) => match e.local_name().as_ref() {
                "tab" => out.push('\t'),
                "br" | "cr" => out.push('\n'),
                _ => {}
            },
            Event::Text(e) if in_text => out.push_str(&e.xml10_content()),
            Event::CData(e) if in_text => out.push_str(&e.xml10_content()),
            Event::GeneralRef(e) if in_text => {
                let resolved = match e.resolve_char_ref() {
                    Ok(Some(c)) => Some(c.to_string()),
                    _ => quick_xml::escape::resolve_xml_entity(&e.xml10_content()).map(str::to_owned),
                };
                if let Some(text) = resolved {
                    out.push_str(&text);
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    Ok(out.finish())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Write;

    use zip::write::SimpleFileOptions;

    use super::*;

    /// A DOCX whose body holds `paragraphs`, as Word lays them out.
    pub(crate) fn docx(paragraphs: &[&str]) -> Vec<u8> {
        let body: String = paragraphs
            .iter()
            .map(|p| format!("<w:p><w:r><w:t xml:space=\"preserve\">{p}</w:t></w:r></w:p>"))
            .collect();
        let xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\
             <w:document xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">\
             <w:body>{body}<w:sectPr/></w:body></w:document>"
        );
        zip_of(&[("[Content_Types].xml", b"<Types/>".as_slice()), (BODY, xml.as_bytes())])
    }

    pub(crate) fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in entries {
            assert!(zip.start_file(*name, options).is_ok());
            assert!(zip.write_all(bytes).is_ok());
        }
        zip.finish().map(Cursor::into_inner).unwrap_or_default()
    }

    #[test]
    fn a_docx_gives_its_paragraphs() {
        let bytes = docx(&["Invoice 2291", "Total: 41 &amp; 1 &#8364;", "Due in 30 days"]);
        let out = extract(&bytes, &Limits::DEFAULT);
        assert_eq!(
            out.map(|e| e.text).ok().as_deref(),
            Some("Invoice 2291\nTotal: 41 & 1 €\nDue in 30 days")
        );
    }

    #[test]
    fn a_zip_bomb_in_a_docx_is_refused_at_the_bound() {
        // 64 MiB of zeros deflate to about 64 KiB: far past a 20 MiB bound.
        let zeros = vec![0u8; 64 * 1024 * 1024];
        let bytes = zip_of(&[(BODY, &zeros)]);
        assert!(bytes.len() < 1024 * 1024, "{}", bytes.len());
        let err = extract(&bytes, &Limits::DEFAULT).err();
        assert_eq!(err, Some(DocumentError::Inflates { limit: Limits::DEFAULT.inflated_bytes }));
    }

    #[test]
    fn a_zip_that_is_no_docx_and_bytes_that_are_no_zip_are_unreadable() {
        let other = zip_of(&[("readme.txt", b"hello".as_slice())]);
        for bytes in [other, b"PK\x03\x04 not really".to_vec(), b"%PDF-1.4".to_vec()] {
            let err = extract(&bytes, &Limits::DEFAULT).err();
            assert!(matches!(err, Some(DocumentError::Unreadable(_))), "{err:?}");
        }
    }
}
