//! Where rubyrace's Ruby side lives: the probe loaded into every server process and the
//! bundled apps (`ruby/` of the source tree, or next to an installed binary).

use std::path::PathBuf;

/// rubyrace's Ruby support directory (`ruby/`: bundled apps, probe, scripts).
///
/// Looked up in order: `$RUBYRACE_RUBY_DIR`; `ruby/` next to the executable, or in
/// `../share/rubyrace/` of an installed one; the source tree of a development build
/// (`target/release/rubyrace` → `ruby/`); the source tree this crate was built from.
pub fn ruby_support_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("RUBYRACE_RUBY_DIR") {
        return PathBuf::from(dir);
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(bin) = exe.parent() {
            for candidate in [
                bin.join("ruby"),
                bin.join("../share/rubyrace/ruby"),
                bin.join("../../ruby"),
            ] {
                if candidate.join("apps").is_dir() {
                    return candidate.canonicalize().unwrap_or(candidate);
                }
            }
        }
    }
    let source_tree = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../ruby"));
    source_tree.canonicalize().unwrap_or(source_tree)
}

/// The bundled apps (`ruby/apps/`).
pub fn bundled_apps_dir() -> PathBuf {
    ruby_support_dir().join("apps")
}
