//! The walk over `[services]` (`[services.postgres]`, `[services.redis]`): each key checked
//! with its position, as the rest of the file. Part of the one walk of [`Parser`].

use std::collections::BTreeMap;

use toml_edit::{Item, TableLike};

use super::{describe, Parser};
use crate::services::{
    Lifetime, Listen, PostgresService, RedisService, Reset, Services, DEFAULT_DATABASE, LIFETIMES,
    LISTENS, POSTGRES_RESETS, REDIS_RESETS,
};
use crate::settings::{Kind, SettingValue};

const SERVICES: [&str; 2] = ["postgres", "redis"];
const POSTGRES_KEYS: [&str; 6] = [
    "lifetime", "listen", "database", "reset", "settings", "bin_dir",
];
const REDIS_KEYS: [&str; 5] = ["lifetime", "listen", "reset", "settings", "executable"];
/// Settings rubyrace sets itself (see `service_settings`).
const POSTGRES_RESERVED: &[&str] = &[
    "port",
    "listen_addresses",
    "unix_socket_directories",
    "data_directory",
    "config_file",
    "hba_file",
    "ident_file",
];
const REDIS_RESERVED: &[&str] = &[
    "port",
    "bind",
    "unixsocket",
    "unixsocketperm",
    "dir",
    "daemonize",
    "logfile",
];

