//! PDFs built in the test with lopdf, as a writer of PDFs would lay them out.

use std::io::Write;

use lopdf::content::{Content, Operation};
use lopdf::{Document, Object, Stream, dictionary};

use super::*;

/// A PDF whose pages show `pages` (one line of text each), its streams compressed.
pub(crate) fn pdf(pages: &[&str]) -> Vec<u8> {
    pdf_with(pages, |_| {})
}

fn pdf_with(pages: &[&str], change: impl FnOnce(&mut Document)) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Helvetica", "Encoding" => "WinAnsiEncoding",
    });
    let resources_id = doc.add_object(dictionary! { "Font" => dictionary! { "F1" => font_id } });
    let mut kids = Vec::new();
    for text in pages {
        let content = Content {
            operations: vec![
                Operation::new("BT", vec![]),
                Operation::new("Tf", vec!["F1".into(), 12.into()]),
                Operation::new("Td", vec![72.into(), 720.into()]),
                Operation::new("Tj", vec![Object::string_literal(*text)]),
                Operation::new("ET", vec![]),
            ],
        };
        let content_id = doc.add_object(Stream::new(dictionary! {}, content.encode().unwrap_or_default()));
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page", "Parent" => pages_id, "Contents" => content_id,
        });
        kids.push(page_id.into());
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages", "Kids" => kids, "Count" => count, "Resources" => resources_id,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    let id = Object::Array(vec![Object::string_literal(b"4f7c"), Object::string_literal(b"4f7c")]);
    doc.trailer.set("ID", id);
    doc.compress();
    change(&mut doc);
    let mut bytes = Vec::new();
    assert!(doc.save_to(&mut bytes).is_ok());
    bytes
}

/// `size` zero bytes, deflated (zlib).
fn deflated_zeros(size: usize) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let chunk = vec![0u8; 1024 * 1024];
    for _ in 0..size / chunk.len() {
        assert!(encoder.write_all(&chunk).is_ok());
    }
    encoder.finish().unwrap_or_default()
}

#[test]
fn a_pdf_gives_the_text_of_its_pages() {
    let bytes = pdf(&["Invoice 2291 for ACME", "Total due: 41 EUR"]);
    let out = extract(&bytes, &Limits::DEFAULT).unwrap_or_default();
    assert_eq!(out.text, "Invoice 2291 for ACME\nTotal due: 41 EUR");
    assert_eq!(out.pages, Some(Pages { read: 2, total: 2 }));
    assert_eq!(out.note(), None);
}

#[test]
fn only_the_first_pages_are_read_and_the_note_says_so() {
    let texts: Vec<String> = (1..=5).map(|i| format!("page {i}")).collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let limits = Limits { pages: 3, ..Limits::DEFAULT };
    let out = extract(&pdf(&texts), &limits).unwrap_or_default();
    assert_eq!(out.text, "page 1\npage 2\npage 3");
    assert_eq!(out.note().as_deref(), Some("only its first 3 of 5 pages are read"));
}

#[test]
fn a_stream_that_inflates_past_the_bound_is_a_bomb() {
    // One stream of 64 MiB of zeros (about 64 KiB deflated) that no page even uses.
    let bomb = deflated_zeros(64 * 1024 * 1024);
    let bytes = pdf_with(&["hello"], |doc| {
        doc.add_object(Stream::new(dictionary! { "Filter" => "FlateDecode" }, bomb).with_compression(false));
    });
    assert!(bytes.len() < 1024 * 1024);
    assert_eq!(extract(&bytes, &Limits::DEFAULT).err(), Some(DocumentError::Inflates { limit: 20 << 20 }));
}

#[test]
fn many_streams_within_the_bound_each_are_a_bomb_together() {
    // 8 streams of 4 MiB: each is far within lopdf's per-stream bound, together past 20 MiB.
    let bytes = pdf_with(&["hello"], |doc| {
        for _ in 0..8 {
            let stream = Stream::new(dictionary! { "Filter" => "FlateDecode" }, deflated_zeros(4 << 20));
            doc.add_object(stream.with_compression(false));
        }
    });
    assert_eq!(extract(&bytes, &Limits::DEFAULT).err(), Some(DocumentError::Inflates { limit: 20 << 20 }));
}

/// `pages`, encrypted (RC4, 128 bits) with `user_password`.
#[allow(deprecated)]
fn encrypted(pages: &[&str], user_password: &str) -> Vec<u8> {
    pdf_with(pages, |doc| {
        let version = lopdf::EncryptionVersion::V2 {
            document: doc,
            owner_password: "owner",
            user_password,
            key_length: 128,
            permissions: lopdf::Permissions::all(),
        };
        let state = lopdf::EncryptionState::try_from(version);
        assert!(state.is_ok_and(|state| doc.encrypt(&state).is_ok()));
    })
}

#[test]
fn a_pdf_that_needs_a_password_is_refused_as_encrypted() {
    let bytes = encrypted(&["secret plans"], "user");
    assert_eq!(extract(&bytes, &Limits::DEFAULT).err(), Some(DocumentError::Encrypted));
}

#[test]
fn a_pdf_encrypted_with_an_owner_password_only_is_read() {
    let bytes = encrypted(&["open plans"], "");
    assert_eq!(extract(&bytes, &Limits::DEFAULT).map(|e| e.text), Ok("open plans".to_owned()));
}

#[test]
fn what_is_not_a_pdf_is_unreadable() {
    for bytes in [b"hello world".to_vec(), b"%PDF-1.7\n garbage".to_vec(), vec![0; 100]] {
        let err = extract(&bytes, &Limits::DEFAULT).err();
        assert!(matches!(err, Some(DocumentError::Unreadable(_))), "{err:?}");
    }
}
