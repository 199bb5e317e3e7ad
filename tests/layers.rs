//! The one-way import rule of the library (lib.rs, README "Architecture"):
//! `linalg, spatial, validate, io <- model <- dynamics <- contact <- sim <- diff <- plot <-
//! {ocp, learn} <- scene <- {cli, app}`. Every `crate::X` a file under `src/` names (code, doc
//! links and comments alike) must be its own module or one to its left; `ocp` and `learn` do not
//! use each other.

use std::path::{Path, PathBuf};

/// Rank of a top-level module; a file may name modules of lower rank and its own.
fn rank(module: &str) -> Option<u32> {
    Some(match module {
        "linalg" | "spatial" | "validate" | "io" => 0,
        "model" => 1,
        "dynamics" => 2,
        "contact" => 3,
        "sim" => 4,
        "diff" => 5,
        "plot" => 6,
        "ocp" | "learn" => 7,
        "scene" => 8,
        "cli" | "app" | "main" => 9,
        _ => return None,
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file belongs to (`src/diff/sweep.rs` -> `diff`, `src/plot.rs` -> `plot`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// Every `crate::NAME` in `text`, with its line number.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            rest = &rest[at + "crate::".len()..];
            // `contactlab::crate::`-like words are not paths; `$crate::` is a macro's own crate.
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            out.push((i + 1, name));
        }
    }
    out
}

#[test]
fn imports_run_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 50, "found only {} files under {}", files.len(), src.display());
    let mut violations = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" {
            continue; // declares the modules and the prelude
        }
        let own = rank(&module).unwrap_or_else(|| panic!("{}: module `{module}` has no layer here", file.display()));
        let text = std::fs::read_to_string(file).unwrap();
        for (line, name) in crate_paths(&text) {
            let Some(theirs) = rank(&name) else {
                if name != "prelude" {
                    violations.push(format!("{}:{line}: crate::{name} is not a known module", file.display()));
                }
                continue;
            };
            let sibling = theirs == own && name != module;
            if theirs > own || sibling {
                violations.push(format!("{}:{line}: `{module}` must not use crate::{name}", file.display()));
            }
        }
    }
    assert!(violations.is_empty(), "imports against the layer order:\n{}", violations.join("\n"));
}

/// The rule above is checked, not assumed: an upward path is caught.
#[test]
fn an_upward_import_is_caught() {
    let found = crate_paths("use crate::scene::Scene; // and $crate::x, see also crate::ocp");
    assert_eq!(found, vec![(1, "scene".to_string()), (1, "ocp".to_string())]);
    assert!(rank("scene") > rank("sim"));
    assert!(rank("learn") == rank("ocp"));
}
