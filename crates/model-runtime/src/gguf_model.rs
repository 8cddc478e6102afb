//! A `.gguf` model file as the runtime runs it (the `local` provider's GGUF files): the architecture named by
//! `general.architecture` (`gemma-embedding`: EmbeddingGemma; `nomic-bert`: nomic-embed-text; `bert`: BERT-family
//! embedders such as bge and all-MiniLM), the tokenizer from the file's own vocabulary (SentencePiece or WordPiece), the model's prompts,
//! an optional Matryoshka cut, and an identity that is the file's SHA-256 and architecture (a changed file
//! rebuilds the index, the same file never does).

use std::path::{Path, PathBuf};

use tracing::{debug, info};

use crate::gemma::{self, GemmaConfig, GemmaModel};
use crate::gguf::GgufFile;
use crate::nomic::{self, EncoderConfig, EncoderModel};
use crate::spm::SpmTokenizer;
use crate::wordpiece::WordPieceTokenizer;
use crate::{sanitize_and_normalize, ModelError, ModelOptions, Prompts};

/// EmbeddingGemma's prompts (its `config_sentence_transformers.json`: `query` and `document`).
const GEMMA_PROMPTS: (&str, &str) = ("task: search result | query: ", "title: none | text: ");
/// EmbeddingGemma's Matryoshka widths (its model card): a cut to any other width is refused.
const GEMMA_CUTS: [usize; 4] = [768, 512, 256, 128];
/// nomic-embed-text's task prefixes for retrieval (its model card).
const NOMIC_PROMPTS: (&str, &str) = ("search_query: ", "search_document: ");
/// nomic-embed-text-v1.5's Matryoshka widths (its model card).
const NOMIC_CUTS: [usize; 5] = [768, 512, 256, 128, 64];
/// The architectures this runtime runs, for the error that names an unsupported one.
const SUPPORTED: [&str; 3] = [gemma::ARCHITECTURE, nomic::NOMIC, nomic::BERT];

/// An architecture's settings, read from the file's metadata.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelConfig {
    Gemma(GemmaConfig),
    Encoder(EncoderConfig),
}

impl ModelConfig {
    fn from_gguf(g: &GgufFile) -> Result<Self, ModelError> {
        let architecture = g.architecture()?;
        match architecture {
            gemma::ARCHITECTURE => Ok(ModelConfig::Gemma(GemmaConfig::from_gguf(g)?)),
            nomic::NOMIC | nomic::BERT => Ok(ModelConfig::Encoder(EncoderConfig::from_gguf(g)?)),
            other => Err(ModelError::Invalid {
                path: g.path.clone(),
                message: format!(
                    "GGUF architecture `{other}` is not supported by the local provider (it runs {})",
                    SUPPORTED.map(|a| format!("`{a}`")).join(", ")
                ),
            }),
        }
    }

    fn output_width(&self) -> usize {
        match self {
            ModelConfig::Gemma(c) => c.output_width(),
            ModelConfig::Encoder(c) => c.hidden,
        }
    }

    fn vocab(&self) -> usize {
        match self {
            ModelConfig::Gemma(c) => c.vocab,
            ModelConfig::Encoder(c) => c.vocab,
        }
    }

    fn max_positions(&self) -> usize {
        match self {
            ModelConfig::Gemma(c) => c.max_positions,
            ModelConfig::Encoder(c) => c.max_positions,
        }
    }

    /// The model's own prompts and the Matryoshka widths it was trained for (none: its width only).
    fn defaults(&self) -> ((&'static str, &'static str), &'static [usize]) {
        match self {
            ModelConfig::Gemma(_) => (GEMMA_PROMPTS, &GEMMA_CUTS),
            ModelConfig::Encoder(c) if c.family == nomic::Family::Nomic => (NOMIC_PROMPTS, &NOMIC_CUTS),
            ModelConfig::Encoder(_) => (("", ""), &[]),
        }
    }
}

/// What is known about a GGUF model without loading its weights.
#[derive(Debug, Clone)]
pub struct GgufModelInfo {
    pub path: PathBuf,
    pub name: String,
    pub architecture: String,
    pub config: ModelConfig,
    pub prompts: Prompts,
    /// Width of the vectors given (the model's, or the configured Matryoshka cut).
    pub dimensions: usize,
    pub max_tokens: usize,
    pub digest: String,
    pub fingerprint: String,
}

enum Model {
    Gemma(Box<(GemmaModel, SpmTokenizer)>),
    Encoder(Box<(EncoderModel, WordPieceTokenizer)>),
}

/// A GGUF model, loaded: its graph and its tokenizer.
pub struct GgufEncoder {
    model: Model,
}

