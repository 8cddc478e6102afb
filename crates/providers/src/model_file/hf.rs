//! `hf:` model URIs as OpenClaw reads them (its llama.cpp plugin, `@openclaw/llama-cpp-provider`): the file they
//! name, the name OpenClaw caches it under, and the `resolve` URL it is downloaded from.

use super::Artifact;

/// OpenClaw's default local embedding model: what `provider: "local"` means without `local.modelPath`.
pub const OPENCLAW_DEFAULT_MODEL: &str = "hf:ggml-org/embeddinggemma-300m-qat-q8_0-GGUF/embeddinggemma-300m-qat-Q8_0.gguf";

/// What OpenClaw pins for its default model: the cache file name (node-llama-cpp's older naming, kept by OpenClaw
/// so that earlier downloads stay valid), the repository revision, the size and the SHA-256 of the file.
const DEFAULT_CACHE_FILE: &str = "hf_ggml-org_embeddinggemma-300m-qat-Q8_0.gguf";
const DEFAULT_REVISION: &str = "66f974f8cd48cc3b9c41c516b95508e75b4bee64";
const DEFAULT_SIZE: u64 = 328_577_056;
const DEFAULT_SHA256: &str = "6fa0c02a9c302be6f977521d399b4de3a46310a4f2621ee0063747881b673f67";

/// Where Hugging Face is reached when neither `MODEL_ENDPOINT` nor `HF_ENDPOINT` names a mirror.
pub const HF_DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// One file of a Hugging Face repository: `hf:<owner>/<repo>[:<tag>]/<path/to/file>[#<revision>]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HfFile {
    pub owner: String,
    pub repo: String,
    pub file: String,
    /// A branch, tag or commit; `main` when the URI names none.
    pub revision: String,
}

/// Whether `source` is a Hugging Face URI (`hf:` or `huggingface:`, any case).
pub fn is_hf_uri(source: &str) -> bool {
    strip_scheme(source).is_some()
}

fn strip_scheme(source: &str) -> Option<&str> {
    ["hf:", "huggingface:"].iter().find_map(|p| {
        let head = source.get(..p.len())?;
        head.eq_ignore_ascii_case(p).then(|| &source[p.len()..])
    })
}

/// Read a Hugging Face URI. The repository may carry a `:<tag>` (dropped, as OpenClaw does when a file is named);
/// a URI naming no file is refused: OpenClaw then asks Hugging Face's manifest API which file a tag means, which
/// memory-rs does not.
pub fn parse(source: &str) -> Result<HfFile, String> {
    let rest = strip_scheme(source).ok_or_else(|| format!("`{source}` is not an hf: URI"))?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, revision) = match rest.split_once('#') {
        Some((p, r)) => (p, r),
        None => (rest, ""),
    };
    let mut parts = path.split('/');
    let owner = parts.next().unwrap_or_default();
    let repo = parts.next().unwrap_or_default().split(':').next().unwrap_or_default();
    let file = parts.collect::<Vec<_>>().join("/");
    if owner.is_empty() || repo.is_empty() {
        return Err(format!("`{source}` is not a Hugging Face model URI: expected hf:<owner>/<repo>/<file>.gguf"));
    }
    if file.is_empty() || file.split('/').any(|p| p.is_empty() || p == "." || p == "..") {
        return Err(format!("`{source}` names no file of the repository: expected hf:{owner}/{repo}/<file>.gguf"));
    }
    let revision = if revision.is_empty() { "main" } else { revision };
    Ok(HfFile { owner: owner.into(), repo: repo.into(), file, revision: revision.into() })
}

impl HfFile {
    /// The name OpenClaw caches this file under: `hf_<owner>_<repo>[_<revision>]_<path_parts>`, the revision only
    /// when it is not `main`, every run of characters other than letters, digits, `.`, `_` and `-` made one `_`.
    pub fn cache_name(&self) -> String {
        let revision = if self.revision == "main" { "" } else { self.revision.as_str() };
        let parts = [self.owner.as_str(), self.repo.as_str(), revision].into_iter().chain(self.file.split('/')).filter(|p| !p.is_empty());
        let joined = std::iter::once("hf").chain(parts).collect::<Vec<_>>().join("_");
        let mut name = String::with_capacity(joined.len());
        let mut in_run = false;
        for c in joined.chars() {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                name.push(c);
                in_run = false;
            } else if !in_run {
                name.push('_');
                in_run = true;
            }
        }
        name
    }

    /// The file's `resolve` URL on `endpoint` (Hugging Face or a mirror), as OpenClaw builds it.
    pub fn url(&self, endpoint: &str) -> String {
        let file = self.file.split('/').map(encode_component).collect::<Vec<_>>().join("/");
        format!(
            "{}/{}/{}/resolve/{}/{file}?download=true",
            endpoint.trim_end_matches('/'),
            encode_component(&self.owner),
            encode_component(&self.repo),
            encode_component(&self.revision)
        )
    }
}

/// The Hugging Face endpoint: `MODEL_ENDPOINT` (llama.cpp's and node-llama-cpp's variable), else `HF_ENDPOINT`
/// (Hugging Face's own, for mirrors), else huggingface.co. A value that is not an http(s) URL is not used.
pub fn endpoint(env: &dyn Fn(&str) -> Option<String>) -> String {
    ["MODEL_ENDPOINT", "HF_ENDPOINT"]
        .iter()
        .filter_map(|v| env(v))
        .map(|v| v.trim().to_string())
        .find(|v| v.starts_with("https://") || v.starts_with("http://"))
        .unwrap_or_else(|| HF_DEFAULT_ENDPOINT.to_string())
}

