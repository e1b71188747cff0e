//! The file name of a session: safe on every file system, distinct for
//! distinct names, and short enough for its temporary file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Suffix of state files.
pub const EXTENSION: &str = "json";

/// 64-bit FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Encoded names longer than this are cut and end in a hash of the whole
/// name, so that the temporary file's name stays within 255 bytes.
pub(super) const MAX_ENCODED: usize = 160;

/// The file name for SESSION.  Lowercase ASCII letters, digits and `-` stay;
/// every other byte becomes `%XX` (uppercase hex), so names that differ only
/// in case still differ on case-insensitive file systems, and no name can
/// climb out of the directory or hide as a dot file.
pub fn file_name(session: &str) -> String {
    let mut encoded = String::with_capacity(session.len() + 8);
    for byte in session.bytes() {
        if byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-' {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    if encoded.len() > MAX_ENCODED {
        let mut cut = MAX_ENCODED - 20;
        // Never split a %XX escape.
        while encoded.as_bytes()[cut - 1] == b'%' || encoded.as_bytes()[cut - 2] == b'%' {
            cut -= 1;
        }
        encoded.truncate(cut);
        let _ = write!(encoded, "~{:016x}", fnv1a(session));
    }
    encoded.push('.');
    encoded.push_str(EXTENSION);
    encoded
}

pub fn file_path(dir: &Path, session: &str) -> PathBuf {
    dir.join(file_name(session))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe_distinct_and_bounded() {
        assert_eq!(file_name("default"), "default.json");
        assert_eq!(file_name("../x"), "%2E%2E%2Fx.json");
        assert_ne!(file_name("A"), file_name("a"));
        let long = "é".repeat(200);
        let name = file_name(&long);
        assert!(name.len() <= MAX_ENCODED + 5, "{name}");
        assert_ne!(name, file_name(&"é".repeat(199)));
        for name in ["a b", ".", "..", "con", "x/y\\z", "日本", "%41"] {
            let encoded = file_name(name);
            assert!(
                !encoded.starts_with('.') && !encoded.contains('/') && !encoded.contains('\\'),
                "{encoded}"
            );
        }
        assert_ne!(file_name("%41"), file_name("A"));
    }
}
