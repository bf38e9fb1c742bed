//! Which rubyrace wrote a results directory: the commit its binary was built from, set once
//! by the binary when it starts (`rubyrace --version` prints the same) and stored as
//! `meta.rubyrace_commit` beside `rubyrace_version`.

use std::sync::OnceLock;

static BUILD_COMMIT: OnceLock<String> = OnceLock::new();

/// Sets the commit the running binary was built from; the first call wins.
pub fn set_build_commit(commit: &str) {
    let _ = BUILD_COMMIT.set(commit.to_string());
}

/// The commit set by [`set_build_commit`], if any (a library's tests set none).
pub fn build_commit() -> Option<&'static str> {
    BUILD_COMMIT.get().map(String::as_str)
}