/// The file an `hf:` URI names, where it comes from, and what is known of it before asking the server: OpenClaw's
/// default model is pinned (revision, size, digest); any other file's digest is read from the server's answer.
pub fn artifact(source: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Artifact, String> {
    let endpoint = endpoint(env);
    if source == OPENCLAW_DEFAULT_MODEL {
        let mut file = parse(source)?;
        file.revision = DEFAULT_REVISION.into();
        return Ok(Artifact {
            uri: source.into(),
            file_name: DEFAULT_CACHE_FILE.into(),
            url: file.url(&endpoint),
            size: Some(DEFAULT_SIZE),
            sha256: Some(DEFAULT_SHA256.into()),
            openclaw_default: true,
        });
    }
    let file = parse(source)?;
    Ok(Artifact { uri: source.into(), file_name: file.cache_name(), url: file.url(&endpoint), size: None, sha256: None, openclaw_default: false })
}

/// `encodeURIComponent`: everything but letters, digits and `-_.!~*'()` percent-encoded as UTF-8.
fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_read_as_openclaw_reads_them() {
        let f = parse("hf:ggml-org/embeddinggemma-300m-qat-q8_0-GGUF/embeddinggemma-300m-qat-Q8_0.gguf").unwrap();
        assert_eq!(
            (f.owner.as_str(), f.repo.as_str(), f.file.as_str(), f.revision.as_str()),
            ("ggml-org", "embeddinggemma-300m-qat-q8_0-GGUF", "embeddinggemma-300m-qat-Q8_0.gguf", "main")
        );
        let f = parse("HuggingFace://nomic-ai/nomic-embed-text-v1.5-GGUF:F16/sub dir/nomic.f16.gguf#v1.2").unwrap();
        assert_eq!(
            (f.owner.as_str(), f.repo.as_str(), f.file.as_str(), f.revision.as_str()),
            ("nomic-ai", "nomic-embed-text-v1.5-GGUF", "sub dir/nomic.f16.gguf", "v1.2")
        );
        assert!(parse("hf:owner").is_err());
        assert!(parse("hf:owner/repo").unwrap_err().contains("names no file"));
        assert!(parse("hf:owner/repo:Q8_0").unwrap_err().contains("names no file"));
        assert!(parse("hf:owner/repo/../x.gguf").is_err());
        assert!(is_hf_uri("HF:a/b/c.gguf") && !is_hf_uri("/models/hf:x") && !is_hf_uri("h"));
    }

    #[test]
    fn cache_names_are_openclaws() {
        let name = |s: &str| parse(s).unwrap().cache_name();
        assert_eq!(
            name("hf:nomic-ai/nomic-embed-text-v1.5-GGUF/nomic-embed-text-v1.5.f16.gguf"),
            "hf_nomic-ai_nomic-embed-text-v1.5-GGUF_nomic-embed-text-v1.5.f16.gguf"
        );
        // The revision when it is not `main`; folders joined; other characters, in runs, one `_`.
        assert_eq!(name("hf:o/r/a b+c/x@@y.gguf#dev/2"), "hf_o_r_dev_2_a_b_c_x_y.gguf");
        assert_eq!(name("hf:o/r/x.gguf#main"), "hf_o_r_x.gguf");
        assert_eq!(name("hf:o/r/模型.gguf"), "hf_o_r__.gguf");
    }

    #[test]
    fn urls_on_the_endpoint_with_the_revision() {
        let env = |k: &str| (k == "HF_ENDPOINT").then(|| "http://127.0.0.1:9/mirror/".to_string());
        let a = artifact("hf:o/r/dir/my file.gguf#v2", &env).unwrap();
        assert_eq!(a.url, "http://127.0.0.1:9/mirror/o/r/resolve/v2/dir/my%20file.gguf?download=true");
        assert_eq!((a.size, a.sha256.as_deref(), a.file_name.as_str()), (None, None, "hf_o_r_v2_dir_my_file.gguf"));
        let d = artifact(OPENCLAW_DEFAULT_MODEL, &|_| None).unwrap();
        assert_eq!(d.file_name, "hf_ggml-org_embeddinggemma-300m-qat-Q8_0.gguf");
        assert_eq!(
            d.url,
            format!("https://huggingface.co/ggml-org/embeddinggemma-300m-qat-q8_0-GGUF/resolve/{DEFAULT_REVISION}/embeddinggemma-300m-qat-Q8_0.gguf?download=true")
        );
        assert_eq!((d.size, d.sha256.as_deref()), (Some(DEFAULT_SIZE), Some(DEFAULT_SHA256)));
        // MODEL_ENDPOINT wins; a value that is not a URL is not used.
        let env = |k: &str| match k {
            "MODEL_ENDPOINT" => Some("mirror.example".to_string()),
            "HF_ENDPOINT" => Some("https://hf-mirror.example".to_string()),
            _ => None,
        };
        assert_eq!(endpoint(&env), "https://hf-mirror.example");
    }
}
