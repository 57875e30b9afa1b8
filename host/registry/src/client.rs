//! Push, pull, tag listing and catalog against an OCI registry, with every
//! download verified against its digest and stored in a [`PluginStore`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, ImageLayer};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OciDescriptor, OciImageManifest, OCI_IMAGE_MEDIA_TYPE};
use oci_client::Client;
use oci_wasm::{WasmClient, WasmConfig, WASM_LAYER_MEDIA_TYPE, WASM_MANIFEST_CONFIG_MEDIA_TYPE};
use serde::Serialize;

use crate::auth::registry_auth;
use crate::error::{RegistryError, Result};
use crate::reference::{PluginRef, Selector};
use crate::select::{newest_matching, newest_stable, versions_newest_first};
use crate::store::{sha256_digest, PluginStore};

/// How to talk to registries.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Registries (`host:port`) spoken to over plain HTTP. Loopback hosts
    /// (localhost, 127.0.0.0/8, [::1]) always are, like docker does.
    pub insecure: Vec<String>,
    /// TCP connect timeout.
    pub connect_timeout: Duration,
    /// Read timeout for each response.
    pub read_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            insecure: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(120),
        }
    }
}

impl ClientOptions {
    /// Defaults plus `SKYRL_INSECURE_REGISTRIES` (comma-separated `host:port`).
    pub fn from_env() -> Self {
        let insecure = std::env::var("SKYRL_INSECURE_REGISTRIES")
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Self {
            insecure,
            ..Self::default()
        }
    }

    fn is_insecure(&self, registry: &str) -> bool {
        let host = match registry.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => registry,
        };
        host == "localhost"
            || host == "[::1]"
            || host.starts_with("127.")
            || self.insecure.iter().any(|r| r == registry)
    }
}

/// A plugin pushed to a registry.
#[derive(Debug, Clone, Serialize)]
pub struct PushReport {
    /// `host/repo:tag@digest`.
    pub reference: String,
    /// Digest of the pushed manifest (what to pin).
    pub manifest_digest: String,
    /// Digest of the component layer.
    pub layer_digest: String,
    /// Component size in bytes.
    pub size_bytes: u64,
}

/// A plugin pulled (or found in the cache), verified.
#[derive(Debug, Clone, Serialize)]
pub struct PulledPlugin {
    /// The exact reference: `host/repo:tag@manifest-digest`.
    pub reference: String,
    /// The tag it was resolved through, if any.
    pub tag: Option<String>,
    /// Manifest digest.
    pub manifest_digest: String,
    /// Component layer digest.
    pub layer_digest: String,
    /// The verified component in the local cache.
    pub path: PathBuf,
    /// Manifest annotations (title, version, skyrl plugin kind, ...).
    pub annotations: BTreeMap<String, String>,
    /// Imports/exports recorded in the artifact config.
    pub component_exports: Vec<String>,
    /// True when nothing was downloaded.
    pub from_cache: bool,
}

/// One tag of a repository.
#[derive(Debug, Clone, Serialize)]
pub struct TagInfo {
    pub tag: String,
    /// Set when the tag is a semver version.
    pub version: Option<String>,
}

/// A client for one process: a small tokio runtime driving `oci-client`.
pub struct RegistryClient {
    runtime: tokio::runtime::Runtime,
    options: ClientOptions,
    store: PluginStore,
}

