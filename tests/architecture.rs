//! The layering that src/lib.rs promises: each pure module uses only the
//! modules listed above it there, and only src/ffi/ touches the emacs crate.
//! A module may be one file, src/NAME.rs, or a directory, src/NAME/, whose
//! files each keep to the module's place and use one another without a
//! cycle.  A file may use what its mod.rs defines, not what mod.rs takes
//! from another file: that would be a use of the other file, hidden.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

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

/// The files of MODULE: src/MODULE.rs, or every .rs file in src/MODULE/.
fn module_files(module: &str) -> Vec<PathBuf> {
    let file = Path::new("src").join(format!("{module}.rs"));
    if file.exists() {
        return vec![file];
    }
    let mut files: Vec<PathBuf> = match fs::read_dir(Path::new("src").join(module)) {
        Ok(entries) => entries
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|path| path.extension().and_then(|e| e.to_str()) == Some("rs"))
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

/// Every .rs file under DIR, its subdirectories too.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).expect("a directory is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().and_then(|e| e.to_str()) == Some("rs") {
            files.push(path);
        }
    }
    files
}

/// A module's code without its test modules, which may use anything.
fn production_code(text: &str) -> &str {
    match text.find("#[cfg(test)]\nmod ") {
        Some(at) => &text[..at],
        None => text,
    }
}

/// The name TEXT starts with, or `*` for a glob.
fn identifier(text: &str) -> String {
    if text.starts_with('*') {
        return "*".to_string();
    }
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// The names CODE reaches through PREFIX (`crate::`, `super::`): the
/// first segment after it, each name of a group `PREFIX{a::X, b}` too.
fn names_after(code: &str, prefix: &str) -> Vec<String> {
    let mut used = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let rest = &code[at + prefix.len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let mut depth = 0;
                let mut start = 0;
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => {
                            used.push(identifier(group[start..i].trim_start()));
                            break;
                        }
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            used.push(identifier(group[start..i].trim_start()));
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
            }
            None => used.push(identifier(rest)),
        }
    }
    used.retain(|name| !name.is_empty());
    used.sort();
    used.dedup();
    used
}

/// The crate modules CODE names through `crate::`.
fn used_modules(code: &str) -> Vec<String> {
    names_after(code, "crate::")
}

/// The names mod.rs (its production CODE) takes from its files with `use`
/// (`pub use writer::{flush, save_now};`), each with the file it is in.
fn taken_from_files(code: &str, files: &[String]) -> BTreeMap<String, String> {
    let mut taken = BTreeMap::new();
    for statement in code.split(';') {
        // Without the comments and attributes before it.
        let statement: Vec<&str> = statement
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with("//") && !line.starts_with("#["))
            .collect();
        let statement = statement.join(" ");
        let Some(path) = statement
            .strip_prefix("pub use ")
            .or_else(|| statement.strip_prefix("pub(crate) use "))
            .or_else(|| statement.strip_prefix("use "))
        else {
            continue;
        };
        let Some((file, names)) = path.split_once("::") else {
            continue;
        };
        let file = file.trim_start_matches("self::");
        if !files.iter().any(|f| f == file) {
            continue;
        }
        let names = names.trim().trim_start_matches('{').trim_end_matches('}');
        for name in names.split(',') {
            // The name bound: the last segment, or what `as` renames it to.
            let name = name.rsplit(" as ").next().unwrap_or(name);
            let name = name.rsplit("::").next().unwrap_or(name).trim();
            if !name.is_empty() {
                taken.insert(name.to_string(), file.to_string());
            }
        }
    }
    taken
}

/// A cycle in GRAPH (each node and the nodes it uses), if there is one.
fn find_cycle(graph: &BTreeMap<String, Vec<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.iter().any(|n| n == node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.push(node.to_string());
        None
    }
    let mut done = Vec::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
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
        for file in module_files(module) {
            let text = fs::read_to_string(&file).expect("a module is readable");
            for used in used_modules(production_code(&text)) {
                let used_place = order.iter().position(|m| *m == used);
                assert!(
                    used_place.is_some_and(|p| p < place),
                    "{} uses {used}, which lib.rs does not list above {module}",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn the_files_of_a_module_use_one_another_without_a_cycle() {
    let order = documented_order();
    let mut directories = 0;
    for module in &order {
        let dir = Path::new("src").join(module);
        if !dir.is_dir() {
            continue;
        }
        directories += 1;
        let files = module_files(module);
        let stem = |file: &Path| {
            file.file_stem()
                .and_then(|s| s.to_str())
                .expect("a file name")
                .to_string()
        };
        let siblings: Vec<String> = files
            .iter()
            .map(|f| stem(f))
            .filter(|s| s != "mod")
            .collect();
        let mod_rs = fs::read_to_string(dir.join("mod.rs")).expect("a mod.rs");
        let taken = taken_from_files(production_code(&mod_rs), &siblings);
        let mut graph = BTreeMap::new();
        for file in &files {
            if stem(file) == "mod" {
                continue;
            }
            let text = fs::read_to_string(file).expect("a module is readable");
            let mut uses = Vec::new();
            for name in names_after(production_code(&text), "super::") {
                assert!(
                    name != "*",
                    "{} uses super::*: name what it uses, so that this test sees it",
                    file.display()
                );
                if siblings.contains(&name) {
                    uses.push(name);
                } else if let Some(other) = taken.get(&name) {
                    panic!(
                        "{} uses super::{name}, which mod.rs takes from {other}.rs: use super::{other}::{name}",
                        file.display()
                    );
                }
                // Else something mod.rs itself defines, which any file of
                // the module may use.
            }
            graph.insert(stem(file), uses);
        }
        if let Some(cycle) = find_cycle(&graph) {
            panic!("the files of src/{module}/ use one another in a cycle: {cycle:?}");
        }
    }
    assert!(
        directories > 0,
        "no module is a directory: this test checks nothing"
    );
}

#[test]
fn only_ffi_touches_the_emacs_crate() {
    for path in rust_files(Path::new("src")) {
        if path.starts_with("src/ffi") || path == Path::new("src/lib.rs") {
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
    let code = "use super::lock::{lock, lock_dir};\nuse super::{names::file_name, record::{A, B}};\nfn f() { super::writer::flush(); }";
    assert_eq!(
        names_after(code, "super::"),
        vec!["lock", "names", "record", "writer"]
    );
    assert_eq!(names_after("use super::*;", "super::"), vec!["*"]);
    let files = vec!["atomic".to_string(), "writer".to_string()];
    let taken = taken_from_files(
        "mod atomic;\nmod writer;\n/// The file.\npub use atomic::{\n    replace_file,\n    FileId as Id,\n};\npub use writer::flush;\nuse std::io;\npub struct Session;",
        &files,
    );
    assert_eq!(
        taken.into_iter().collect::<Vec<_>>(),
        vec![
            ("Id".to_string(), "atomic".to_string()),
            ("flush".to_string(), "writer".to_string()),
            ("replace_file".to_string(), "atomic".to_string()),
        ]
    );
    let graph = |edges: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
        edges
            .iter()
            .map(|(from, to)| (from.to_string(), to.iter().map(|t| t.to_string()).collect()))
            .collect()
    };
    let acyclic = graph(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &[])]);
    assert_eq!(find_cycle(&acyclic), None);
    let cyclic = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"])]);
    assert_eq!(
        find_cycle(&cyclic),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
