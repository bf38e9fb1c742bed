//! The app servers rubyrace starts: one list of the kinds, their names in experiment files,
//! what each supports, and the gem it comes from. The experiment file's `server` key, the
//! servers' argv (`experiment::servers`), `rubyrace gemfile` and the doctor's check of the
//! Ruby on PATH all read it, so a new kind is one variant here and its argv there.

use strum::{EnumIter, EnumString, IntoEnumIterator, IntoStaticStr, VariantNames};

/// The app servers rubyrace knows how to start.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    EnumIter,
    EnumString,
    IntoStaticStr,
    VariantNames,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum ServerKind {
    Puma,
    Unicorn,
    Thin,
    Webrick,
    /// A command of the user's own, with placeholders (`experiment::servers::server_command`).
    Custom,
}

/// Where a built-in server comes from: what `rubyrace doctor` requires to see it loads, and
/// what `ruby -S` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gem {
    /// The gem that ships the executable (`rackup` is rack's).
    pub name: &'static str,
    /// What `require` loads.
    pub library: &'static str,
    /// The Ruby constant holding the server's version.
    pub version_constant: &'static str,
    /// The executable the server is started with.
    pub executable: &'static str,
    /// What `gem install` needs to give a Ruby this server (WEBrick's `rackup` is a gem of
    /// its own since rack 3).
    pub install: &'static [&'static str],
    /// Debian's package of it, for the system Ruby.
    pub debian_package: &'static str,
}

impl ServerKind {
    /// The names, as written in experiment files, in declaration order.
    pub const NAMES: &'static [&'static str] = <ServerKind as VariantNames>::VARIANTS;

    /// Every kind, in declaration order.
    pub fn all() -> impl Iterator<Item = ServerKind> {
        ServerKind::iter()
    }

    /// The kind named `s` (exact, lowercase), if any.
    pub fn parse(s: &str) -> Option<ServerKind> {
        s.parse().ok()
    }

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The gem a built-in kind is started from; None for `custom`.
    pub fn gem(self) -> Option<Gem> {
        let gem = |name, library, version_constant, executable, install, debian_package| {
            Some(Gem {
                name,
                library,
                version_constant,
                executable,
                install,
                debian_package,
            })
        };
        match self {
            ServerKind::Puma => gem(
                "puma",
                "puma",
                "Puma::Const::PUMA_VERSION",
                "puma",
                &["puma"],
                "puma",
            ),
            ServerKind::Unicorn => gem(
                "unicorn",
                "unicorn",
                "Unicorn::Const::UNICORN_VERSION",
                "unicorn",
                &["unicorn"],
                "unicorn",
            ),
            ServerKind::Thin => gem(
                "thin",
                "thin",
                "Thin::VERSION::STRING",
                "thin",
                &["thin"],
                "thin",
            ),
            ServerKind::Webrick => gem(
                "rack",
                "webrick",
                "WEBrick::VERSION",
                "rackup",
                &["webrick", "rackup"],
                "ruby-webrick",
            ),
            ServerKind::Custom => None,
        }
    }

    /// The built-in kinds: those with a gem.
    pub fn built_in() -> impl Iterator<Item = (ServerKind, Gem)> {
        ServerKind::all().filter_map(|k| Some((k, k.gem()?)))
    }

    /// How to give a Ruby every built-in server, in words: "`gem install puma unicorn thin
    /// webrick rackup`, or Debian's puma, unicorn, thin and ruby-webrick packages".
    pub fn install_hint() -> String {
        let gems: Vec<&str> = ServerKind::built_in()
            .flat_map(|(_, g)| g.install.iter().copied())
            .collect();
        let packages: Vec<&str> = ServerKind::built_in()
            .map(|(_, g)| g.debian_package)
            .collect();
        let listed = match packages.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => packages.join(""),
        };
        format!(
            "`gem install {}`, or Debian's {listed} packages",
            gems.join(" ")
        )
    }

    /// Whether `processes` > 1 is supported: puma (cluster mode), unicorn (workers) and
    /// custom (through `{processes}`). Thin and WEBrick run one process.
    pub fn supports_processes(self) -> bool {
        matches!(
            self,
            ServerKind::Puma | ServerKind::Unicorn | ServerKind::Custom
        )
    }

    /// Whether `threads` > 1 is supported: puma (thread pool per process), thin
    /// (`--threaded --threadpool-size`) and custom (through `{threads}`). Unicorn workers are
    /// single-threaded; WEBrick uses a thread per connection, which cannot be set.
    pub fn supports_threads(self) -> bool {
        matches!(
            self,
            ServerKind::Puma | ServerKind::Thin | ServerKind::Custom
        )
    }
}

impl std::fmt::Display for ServerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hint is made from the list: every built-in kind's gems and package are in it.
    #[test]
    fn the_install_hint_names_every_built_in_server() {
        let hint = ServerKind::install_hint();
        assert_eq!(
            hint,
            "`gem install puma unicorn thin webrick rackup`, or Debian's puma, unicorn, thin \
             and ruby-webrick packages"
        );
        for (_, gem) in ServerKind::built_in() {
            assert!(hint.contains(gem.debian_package), "{hint}");
            for name in gem.install {
                assert!(hint.contains(name), "{hint}");
            }
        }
    }

    #[test]
    fn names_parse_back_to_their_kinds_and_only_exact_names_parse() {
        let kinds: Vec<ServerKind> = ServerKind::all().collect();
        assert_eq!(kinds.len(), ServerKind::NAMES.len());
        for (kind, name) in kinds.iter().zip(ServerKind::NAMES) {
            assert_eq!(kind.as_str(), *name);
            assert_eq!(ServerKind::parse(name), Some(*kind));
            assert_eq!(kind.to_string(), *name);
        }
        assert_eq!(ServerKind::NAMES[0], "puma");
        assert_eq!(ServerKind::parse("Puma"), None);
        assert_eq!(ServerKind::parse("falcon"), None);
        assert_eq!(ServerKind::parse(""), None);
    }

    #[test]
    fn every_kind_but_custom_has_a_gem() {
        let built_in: Vec<&str> = ServerKind::built_in().map(|(k, _)| k.as_str()).collect();
        assert_eq!(built_in, ["puma", "unicorn", "thin", "webrick"]);
        assert_eq!(ServerKind::Custom.gem(), None);
        assert_eq!(ServerKind::Webrick.gem().unwrap().executable, "rackup");
        assert_eq!(ServerKind::Webrick.gem().unwrap().name, "rack");
    }
}