impl RegistryClient {
    /// A client caching into `store`.
    pub fn new(store: PluginStore, options: ClientOptions) -> Result<Self> {
        // rustls needs one process-wide crypto provider; ignore "already installed".
        let _ = rustls::crypto::ring::default_provider().install_default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| RegistryError::io("starting the network runtime", PathBuf::new(), e))?;
        Ok(Self {
            runtime,
            options,
            store,
        })
    }

    /// A client with the default cache and `SKYRL_INSECURE_REGISTRIES`.
    pub fn from_env() -> Result<Self> {
        Self::new(
            PluginStore::new(PluginStore::default_root()),
            ClientOptions::from_env(),
        )
    }

    /// The local cache.
    pub fn store(&self) -> &PluginStore {
        &self.store
    }

    fn oci(&self, registry: &str) -> WasmClient {
        let protocol = if self.options.is_insecure(registry) {
            ClientProtocol::HttpsExcept(vec![registry.to_string()])
        } else {
            ClientProtocol::Https
        };
        WasmClient::new(Client::new(ClientConfig {
            protocol,
            connect_timeout: Some(self.options.connect_timeout),
            read_timeout: Some(self.options.read_timeout),
            platform_resolver: None,
            user_agent: concat!("skyrl/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        }))
    }

    /// Pushes a component file as a Wasm OCI artifact at `target` (an exact tag).
    /// `annotations` go on the manifest (creation time added unless given).
    pub fn push(
        &self,
        file: &Path,
        target: &PluginRef,
        mut annotations: BTreeMap<String, String>,
    ) -> Result<PushReport> {
        annotations
            .entry(crate::annotations::CREATED.to_string())
            .or_insert_with(|| {
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            });
        let Selector::Tag(tag) = &target.selector else {
            return Err(RegistryError::InvalidReference {
                reference: target.to_string(),
                reason: "push needs an exact tag, e.g. host/ns/name:1.0.0".into(),
            });
        };
        let raw = std::fs::read(file).map_err(|e| RegistryError::io("reading", file, e))?;
        let size_bytes = raw.len() as u64;
        if !is_component(&raw) {
            return Err(RegistryError::NotAWasmArtifact {
                reference: file.display().to_string(),
                detail: "not a WebAssembly component (core modules must be wrapped with `wasm-tools component new`)".into(),
            });
        }
        let (config, layer): (WasmConfig, ImageLayer) =
            WasmConfig::from_raw_component(raw.clone(), None).map_err(|e| {
                RegistryError::NotAWasmArtifact {
                    reference: file.display().to_string(),
                    detail: format!("not a WebAssembly component: {e:#}"),
                }
            })?;
        let layer_digest = sha256_digest(&raw);
        let client = self.oci(&target.registry);
        let auth = registry_auth(&target.registry)?;
        let image = target.to_oci();
        let what = target.to_string();
        self.runtime.block_on(async {
            client
                .push(&image, &auth, layer, config, Some(annotations))
                .await
                .map_err(|e| classify_anyhow(&target.registry, &what, e))?;
            let (bytes, _) = client
                .pull_manifest_raw(&image, &auth, &[OCI_IMAGE_MEDIA_TYPE])
                .await
                .map_err(|e| classify(&target.registry, &what, e))?;
            let manifest_digest = sha256_digest(&bytes);
            self.store.put_manifest(&manifest_digest, &bytes)?;
            self.store.put_blob(&raw)?;
            Ok(PushReport {
                reference: format!("{}:{tag}@{manifest_digest}", target.repository_url()),
                manifest_digest,
                layer_digest,
                size_bytes,
            })
        })
    }

    /// All tags of the repository `reference` names (paginated).
    pub fn tags(&self, reference: &PluginRef) -> Result<Vec<String>> {
        let client = self.oci(&reference.registry);
        let auth = registry_auth(&reference.registry)?;
        let image = reference.with_tag("latest").to_oci();
        let what = reference.repository_url();
        self.runtime.block_on(async {
            let mut tags = Vec::new();
            loop {
                let page = client
                    .list_tags(&image, &auth, Some(1000), tags.last().map(String::as_str))
                    .await
                    .map_err(|e| classify(&reference.registry, &what, e))?;
                let n = page.tags.len();
                tags.extend(page.tags);
                if n < 1000 {
                    return Ok(tags);
                }
            }
        })
    }

    /// Tags with their semver versions, newest version first, then other tags.
    pub fn tag_infos(&self, reference: &PluginRef) -> Result<Vec<TagInfo>> {
        let tags = self.tags(reference)?;
        let versions = versions_newest_first(&tags);
        let mut out: Vec<TagInfo> = versions
            .iter()
            .map(|(v, t)| TagInfo {
                tag: t.to_string(),
                version: Some(v.to_string()),
            })
            .collect();
        out.extend(
            tags.iter()
                .filter(|t| !versions.iter().any(|(_, vt)| vt == t))
                .map(|t| TagInfo {
                    tag: t.clone(),
                    version: None,
                }),
        );
        Ok(out)
    }

    /// Repositories in a registry's catalog (paginated).
    pub fn catalog(&self, registry: &str) -> Result<Vec<String>> {
        let client = self.oci(registry);
        let auth = registry_auth(registry)?;
        let image =
            oci_client::Reference::with_tag(registry.into(), "catalog".into(), "latest".into());
        self.runtime.block_on(async {
            let mut repos: Vec<String> = Vec::new();
            loop {
                let page = client
                    .catalog(&image, &auth, Some(1000), repos.last().map(String::as_str))
                    .await
                    .map_err(|e| classify(registry, "the catalog", e))?;
                let n = page.repositories.len();
                repos.extend(page.repositories);
                if n < 1000 {
                    return Ok(repos);
                }
            }
        })
    }

    /// Turns a requirement or missing tag into an exact tag by listing tags.
    pub fn resolve_tag(&self, reference: &PluginRef) -> Result<PluginRef> {
        match &reference.selector {
            Selector::Tag(_) | Selector::Digest { .. } => Ok(reference.clone()),
            Selector::Requirement(req) => {
                let tags = self.tags(reference)?;
                let tag = newest_matching(req, &tags).ok_or_else(|| {
                    RegistryError::NoMatchingVersion {
                        repository: reference.repository_url(),
                        requirement: req.to_string(),
                        available: list_or_none(&tags),
                    }
                })?;
                Ok(reference.with_tag(tag))
            }
            Selector::Newest => {
                let tags = self.tags(reference)?;
                let tag = newest_stable(&tags).ok_or_else(|| RegistryError::NoMatchingVersion {
                    repository: reference.repository_url(),
                    requirement: "newest stable version or `latest`".into(),
                    available: list_or_none(&tags),
                })?;
                Ok(reference.with_tag(tag))
            }
        }
    }

    /// The manifest annotations of what `reference` resolves to, without
    /// downloading the component: `(exact reference, annotations)`.
    pub fn describe(&self, reference: &PluginRef) -> Result<(PluginRef, BTreeMap<String, String>)> {
        let resolved = self.resolve_tag(reference)?;
        let client = self.oci(&resolved.registry);
        let auth = registry_auth(&resolved.registry)?;
        let (_, digest, manifest) = self
            .runtime
            .block_on(fetch_manifest(&client, &resolved, &auth))?;
        let exact = resolved.with_digest(resolved.tag(), &digest);
        Ok((exact, manifest.annotations.unwrap_or_default()))
    }

    /// Resolves, downloads (unless cached) and verifies a plugin. A digest
    /// reference whose manifest and layer are cached needs no network.
    pub fn pull(&self, reference: &PluginRef) -> Result<PulledPlugin> {
        if let Selector::Digest { tag, digest } = &reference.selector {
            if let Some(hit) = self.cached(reference, tag.clone(), digest)? {
                return Ok(hit);
            }
        }
        let resolved = self.resolve_tag(reference)?;
        let client = self.oci(&resolved.registry);
        let auth = registry_auth(&resolved.registry)?;
        let image = resolved.to_oci();
        let what = resolved.to_string();
        let registry = resolved.registry.as_str();
        self.runtime.block_on(async {
            let (bytes, manifest_digest, manifest) =
                fetch_manifest(&client, &resolved, &auth).await?;
            let layer = &manifest.layers[0];
            let mut config_bytes = Vec::new();
            client
                .pull_blob(&image, &manifest.config, &mut config_bytes)
                .await
                .map_err(|e| classify(registry, &what, e))?;
            let config = WasmConfig::try_from(config_bytes.as_slice()).map_err(|e| {
                RegistryError::NotAWasmArtifact {
                    reference: what.clone(),
                    detail: format!("config is not a Wasm config: {e:#}"),
                }
            })?;
            let (path, from_cache) = match self.store.blob(&layer.digest)? {
                Some(path) => (path, true),
                None => (
                    self.download_layer(&client, &image, layer, &what).await?,
                    false,
                ),
            };
            self.store.put_manifest(&manifest_digest, &bytes)?;
            Ok(PulledPlugin {
                reference: format!("{}@{manifest_digest}", strip_digest(&resolved)),
                tag: resolved.tag().map(str::to_string),
                manifest_digest,
                layer_digest: layer.digest.clone(),
                path,
                annotations: manifest.annotations.clone().unwrap_or_default(),
                component_exports: config.component.map(|c| c.exports).unwrap_or_default(),
                from_cache,
            })
        })
    }

    async fn download_layer(
        &self,
        client: &WasmClient,
        image: &oci_client::Reference,
        layer: &OciDescriptor,
        what: &str,
    ) -> Result<PathBuf> {
        let download = self.store.begin_download()?;
        let file = download
            .reopen()
            .map_err(|e| RegistryError::io("opening", download.path(), e))?;
        let mut writer = tokio::fs::File::from_std(file);
        client
            .pull_blob(image, layer, &mut writer)
            .await
            .map_err(|e| classify(image.resolve_registry(), what, e))?;
        drop(writer);
        let size = u64::try_from(layer.size).ok();
        self.store.commit_blob(download, &layer.digest, size)
    }

    fn cached(
        &self,
        reference: &PluginRef,
        tag: Option<String>,
        digest: &str,
    ) -> Result<Option<PulledPlugin>> {
        let Some(bytes) = self.store.manifest(digest)? else {
            return Ok(None);
        };
        let what = reference.to_string();
        let manifest = parse_wasm_manifest(&what, &bytes)?;
        let layer = &manifest.layers[0];
        let Some(path) = self.store.blob(&layer.digest)? else {
            return Ok(None);
        };
        Ok(Some(PulledPlugin {
            reference: format!("{}@{digest}", strip_digest(reference)),
            tag,
            manifest_digest: digest.to_string(),
            layer_digest: layer.digest.clone(),
            path,
            annotations: manifest.annotations.clone().unwrap_or_default(),
            component_exports: Vec::new(),
            from_cache: true,
        }))
    }
}

/// The component binary header: `\0asm` then version 0x0d, layer 1.
fn is_component(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [0x0d, 0x00, 0x01, 0x00]
}

fn strip_digest(r: &PluginRef) -> String {
    match r.tag() {
        Some(t) => format!("{}:{t}", r.repository_url()),
        None => r.repository_url(),
    }
}

fn list_or_none(tags: &[String]) -> String {
    if tags.is_empty() {
        "no tags".into()
    } else {
        tags.join(", ")
    }
}

/// Fetches the manifest `reference` names, checks it against a pinned
/// digest, and parses it as a Wasm artifact: `(raw bytes, digest, manifest)`.
async fn fetch_manifest(
    client: &WasmClient,
    reference: &PluginRef,
    auth: &oci_client::secrets::RegistryAuth,
) -> Result<(Vec<u8>, String, OciImageManifest)> {
    let what = reference.to_string();
    let (bytes, _) = client
        .pull_manifest_raw(&reference.to_oci(), auth, &[OCI_IMAGE_MEDIA_TYPE])
        .await
        .map_err(|e| classify(&reference.registry, &what, e))?;
    let digest = sha256_digest(&bytes);
    if let Selector::Digest { digest: pinned, .. } = &reference.selector {
        if *pinned != digest {
            return Err(RegistryError::DigestMismatch {
                what: format!("manifest of {what}"),
                expected: pinned.clone(),
                actual: digest,
            });
        }
    }
    let manifest = parse_wasm_manifest(&what, &bytes)?;
    Ok((bytes.to_vec(), digest, manifest))
}

/// Parses a manifest and checks the CNCF Wasm artifact layout: Wasm config
/// media type and exactly one `application/wasm` layer.
fn parse_wasm_manifest(what: &str, bytes: &[u8]) -> Result<OciImageManifest> {
    let not_wasm = |detail: String| RegistryError::NotAWasmArtifact {
        reference: what.to_string(),
        detail,
    };
    let manifest: OciImageManifest = serde_json::from_slice(bytes)
        .map_err(|e| not_wasm(format!("manifest is not an OCI image manifest: {e}")))?;
    if manifest.config.media_type != WASM_MANIFEST_CONFIG_MEDIA_TYPE {
        return Err(not_wasm(format!(
            "config media type is `{}`, expected `{WASM_MANIFEST_CONFIG_MEDIA_TYPE}`",
            manifest.config.media_type
        )));
    }
    match manifest.layers.as_slice() {
        [layer] if layer.media_type == WASM_LAYER_MEDIA_TYPE => Ok(manifest),
        [layer] => Err(not_wasm(format!(
            "layer media type is `{}`, expected `{WASM_LAYER_MEDIA_TYPE}`",
            layer.media_type
        ))),
        layers => Err(not_wasm(format!(
            "expected exactly one `{WASM_LAYER_MEDIA_TYPE}` layer, found {}",
            layers.len()
        ))),
    }
}

fn classify_anyhow(registry: &str, what: &str, err: anyhow::Error) -> RegistryError {
    match err.downcast::<OciDistributionError>() {
        Ok(e) => classify(registry, what, e),
        Err(e) => RegistryError::Protocol {
            registry: registry.to_string(),
            detail: format!("{e:#}"),
        },
    }
}

/// Maps `oci-client` errors onto ours, keeping the registry's own words.
fn classify(registry: &str, what: &str, err: OciDistributionError) -> RegistryError {
    let registry_s = registry.to_string();
    let not_found = |hint: &str| RegistryError::NotFound {
        reference: what.to_string(),
        hint: hint.to_string(),
    };
    match err {
        OciDistributionError::RequestError(e) => RegistryError::Unreachable {
            registry: registry_s,
            detail: error_chain(&e),
        },
        OciDistributionError::ImageManifestNotFoundError(_) => not_found(""),
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<_> = envelope.errors.iter().map(|e| &e.code).collect();
            let message = envelope
                .errors
                .iter()
                .map(|e| e.message.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::NotFound
                        | OciErrorCode::BlobUnknown
                )
            }) {
                not_found(&format!(" ({message})"))
            } else if codes
                .iter()
                .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                RegistryError::Unauthorized {
                    registry: registry_s,
                    detail: message,
                }
            } else {
                RegistryError::Protocol {
                    registry: registry_s,
                    detail: format!("{what}: {message}"),
                }
            }
        }
        OciDistributionError::ServerError { code: 404, .. } => not_found(""),
        OciDistributionError::ServerError {
            code: code @ (401 | 403),
            url,
            ..
        } => RegistryError::Unauthorized {
            registry: registry_s,
            detail: format!("{code} from {url}"),
        },
        OciDistributionError::UnauthorizedError { url } => RegistryError::Unauthorized {
            registry: registry_s,
            detail: format!("401 from {url}"),
        },
        OciDistributionError::AuthenticationFailure(detail) => RegistryError::Unauthorized {
            registry: registry_s,
            detail,
        },
        OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError {
            expected,
            actual,
        }) => RegistryError::DigestMismatch {
            what: format!("content of {what}"),
            expected,
            actual,
        },
        OciDistributionError::IoError(e) => {
            RegistryError::io("writing download of", PathBuf::from(what), e)
        }
        other => RegistryError::Protocol {
            registry: registry_s,
            detail: format!("{what}: {other}"),
        },
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
