//! Plugin references: `[oci://]host[:port]/namespace/name[:tag|:semver-req][@sha256:hex]`.

use std::fmt;

use semver::{Version, VersionReq};

use crate::error::{RegistryError, Result};

/// URL scheme that marks a `--plugin` value as a registry reference.
pub const OCI_SCHEME: &str = "oci://";

/// What part of a repository a reference selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// An exact tag (`:1.2.0`, `:latest`).
    Tag(String),
    /// The newest tag satisfying a semver requirement (`:^1.2`, `:1`, `:~0.3`).
    Requirement(VersionReq),
    /// The newest stable semver tag (no tag given), else `latest`.
    Newest,
    /// Exactly this manifest digest; the tag, if any, is informational.
    Digest { tag: Option<String>, digest: String },
}

/// A parsed plugin reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginRef {
    /// `host[:port]`.
    pub registry: String,
    /// `namespace/name` (any depth).
    pub repository: String,
    /// Tag, version requirement or digest.
    pub selector: Selector,
}

impl PluginRef {
    /// Parses a reference, with or without the `oci://` prefix.
    pub fn parse(text: &str) -> Result<Self> {
        let invalid = |reason: &str| RegistryError::InvalidReference {
            reference: text.to_string(),
            reason: reason.to_string(),
        };
        let body = text.strip_prefix(OCI_SCHEME).unwrap_or(text);
        let (body, digest) = match body.split_once('@') {
            Some((rest, digest)) => {
                validate_digest(digest).map_err(|r| invalid(&r))?;
                (rest, Some(digest.to_string()))
            }
            None => (body, None),
        };
        let (registry, path) = body.split_once('/').ok_or_else(|| {
            invalid("expected host/namespace/name, e.g. ghcr.io/acme/sql-env:1.0.0")
        })?;
        if !looks_like_host(registry) {
            return Err(invalid(&format!(
                "`{registry}` is not a registry host (use host[:port], e.g. ghcr.io or 127.0.0.1:5000)"
            )));
        }
        let last_slash = path.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match path[last_slash..].find(':') {
            Some(i) => (&path[..last_slash + i], Some(&path[last_slash + i + 1..])),
            None => (path, None),
        };
        validate_repository(repository).map_err(|r| invalid(&r))?;
        let selector = match (tag, digest) {
            (tag, Some(digest)) => {
                if let Some(t) = tag {
                    if !is_oci_tag(t) {
                        return Err(invalid("a tag next to a digest must be a plain tag"));
                    }
                }
                Selector::Digest {
                    tag: tag.map(str::to_string),
                    digest,
                }
            }
            (None, None) => Selector::Newest,
            (Some(""), None) => return Err(invalid("empty tag after `:`")),
            (Some(tag), None) => tag_selector(tag).map_err(|r| invalid(&r))?,
        };
        Ok(Self {
            registry: registry.to_string(),
            repository: repository.to_string(),
            selector,
        })
    }

    /// True when `text` uses the `oci://` scheme.
    pub fn is_oci(text: &str) -> bool {
        text.starts_with(OCI_SCHEME)
    }

    /// `host/repository` without any tag.
    pub fn repository_url(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// This repository at an exact tag.
    pub fn with_tag(&self, tag: &str) -> Self {
        Self {
            selector: Selector::Tag(tag.to_string()),
            ..self.clone()
        }
    }

    /// This repository at an exact digest (keeping `tag` for display).
    pub fn with_digest(&self, tag: Option<&str>, digest: &str) -> Self {
        Self {
            selector: Selector::Digest {
                tag: tag.map(str::to_string),
                digest: digest.to_string(),
            },
            ..self.clone()
        }
    }

    /// The exact tag, when the selector is one.
    pub fn tag(&self) -> Option<&str> {
        match &self.selector {
            Selector::Tag(t) => Some(t),
            Selector::Digest { tag, .. } => tag.as_deref(),
            _ => None,
        }
    }

    pub(crate) fn to_oci(&self) -> oci_client::Reference {
        match &self.selector {
            Selector::Digest { digest, .. } => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                digest.clone(),
            ),
            Selector::Tag(tag) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone(),
            ),
            Selector::Requirement(_) | Selector::Newest => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                "latest".to_string(),
            ),
        }
    }
}

impl fmt::Display for PluginRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        match &self.selector {
            Selector::Tag(t) => write!(f, ":{t}"),
            Selector::Requirement(r) => write!(f, ":{r}"),
            Selector::Newest => Ok(()),
            Selector::Digest { tag, digest } => {
                if let Some(t) = tag {
                    write!(f, ":{t}")?;
                }
                write!(f, "@{digest}")
            }
        }
    }
}