impl GgufModelInfo {
    /// Reads the file's metadata and digest (no weights) and applies `options` (prompts, Matryoshka cut).
    pub fn inspect(path: &Path, options: &ModelOptions) -> Result<(Self, GgufFile), ModelError> {
        let g = GgufFile::open(path)?;
        let architecture = g.architecture()?.to_string();
        let config = ModelConfig::from_gguf(&g)?;
        let width = config.output_width();
        let (default_prompts, cuts) = config.defaults();
        let dimensions = match options.dimensions {
            None => width,
            Some(d) if d == width || (cuts.contains(&d) && d < width) => d,
            Some(d) if cuts.is_empty() => {
                return Err(ModelError::Invalid {
                    path: path.into(),
                    message: format!("the model gives {width} dimensions and has no Matryoshka cuts, not {d}"),
                })
            }
            Some(d) => {
                return Err(ModelError::Invalid {
                    path: path.into(),
                    message: format!("the model gives {width} dimensions; it can be cut to {cuts:?}, not {d}"),
                })
            }
        };
        let prompts = Prompts {
            query: options.query_prompt.clone().unwrap_or_else(|| default_prompts.0.into()),
            document: options.document_prompt.clone().unwrap_or_else(|| default_prompts.1.into()),
        };
        let max_tokens = config.max_positions().min(nomic::NOMIC_LONG_CONTEXT);
        let started = std::time::Instant::now();
        let digest = g.digest()?;
        debug!(path = %path.display(), ms = started.elapsed().as_millis() as u64, "model file digest");
        let fingerprint = crate::sha256_hex(
            format!(
                "v1;provider=local;gguf;sha256={digest};arch={architecture};dims={dimensions};max_len={max_tokens};normalized=true;prompts={:?}/{:?}",
                prompts.query, prompts.document
            )
            .as_bytes(),
        );
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "local-model".into());
        Ok((GgufModelInfo { path: path.into(), name, architecture, config, prompts, dimensions, max_tokens, digest, fingerprint }, g))
    }
}

impl GgufEncoder {
    /// Reads the weights and the tokenizer of the file `info` describes. Blocking.
    pub fn load(info: &GgufModelInfo) -> Result<Self, ModelError> {
        let started = std::time::Instant::now();
        let g = GgufFile::open(&info.path)?;
        let config = ModelConfig::from_gguf(&g)?;
        if config != info.config {
            return Err(ModelError::Invalid { path: info.path.clone(), message: "the file changed since it was opened".into() });
        }
        let embeddings = config.vocab();
        let vocab_mismatch = |tokens: usize| ModelError::Invalid {
            path: info.path.clone(),
            message: format!("{tokens} tokens in the vocabulary, {embeddings} token embeddings"),
        };
        let model = match config {
            ModelConfig::Gemma(c) => {
                let tokenizer = SpmTokenizer::from_gguf(&g, info.max_tokens)?;
                if tokenizer.vocab_size() != c.vocab {
                    return Err(vocab_mismatch(tokenizer.vocab_size()));
                }
                Model::Gemma(Box::new((GemmaModel::load(&g, c)?, tokenizer)))
            }
            ModelConfig::Encoder(c) => {
                let tokenizer = WordPieceTokenizer::from_gguf(&g, info.max_tokens)?;
                if tokenizer.vocab_size() != c.vocab {
                    return Err(vocab_mismatch(tokenizer.vocab_size()));
                }
                Model::Encoder(Box::new((EncoderModel::load(&g, c)?, tokenizer)))
            }
        };
        info!(path = %info.path.display(), architecture = %info.architecture, dims = info.dimensions, ms = started.elapsed().as_millis() as u64, "local GGUF model loaded");
        Ok(GgufEncoder { model })
    }

    /// Token ids of `text` as the model reads it (prompt included by the caller).
    pub fn tokens(&self, text: &str) -> Vec<u32> {
        match &self.model {
            Model::Gemma(m) => m.1.encode(text),
            Model::Encoder(m) => m.1.encode(text),
        }
    }

    /// Unit vectors of `texts` (prompts already in front). Blocking.
    pub fn embed(&self, info: &GgufModelInfo, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        texts
            .iter()
            .map(|t| {
                let model_err = |e: candle_core::Error| ModelError::Model(e.to_string());
                let mut v = match &self.model {
                    Model::Gemma(m) => m.0.embed(&m.1.encode(t)).map_err(model_err)?,
                    Model::Encoder(m) => m.0.embed(&m.1.encode(t)).map_err(model_err)?,
                };
                let cut = info.dimensions < v.len();
                if cut && matches!(&self.model, Model::Encoder(_)) {
                    // nomic's Matryoshka recipe: a layer norm over the whole vector, then the cut.
                    nomic::matryoshka_norm(&mut v);
                }
                // Normalised before and after a cut, as sentence-transformers' `truncate_dim` on a normalised model.
                sanitize_and_normalize(&mut v);
                let mut v = gemma::truncate(v, info.dimensions);
                sanitize_and_normalize(&mut v);
                Ok(v)
            })
            .collect()
    }
}
