//! The layering that src/lib.rs promises: each pure module uses only the
//! modules listed above it there, and only src/ffi/ touches the emacs crate.

use std::fs;
use std::path::Path;

/// The module order as lib.rs writes it: lines "//! N. name: ...".
fn documented_order() -> Vec<String> {
    let lib = fs::read_to_string("src/lib.rs").expect("src/lib.rs is readable");
    lib.lines()
        .filter_map(|line| line.strip_prefix("//! "))
        .filter_map(|line| {
            let (number, rest) = line.split_once(". ")?;
            number.parse::<u32>().ok()?;
            Some(rest.split(':').next()?.trim().to_string())
        })
        .collect()
}

/// A module's code without its test modules, which may use anything.
fn production_code(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// The crate modules CODE names through `crate::`.
fn used_modules(code: &str) -> Vec<String> {
    let mut used: Vec<String> = code
        .match_indices("crate::")
        .map(|(at, _)| {
            code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect();
    used.sort();
    used.dedup();
    used
}

#[test]
fn every_module_is_in_the_documented_order() {
    let order = documented_order();
    assert!(order.len() > 5, "lib.rs lists the modules: {order:?}");
    assert_eq!(order.last().map(String::as_str), Some("ffi"));
    for entry in fs::read_dir("src").expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if stem != "lib" {
            assert!(
                order.iter().any(|m| m == stem),
                "{stem} is missing from lib.rs's order"
            );
        }
    }
}

#[test]
fn pure_modules_use_only_modules_above_them() {
    let order = documented_order();
    for (place, module) in order.iter().enumerate() {
        let file = Path::new("src").join(format!("{module}.rs"));
        if !file.exists() {
            continue;
        }
        let text = fs::read_to_string(&file).expect("a module is readable");
        for used in used_modules(production_code(&text)) {
            let used_place = order.iter().position(|m| *m == used);
            assert!(
                used_place.is_some_and(|p| p < place),
                "{module} uses {used}, which lib.rs does not list above it"
            );
        }
    }
}

#[test]
fn only_ffi_touches_the_emacs_crate() {
    for entry in fs::read_dir("src").expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        if path.file_name().and_then(|n| n.to_str()) == Some("lib.rs") {
            continue;
        }
        let text = fs::read_to_string(&path).expect("a module is readable");
        for needle in ["emacs::", "use emacs", "extern crate emacs"] {
            assert!(
                !text.contains(needle),
                "{} mentions `{needle}`",
                path.display()
            );
        }
    }
}

#[test]
fn the_checks_see_a_violation() {
    let code = "use crate::model::Item;\nfn f() { crate::store::save(); }\n#[cfg(test)]\nmod tests { use crate::ffi; }";
    assert_eq!(used_modules(production_code(code)), vec!["model", "store"]);
}