impl Parser<'_> {
    /// `[services]`: a table with `postgres` and/or `redis` tables (an empty table starts
    /// the service with its defaults).
    pub(crate) fn services(&mut self, item: &Item) -> Services {
        let mut services = Services::default();
        let Some(table) = item.as_table_like() else {
            self.error(
                &item.span(),
                "services",
                format!("expected a table, found {}", describe(item)),
                Some("e.g. [services.postgres] and [services.redis]".into()),
            );
            return services;
        };
        for (name, value) in table.iter() {
            let key = format!("services.{name}");
            let key_span = table.key(name).and_then(|k| k.span());
            let Some(t) = value.as_table_like() else {
                if SERVICES.contains(&name) {
                    self.error(
                        &value.span(),
                        &key,
                        format!("expected a table, found {}", describe(value)),
                        Some(format!(
                            "write [services.{name}] (an empty table takes the defaults)"
                        )),
                    );
                } else {
                    self.unknown_key(&key_span, &key, name, &SERVICES);
                }
                continue;
            };
            match name {
                "postgres" => services.postgres = Some(self.postgres(&key, t)),
                "redis" => services.redis = Some(self.redis(&key, t)),
                other => self.unknown_key(&key_span, &key, other, &SERVICES),
            }
        }
        services
    }

    fn postgres(&mut self, prefix: &str, t: &dyn TableLike) -> PostgresService {
        let mut service = PostgresService {
            lifetime: Lifetime::Run,
            listen: Listen::Tcp,
            database: DEFAULT_DATABASE.into(),
            reset: Reset::None,
            settings: BTreeMap::new(),
            bin_dir: None,
        };
        let mut reset_span = None;
        for (sub, value) in t.iter() {
            let key = format!("{prefix}.{sub}");
            match sub {
                "lifetime" => service.lifetime = self.lifetime(&key, value),
                "listen" => service.listen = self.listen(&key, value),
                "reset" => {
                    reset_span = value.span();
                    service.reset = match self.one_of(&key, POSTGRES_RESETS, value).as_deref() {
                        Some("template") => Reset::Template,
                        _ => Reset::None,
                    }
                }
                "database" => {
                    if let Some(name) = self.string(&key, value) {
                        if is_identifier(&name) {
                            service.database = name;
                        } else {
                            self.error(
                                &value.span(),
                                &key,
                                format!("expected a database name of lower-case letters, digits and _, starting with a letter, found {name:?}"),
                                Some("it goes into DATABASE_URL and into SQL unquoted, e.g. database = \"forum\"".into()),
                            );
                        }
                    }
                }
                "settings" => {
                    service.settings = self.service_settings(&key, value, POSTGRES_RESERVED)
                }
                "bin_dir" => {
                    if let Some(dir) = self.string(&key, value) {
                        service.bin_dir = Some(self.resolve_path(&dir));
                    }
                }
                other => self.unknown_key(
                    &t.key(other).and_then(|k| k.span()).or(value.span()),
                    &key,
                    other,
                    &POSTGRES_KEYS,
                ),
            }
        }
        if service.reset == Reset::Template && service.lifetime == Lifetime::Trial {
            self.error(
                &reset_span,
                &format!("{prefix}.reset"),
                "reset = \"template\" with lifetime = \"trial\": every trial has a new server already, set up from scratch",
                Some("use one of them: lifetime = \"run\" with reset = \"template\" is faster".into()),
            );
        }
        service
    }

    fn redis(&mut self, prefix: &str, t: &dyn TableLike) -> RedisService {
        let mut service = RedisService::default();
        for (sub, value) in t.iter() {
            let key = format!("{prefix}.{sub}");
            match sub {
                "lifetime" => service.lifetime = self.lifetime(&key, value),
                "listen" => service.listen = self.listen(&key, value),
                "reset" => {
                    service.reset = match self.one_of(&key, REDIS_RESETS, value).as_deref() {
                        Some("flush") => Reset::Flush,
                        _ => Reset::None,
                    }
                }
                "settings" => service.settings = self.service_settings(&key, value, REDIS_RESERVED),
                "executable" => {
                    if let Some(path) = self.string(&key, value) {
                        service.executable = Some(if path.contains('/') {
                            self.resolve_path(&path)
                        } else {
                            path.into()
                        });
                    }
                }
                other => self.unknown_key(
                    &t.key(other).and_then(|k| k.span()).or(value.span()),
                    &key,
                    other,
                    &REDIS_KEYS,
                ),
            }
        }
        service
    }

    fn lifetime(&mut self, key: &str, value: &Item) -> Lifetime {
        match self.one_of(key, LIFETIMES, value).as_deref() {
            Some("trial") => Lifetime::Trial,
            _ => Lifetime::Run,
        }
    }

    fn listen(&mut self, key: &str, value: &Item) -> Listen {
        match self.one_of(key, LISTENS, value).as_deref() {
            Some("unix") => Listen::Unix,
            _ => Listen::Tcp,
        }
    }

    fn one_of(
        &mut self,
        key: &str,
        options: &'static [&'static str],
        value: &Item,
    ) -> Option<String> {
        match self.check_value(key, Kind::OneOf(options), value) {
            Some(SettingValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    fn string(&mut self, key: &str, value: &Item) -> Option<String> {
        match self.check_value(key, Kind::Str, value) {
            Some(SettingValue::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// A table of server settings: names as the server spells them, values as strings
    /// (numbers and booleans are accepted and written as TOML writes them). The `reserved`
    /// ones are rubyrace's: where the server listens and keeps its data, which rubyrace
    /// chooses and hands to the app (`settings = { port = 54329 }` made PostgreSQL listen
    /// elsewhere and the run wait 60 s for it).
    fn service_settings(
        &mut self,
        key: &str,
        value: &Item,
        reserved: &[&str],
    ) -> BTreeMap<String, String> {
        let mut settings = BTreeMap::new();
        let Some(t) = value.as_table_like() else {
            self.error(
                &value.span(),
                key,
                format!("expected a table, found {}", describe(value)),
                Some("e.g. settings = { shared_buffers = \"128MB\", fsync = \"off\" }".into()),
            );
            return settings;
        };
        for (name, v) in t.iter() {
            let text = match v.as_value() {
                Some(toml_edit::Value::String(s)) => Some(s.value().clone()),
                Some(toml_edit::Value::Integer(i)) => Some(i.value().to_string()),
                Some(toml_edit::Value::Float(f)) => Some(f.value().to_string()),
                Some(toml_edit::Value::Boolean(b)) => Some(b.value().to_string()),
                _ => None,
            };
            let valid_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-');
            match text {
                Some(_) if reserved.contains(&name) => self.error(
                    &t.key(name).and_then(|k| k.span()),
                    &format!("{key}.{name}"),
                    format!("{name} is rubyrace's to set: it chooses where the server listens and keeps its data, and gives the app its URL"),
                    Some("use listen = \"tcp\" or \"unix\" to choose how the app connects".into()),
                ),
                Some(_) if !valid_name => self.error(
                    &t.key(name).and_then(|k| k.span()),
                    &format!("{key}.{name}"),
                    format!("{name:?} is not a setting name: letters, digits, _, . and - only"),
                    None,
                ),
                Some(text) if text.contains(['\n', '\r', '\0']) => self.error(
                    &v.span(),
                    &format!("{key}.{name}"),
                    "a setting's value cannot contain a line break or NUL",
                    None,
                ),
                Some(text) => {
                    settings.insert(name.to_string(), text);
                }
                None => self.error(
                    &v.span(),
                    &format!("{key}.{name}"),
                    format!(
                        "expected a string, number or boolean, found {}",
                        describe(v)
                    ),
                    None,
                ),
            }
        }
        settings
    }
}

/// A name usable unquoted in SQL and in a URL: `[a-z][a-z0-9_]*`, at most 63 bytes
/// (PostgreSQL's NAMEDATALEN - 1), leaving room for a trial suffix.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && name.len() <= 40
}
