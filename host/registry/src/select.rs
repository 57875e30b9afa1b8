//! Choosing a tag: the newest semver version that satisfies a requirement.

use semver::{Version, VersionReq};

use crate::reference::tag_version;

/// Tags that parse as semver versions, newest first (ties keep registry order).
pub fn versions_newest_first(tags: &[String]) -> Vec<(Version, &str)> {
    let mut versions: Vec<(Version, &str)> = tags
        .iter()
        .filter_map(|t| tag_version(t).map(|v| (v, t.as_str())))
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions
}

/// The newest tag matching `req` (cargo semantics: pre-releases only when asked for).
pub fn newest_matching<'a>(req: &VersionReq, tags: &'a [String]) -> Option<&'a str> {
    versions_newest_first(tags)
        .into_iter()
        .find(|(v, _)| req.matches(v))
        .map(|(_, t)| t)
}

/// The newest stable version tag, else `latest` if present.
pub fn newest_stable(tags: &[String]) -> Option<&str> {
    versions_newest_first(tags)
        .into_iter()
        .find(|(v, _)| v.pre.is_empty())
        .map(|(_, t)| t)
        .or_else(|| tags.iter().find(|t| *t == "latest").map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn picks_newest_compatible_version() {
        let t = tags(&[
            "1.0.0",
            "1.2.0",
            "v1.10.1",
            "2.0.0",
            "2.1.0-rc.1",
            "latest",
            "dev",
        ]);
        let req = |s| VersionReq::parse(s).unwrap();
        assert_eq!(newest_matching(&req("^1.2"), &t), Some("v1.10.1"));
        assert_eq!(newest_matching(&req("1"), &t), Some("v1.10.1"));
        assert_eq!(newest_matching(&req("~1.2"), &t), Some("1.2.0"));
        assert_eq!(newest_matching(&req("^2"), &t), Some("2.0.0"));
        assert_eq!(newest_matching(&req("^2.1.0-rc.0"), &t), Some("2.1.0-rc.1"));
        assert_eq!(newest_matching(&req("^3"), &t), None);
        assert_eq!(newest_stable(&t), Some("2.0.0"));
        assert_eq!(newest_stable(&tags(&["latest", "dev"])), Some("latest"));
        assert_eq!(newest_stable(&tags(&["dev"])), None);
    }
}
