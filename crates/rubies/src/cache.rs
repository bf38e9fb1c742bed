//! Where rubyrace keeps what it makes once and reuses: the cache directory, and in it the
//! Rubies that `rubyrace ruby build` built (which discovery lists as well). Both the builds
//! and the discovery of Rubies read these paths, so they live apart from either.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::anyhow;

/// rubyrace's cache directory: `$RUBYRACE_CACHE`, else `$XDG_CACHE_HOME/rubyrace`, else
/// `~/.cache/rubyrace` (empty variables count as unset).
pub fn default_cache_dir() -> anyhow::Result<PathBuf> {
    cache_dir_from(|name| std::env::var_os(name)).ok_or_else(|| {
        anyhow!(
            "no cache directory: set RUBYRACE_CACHE (or HOME, or XDG_CACHE_HOME), or pass --cache"
        )
    })
}

/// [`default_cache_dir`] with the variables read through `var`.
pub fn cache_dir_from(var: impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let get = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    get("RUBYRACE_CACHE")
        .or_else(|| get("XDG_CACHE_HOME").map(|x| x.join("rubyrace")))
        .or_else(|| get("HOME").map(|h| h.join(".cache/rubyrace")))
}

/// Where the builds of `cache` live.
pub fn rubies_dir(cache: &Path) -> PathBuf {
    cache.join("rubies")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_dir_follows_the_environment() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| OsString::from(v))
            }
        };
        assert_eq!(
            cache_dir_from(vars(&[("RUBYRACE_CACHE", "/c"), ("HOME", "/h")])),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            cache_dir_from(vars(&[
                ("RUBYRACE_CACHE", ""),
                ("XDG_CACHE_HOME", "/x"),
                ("HOME", "/h")
            ])),
            Some(PathBuf::from("/x/rubyrace"))
        );
        assert_eq!(
            cache_dir_from(vars(&[("HOME", "/h")])),
            Some(PathBuf::from("/h/.cache/rubyrace"))
        );
        assert_eq!(cache_dir_from(vars(&[])), None);
    }
}