/// Full versions are exact tags; partial versions and operators are requirements.
fn tag_selector(tag: &str) -> std::result::Result<Selector, String> {
    let is_partial_version = tag.split('.').count() < 3
        && tag
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if is_oci_tag(tag) && !is_partial_version {
        return Ok(Selector::Tag(tag.to_string()));
    }
    VersionReq::parse(tag)
        .map(Selector::Requirement)
        .map_err(|e| format!("`{tag}` is neither a tag nor a semver requirement: {e}"))
}

/// Parses a tag as a semver version (`1.2.0` or `v1.2.0`).
pub fn tag_version(tag: &str) -> Option<Version> {
    Version::parse(tag.strip_prefix('v').unwrap_or(tag)).ok()
}

/// The OCI distribution tag grammar `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn is_oci_tag(tag: &str) -> bool {
    let mut bytes = tag.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphanumeric() || b == b'_')
        && tag.len() <= 128
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

fn looks_like_host(part: &str) -> bool {
    !part.is_empty()
        && (part.contains('.') || part.contains(':') || part == "localhost")
        && part
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b))
}

/// `sha256:` followed by 64 lowercase hex digits.
pub fn validate_digest(digest: &str) -> std::result::Result<(), String> {
    match digest.strip_prefix("sha256:") {
        Some(hex)
            if hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) =>
        {
            Ok(())
        }
        _ => Err(format!(
            "`{digest}` is not a sha256 digest (sha256:<64 lowercase hex>)"
        )),
    }
}

/// OCI repository names: lowercase components separated by `/`.
fn validate_repository(repo: &str) -> std::result::Result<(), String> {
    if repo.is_empty() {
        return Err("missing repository name".into());
    }
    for component in repo.split('/') {
        let ok = !component.is_empty()
            && component
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && component
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric())
            && component
                .bytes()
                .last()
                .is_some_and(|b| b.is_ascii_alphanumeric());
        if !ok {
            return Err(format!(
                "repository component `{component}` must be lowercase letters, digits and . _ - (not at the ends)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_tags_requirements_and_digests() {
        let r = PluginRef::parse("oci://127.0.0.1:5000/skyrl/sql-env:1.2.0").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "skyrl/sql-env");
        assert_eq!(r.selector, Selector::Tag("1.2.0".into()));
        assert_eq!(r.to_string(), "127.0.0.1:5000/skyrl/sql-env:1.2.0");

        let r = PluginRef::parse("ghcr.io/a/b/c:^1.2").unwrap();
        assert_eq!(r.repository, "a/b/c");
        assert!(matches!(r.selector, Selector::Requirement(_)));
        assert!(matches!(
            PluginRef::parse("ghcr.io/a/b:1").unwrap().selector,
            Selector::Requirement(_)
        ));
        assert!(matches!(
            PluginRef::parse("ghcr.io/a/b:1.4").unwrap().selector,
            Selector::Requirement(_)
        ));
        assert_eq!(
            PluginRef::parse("ghcr.io/a/b:latest").unwrap().selector,
            Selector::Tag("latest".into())
        );
        assert_eq!(
            PluginRef::parse("ghcr.io/a/b").unwrap().selector,
            Selector::Newest
        );

        let r = PluginRef::parse(&format!("oci://localhost:5000/a/b@{D}")).unwrap();
        assert_eq!(
            r.selector,
            Selector::Digest {
                tag: None,
                digest: D.into()
            }
        );
        let r = PluginRef::parse(&format!("localhost/a/b:1.0.0@{D}")).unwrap();
        assert_eq!(r.tag(), Some("1.0.0"));
        assert_eq!(r.to_string(), format!("localhost/a/b:1.0.0@{D}"));
    }

    #[test]
    fn rejects_malformed_references_with_reasons() {
        for (text, needle) in [
            ("oci://sql-env.wasm", "host/namespace/name"),
            ("oci://skyrl/sql:1.0.0", "not a registry host"),
            ("oci://ghcr.io/Acme/sql:1.0.0", "lowercase"),
            ("oci://ghcr.io/a/b@sha256:abc", "not a sha256 digest"),
            ("oci://ghcr.io/a/b:", "empty tag"),
            (
                "oci://ghcr.io/a/b:>=>1",
                "neither a tag nor a semver requirement",
            ),
        ] {
            let err = PluginRef::parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn tag_versions_accept_a_v_prefix() {
        assert_eq!(tag_version("v1.2.3"), Some(Version::new(1, 2, 3)));
        assert_eq!(tag_version("latest"), None);
    }
}
