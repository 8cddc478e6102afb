//! A ColBERT-style late-interaction model from a model folder, on the same BERT encoder as the folder embedder
//! and the cross-encoder. The query is encoded once and each
//! candidate passage alone (not as a pair): every token keeps its own vector (projected by the folder's
//! `linear.weight` when it has one, else the hidden state cut to `dim` components), L2-normalised, and a passage
//! scores the sum over the query's tokens of their best cosine among the passage's tokens (MaxSim).
//!
//! What makes a folder late-interaction, and how its texts are encoded, is read from its files
//! ([`is_late_interaction`], [`Conventions`]): ColBERT's own `artifact.metadata` keys, with ColBERT's defaults
//! where the file or a key is absent (query marker `[unused0]`, document marker `[unused1]`, queries padded with
//! `[MASK]` to 32 tokens, punctuation left out of the passages' vectors).

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Linear, VarBuilder};
use serde_json::Value;
use tokenizers::Tokenizer;
use tracing::info;

use crate::bert::BertModel;
use crate::encoder::FolderEncoder;
use crate::safetensors::{read_weights, shape_of, tensor_entry};
use crate::{FolderModelInfo, ModelError, ScoreError};

/// Passages per forward pass: small enough that the deadline is checked often.
const PASSAGES_PER_PASS: usize = 8;
/// A passage's tokens when the folder names no `doc_maxlen`: a snippet-sized passage fits.
const DEFAULT_DOC_TOKENS: usize = 180;
/// The ColBERT projection's tensor name (colbert-ai's `HF_ColBERT`).
const PROJECTION: &str = "linear.weight";

/// How a late-interaction folder encodes queries and passages (`artifact.metadata`, ColBERT's keys; absent keys
/// take ColBERT's defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct Conventions {
    /// The token after `[CLS]` that marks a query (`query_token_id`; `null`: none).
    pub query_marker: Option<String>,
    /// The token after `[CLS]` that marks a passage (`doc_token_id`; `null`: none).
    pub doc_marker: Option<String>,
    /// A query's length in tokens, special tokens included (`query_maxlen`): longer queries are cut.
    pub query_tokens: usize,
    /// Whether a shorter query is padded to `query_tokens` with `[MASK]` (query augmentation;
    /// `query_augmentation`, this project's key: ColBERT always pads).
    pub query_augmentation: bool,
    /// Whether the padding `[MASK]` tokens are attended to (`attend_to_mask_tokens`).
    pub attend_to_mask_tokens: bool,
    /// A passage's length in tokens, special tokens included (`doc_maxlen`, at most the model's length).
    pub doc_tokens: usize,
    /// Whether punctuation tokens are left out of a passage's vectors (`mask_punctuation`).
    pub mask_punctuation: bool,
    /// Whether only a query's words give vectors: not `[CLS]`, `[SEP]`, the marker, nor (with `mask_punctuation`)
    /// punctuation (`skip_query_specials`, this project's key; ColBERT keeps them all).
    pub skip_query_specials: bool,
    /// Components of a token vector (`dim`): the projection's outputs, or the first `dim` of the hidden state
    /// where the folder has no projection. `None`: all of them.
    pub dim: Option<usize>,
}

impl Default for Conventions {
    fn default() -> Self {
        Conventions {
            query_marker: Some("[unused0]".into()),
            doc_marker: Some("[unused1]".into()),
            query_tokens: 32,
            query_augmentation: true,
            attend_to_mask_tokens: false,
            doc_tokens: DEFAULT_DOC_TOKENS,
            mask_punctuation: true,
            skip_query_specials: false,
            dim: None,
        }
    }
}

impl Conventions {
    /// The conventions of `artifact.metadata`'s JSON (every key optional).
    pub fn from_metadata(v: &Value) -> Result<Conventions, String> {
        let mut c = Conventions::default();
        let marker = |key: &str, default: Option<String>| -> Result<Option<String>, String> {
            match v.get(key) {
                None => Ok(default),
                Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
                Some(other) => Err(format!("`{key}` must be a token or null, not {other}")),
            }
        };
        let count = |key: &str| -> Result<Option<usize>, String> {
            match v.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(x) => x.as_u64().filter(|n| *n > 0).map(|n| Some(n as usize)).ok_or_else(|| format!("`{key}` must be a positive integer")),
            }
        };
        let flag = |key: &str, default: bool| -> Result<bool, String> {
            match v.get(key) {
                None | Some(Value::Null) => Ok(default),
                Some(x) => x.as_bool().ok_or_else(|| format!("`{key}` must be true or false")),
            }
        };
        c.query_marker = marker("query_token_id", c.query_marker)?;
        c.doc_marker = marker("doc_token_id", c.doc_marker)?;
        c.query_tokens = count("query_maxlen")?.unwrap_or(c.query_tokens);
        c.doc_tokens = count("doc_maxlen")?.unwrap_or(c.doc_tokens);
        c.query_augmentation = flag("query_augmentation", c.query_augmentation)?;
        c.attend_to_mask_tokens = flag("attend_to_mask_tokens", c.attend_to_mask_tokens)?;
        c.mask_punctuation = flag("mask_punctuation", c.mask_punctuation)?;
        c.skip_query_specials = flag("skip_query_specials", c.skip_query_specials)?;
        c.dim = count("dim")?;
        if c.query_tokens < 3 {
            return Err("`query_maxlen` must leave room for [CLS], a marker and [SEP]".into());
        }
        Ok(c)
    }
}

/// Whether a model folder holds a late-interaction (ColBERT) model: a ColBERT projection (`linear.weight`) in its
/// weights, ColBERT's `artifact.metadata`, or `HF_ColBERT` / `ColBERT` among `config.json`'s architectures.
pub fn is_late_interaction(dir: &Path, header_has: impl Fn(&str) -> bool) -> bool {
    if header_has(PROJECTION) || dir.join("artifact.metadata").is_file() {
        return true;
    }
    let Ok(text) = std::fs::read_to_string(dir.join("config.json")) else { return false };
    let Ok(v) = serde_json::from_str::<Value>(&text) else { return false };
    v.get("architectures").and_then(Value::as_array).is_some_and(|a| a.iter().any(|x| matches!(x.as_str(), Some("HF_ColBERT" | "ColBERT"))))
}

/// The folder's conventions: `artifact.metadata` when present, else ColBERT's defaults.
fn read_conventions(dir: &Path) -> Result<Conventions, ModelError> {
    let path = dir.join("artifact.metadata");
    if !path.is_file() {
        return Ok(Conventions::default());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| ModelError::Read { path: path.clone(), message: e.to_string() })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| ModelError::Invalid { path: path.clone(), message: format!("invalid JSON: {e}") })?;
    Conventions::from_metadata(&v).map_err(|message| ModelError::Invalid { path, message })
}

/// `sum over query tokens of max over passage tokens of q . d`: ColBERT's MaxSim on L2-normalised token vectors
/// (`query` and `passage` hold `dim`-wide rows back to back). A passage without vectors scores 0.
pub fn maxsim(query: &[f32], passage: &[f32], dim: usize) -> f32 {
    if dim == 0 || passage.len() < dim {
        return 0.0;
    }
    query
        .chunks_exact(dim)
        .map(|q| passage.chunks_exact(dim).map(|d| q.iter().zip(d).map(|(a, b)| a * b).sum::<f32>()).fold(f32::NEG_INFINITY, f32::max))
        .sum()
}

/// A late-interaction model, loaded.
pub struct LateEncoder {
    encoder: BertModel,
    projection: Option<Linear>,
    tokenizer: Tokenizer,
    conventions: Conventions,
    /// Components of an output token vector.
    dim: usize,
    /// Tokens of a passage the model may read (`doc_maxlen`, at most its positions).
    doc_tokens: usize,
    cls: u32,
    sep: u32,
    /// `[MASK]`, where queries are padded with it.
    mask: Option<u32>,
    pad: u32,
    query_marker: Option<u32>,
    doc_marker: Option<u32>,
    punctuation: HashSet<u32>,
}

/// A text's token ids as the encoder reads them, and which of its tokens give vectors.
struct Sequence {
    ids: Vec<u32>,
    keep: Vec<bool>,
}

impl LateEncoder {
    /// Checks that the folder `info` describes is a late-interaction model that can run (from its header and small
    /// files) and reads its conventions.
    pub fn check(info: &FolderModelInfo) -> Result<Conventions, ModelError> {
        let st = info.dir.join("model.safetensors");
        if !is_late_interaction(&info.dir, |name| tensor_entry(&info.header, name).is_some()) {
            return Err(ModelError::Invalid {
                path: st,
                message: "not a late-interaction model: no `linear.weight`, no `artifact.metadata`, no HF_ColBERT in config.json".into(),
            });
        }
        let conventions = read_conventions(&info.dir)?;
        if conventions.query_augmentation && !conventions.attend_to_mask_tokens {
            // The encoder's packed path leaves the rows of tokens hidden from attention empty, so query expansion
            // tokens must be attended to (`attend_to_mask_tokens: true`) or not added (`query_augmentation: false`).
            return Err(ModelError::Invalid {
                path: info.dir.join("artifact.metadata"),
                message: "query augmentation with [MASK] tokens hidden from attention is not supported: set `attend_to_mask_tokens: true` or `query_augmentation: false`".into(),
            });
        }
        let hidden = info.config.hidden_size;
        let projection = shape_of(&info.header, PROJECTION);
        match (&projection, conventions.dim) {
            (Some(shape), dim) if shape.len() != 2 || shape[1] != hidden || dim.is_some_and(|d| d != shape[0]) => {
                return Err(ModelError::Invalid {
                    path: st,
                    message: format!("`{PROJECTION}` is {shape:?}, expected [dim, {hidden}] with dim = {:?} (artifact.metadata)", conventions.dim),
                });
            }
            (None, Some(d)) if d > hidden => {
                return Err(ModelError::Invalid {
                    path: info.dir.join("artifact.metadata"),
                    message: format!("`dim` {d} is wider than the hidden state ({hidden}) and there is no `{PROJECTION}`"),
                });
            }
            _ => {}
        }
        Ok(conventions)
    }

    /// Reads the weights and the tokenizer. Blocking.
    pub fn load(info: &FolderModelInfo, conventions: Conventions) -> Result<LateEncoder, ModelError> {
        let started = Instant::now();
        let path = info.dir.join("model.safetensors");
        let (mut weights, words) = read_weights(info, &path)?;
        let projection = match weights.take_float(PROJECTION) {
            Some(w) => {
                let w = w.map_err(|e| ModelError::Model(format!("`{PROJECTION}`: {e}")))?;
                let bias = weights.take_float("linear.bias").transpose().map_err(|e| ModelError::Model(format!("`linear.bias`: {e}")))?;
                Some(Linear::new(w, bias))
            }
            None => None,
        };
        let hidden = info.config.hidden_size;
        let dim = match &projection {
            Some(p) => p.weight().dims().first().copied().unwrap_or(hidden),
            None => conventions.dim.unwrap_or(hidden).min(hidden),
        };
        let vb = VarBuilder::from_tensors(std::mem::take(&mut weights.floats), DType::F32, &Device::Cpu);
        let encoder = BertModel::load(vb, &info.config, Some(words), &mut weights.int8).map_err(|e| ModelError::Model(e.to_string()))?;
        let (mut tokenizer, pad) = FolderEncoder::load_tokenizer(info)?;
        // Texts are cut here, by tokens, after the special tokens are placed.
        tokenizer.with_truncation(None).map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let id = |token: &str| -> Result<u32, ModelError> {
            tokenizer.token_to_id(token).ok_or_else(|| ModelError::Tokenizer(format!("`{token}` is not in the vocabulary")))
        };
        let (cls, sep) = (id("[CLS]")?, id("[SEP]")?);
        let mask = if conventions.query_augmentation { Some(id("[MASK]")?) } else { None };
        let query_marker = conventions.query_marker.as_deref().map(id).transpose()?;
        let doc_marker = conventions.doc_marker.as_deref().map(id).transpose()?;
        // ColBERT's skiplist: each ASCII punctuation character that is a token of its own.
        let punctuation = (b'!'..=b'~').filter(u8::is_ascii_punctuation).filter_map(|c| tokenizer.token_to_id(&(c as char).to_string())).collect();
        let doc_tokens = conventions.doc_tokens.min(info.max_seq_length).max(3);
        info!(dir = %info.dir.display(), dim, projection = projection.is_some(), ms = started.elapsed().as_millis() as u64, "late-interaction reranker loaded");
        Ok(LateEncoder { encoder, projection, tokenizer, conventions, dim, doc_tokens, cls, sep, mask, pad, query_marker, doc_marker, punctuation })
    }

    fn words(&self, text: &str) -> Result<Vec<u32>, String> {
        self.tokenizer.encode(text, false).map(|e| e.get_ids().to_vec()).map_err(|e| e.to_string())
    }

    /// `[CLS] marker query [SEP]`, cut to the query's length, then `[MASK]` to that length when augmented; with
    /// `skip_query_specials` only the words give vectors.
    fn query_ids(&self, text: &str) -> Result<Sequence, String> {
        let c = &self.conventions;
        let mut ids = vec![self.cls];
        ids.extend(self.query_marker);
        let room = c.query_tokens.saturating_sub(ids.len() + 1);
        let words = self.words(text)?;
        let first_word = ids.len();
        ids.extend(words.iter().take(room));
        let last_word = ids.len();
        ids.push(self.sep);
        let mut keep: Vec<bool> = ids
            .iter()
            .enumerate()
            .map(|(i, t)| !c.skip_query_specials || ((first_word..last_word).contains(&i) && !(c.mask_punctuation && self.punctuation.contains(t))))
            .collect();
        if let Some(mask) = self.mask {
            while ids.len() < c.query_tokens {
                ids.push(mask);
                keep.push(true);
            }
        }
        Ok(Sequence { ids, keep })
    }

    /// `[CLS] marker passage [SEP]`, cut to the passage's length; punctuation gives no vectors when masked.
    fn passage_ids(&self, text: &str) -> Result<Sequence, String> {
        let mut ids = vec![self.cls];
        ids.extend(self.doc_marker);
        let room = self.doc_tokens.saturating_sub(ids.len() + 1);
        ids.extend(self.words(text)?.into_iter().take(room));
        ids.push(self.sep);
        let keep = ids.iter().map(|t| !(self.conventions.mask_punctuation && self.punctuation.contains(t))).collect();
        Ok(Sequence { ids, keep })
    }

    /// The kept tokens' vectors of each sequence, `dim` wide and L2-normalised, back to back; one forward pass.
    fn vectors(&self, seqs: &[&Sequence]) -> candle_core::Result<Vec<Vec<f32>>> {
        let len = seqs.iter().map(|s| s.ids.len()).max().unwrap_or(1).max(1);
        let (mut ids, mut mask) = (Vec::with_capacity(seqs.len() * len), Vec::with_capacity(seqs.len() * len));
        for s in seqs {
            let pad = len - s.ids.len();
            ids.extend(s.ids.iter().copied().chain(std::iter::repeat_n(self.pad, pad)));
            mask.extend(std::iter::repeat_n(1u32, s.ids.len()).chain(std::iter::repeat_n(0, pad)));
        }
        let dev = self.encoder.device();
        let n = seqs.len();
        let ids = Tensor::from_vec(ids, (n, len), dev)?;
        let types = Tensor::zeros((n, len), DType::U32, dev)?;
        let mask = Tensor::from_vec(mask, (n, len), dev)?;
        let mut hidden = self.encoder.forward(&ids, &types, &mask)?;
        if let Some(p) = &self.projection {
            hidden = p.forward(&hidden)?;
        }
        let rows: Vec<Vec<Vec<f32>>> = hidden.to_vec3()?;
        Ok(seqs
            .iter()
            .zip(rows)
            .map(|(s, rows)| {
                let mut out = Vec::with_capacity(s.ids.len() * self.dim);
                for (row, _) in rows.iter().zip(&s.keep).filter(|(_, k)| **k) {
                    let v = &row[..self.dim.min(row.len())];
                    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                    let scale = if norm > 0.0 && norm.is_finite() { 1.0 / norm } else { 0.0 };
                    out.extend(v.iter().map(|x| x * scale));
                }
                out
            })
            .collect())
    }

    /// The token ids a query (`query: true`) or a passage is encoded as, and its token vectors (L2-normalised,
    /// one row per kept token), for tools and the tests that compare them with a reference. Blocking.
    pub fn token_vectors(&self, text: &str, query: bool) -> Result<(Vec<u32>, Vec<Vec<f32>>), ScoreError> {
        let seq = if query { self.query_ids(text) } else { self.passage_ids(text) }.map_err(ScoreError::Failed)?;
        let mut out = self.vectors(&[&seq]).map_err(|e| ScoreError::Failed(e.to_string()))?;
        let flat = out.pop().unwrap_or_default();
        Ok((seq.ids, flat.chunks_exact(self.dim).map(<[f32]>::to_vec).collect()))
    }

    /// MaxSim of each passage against the query, `PASSAGES_PER_PASS` passages a pass, longest first; over
    /// budget once `deadline` passes between passes. Blocking (CPU-bound).
    pub fn score(&self, query: &str, passages: &[String], deadline: Instant) -> Result<Vec<f32>, ScoreError> {
        let failed = ScoreError::Failed;
        let budget_ms = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
        if Instant::now() >= deadline {
            return Err(ScoreError::OverBudget { budget_ms });
        }
        let q = self.query_ids(query).map_err(failed)?;
        let qv = self.vectors(&[&q]).map_err(|e| failed(e.to_string()))?.pop().unwrap_or_default();
        let seqs = passages.iter().map(|p| self.passage_ids(p)).collect::<Result<Vec<_>, _>>().map_err(failed)?;
        let mut order: Vec<usize> = (0..passages.len()).collect();
        order.sort_by_key(|i| std::cmp::Reverse(seqs[*i].ids.len()));
        let mut out = vec![f32::NAN; passages.len()];
        for group in order.chunks(PASSAGES_PER_PASS) {
            if Instant::now() >= deadline {
                return Err(ScoreError::OverBudget { budget_ms });
            }
            let batch: Vec<&Sequence> = group.iter().map(|i| &seqs[*i]).collect();
            let vectors = self.vectors(&batch).map_err(|e| failed(e.to_string()))?;
            for (i, d) in group.iter().zip(vectors) {
                out[*i] = maxsim(&qv, &d, self.dim);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MaxSim written out the long way: for each query vector, every passage vector's cosine, the best kept.
    fn reference_maxsim(query: &[Vec<f32>], passage: &[Vec<f32>]) -> f32 {
        let cos = |a: &[f32], b: &[f32]| {
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
            let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
            dot / (na * nb)
        };
        let mut total = 0.0;
        for q in query {
            let mut best = f32::NEG_INFINITY;
            for d in passage {
                best = best.max(cos(q, d));
            }
            total += best;
        }
        total
    }

    fn unit(v: &[f32]) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / n).collect()
    }

    fn flat(rows: &[Vec<f32>]) -> Vec<f32> {
        rows.iter().flatten().copied().collect()
    }

    #[test]
    fn a_passage_that_answers_the_query_outscores_one_that_does_not_and_maxsim_matches_the_long_way() {
        // Four "topics" as directions; the query asks about 0 and 1.
        let query: Vec<Vec<f32>> = [[1.0, 0.1, 0.0, 0.0], [0.0, 1.0, 0.2, 0.0], [0.3, 0.3, 0.1, 0.1]].iter().map(|v| unit(v)).collect();
        // The answer holds both asked topics among others; the other passage talks around them.
        let answers: Vec<Vec<f32>> =
            [[0.9, 0.2, 0.0, 0.1], [0.1, 0.95, 0.1, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0]].iter().map(|v| unit(v)).collect();
        let other: Vec<Vec<f32>> = [[0.0, 0.1, 0.0, 1.0], [0.1, 0.0, 1.0, 0.2], [0.0, 0.0, 0.7, 0.7]].iter().map(|v| unit(v)).collect();
        let (q, a, o) = (flat(&query), flat(&answers), flat(&other));
        let (sa, so) = (maxsim(&q, &a, 4), maxsim(&q, &o, 4));
        assert!(sa > so + 0.5, "the answering passage {sa} vs the other {so}");
        for (p, rows) in [(&a, &answers), (&o, &other)] {
            let want = reference_maxsim(&query, rows);
            assert!((maxsim(&q, p, 4) - want).abs() < 1e-5, "{} vs {want}", maxsim(&q, p, 4));
        }
        // Each query token counts once, whatever the passage's length: a passage repeating one good token does not
        // beat one covering every query token.
        let repeated: Vec<Vec<f32>> = std::iter::repeat_n(answers[0].clone(), 10).collect();
        assert!(maxsim(&q, &flat(&repeated), 4) < sa);
        assert!((maxsim(&q, &flat(&repeated), 4) - reference_maxsim(&query, &repeated)).abs() < 1e-5);
        // No vectors: 0, not -inf.
        assert_eq!(maxsim(&q, &[], 4), 0.0);
    }

    #[test]
    fn conventions_come_from_artifact_metadata_with_colberts_defaults() {
        let d = Conventions::from_metadata(&serde_json::json!({})).unwrap();
        assert_eq!(d, Conventions::default());
        assert_eq!(d.query_marker.as_deref(), Some("[unused0]"));
        assert_eq!((d.query_tokens, d.query_augmentation, d.mask_punctuation), (32, true, true));
        let c = Conventions::from_metadata(&serde_json::json!({
            "query_token_id": null, "doc_token_id": "[unused1]", "query_maxlen": 24, "doc_maxlen": 120,
            "query_augmentation": false, "mask_punctuation": false, "skip_query_specials": true, "dim": 128,
            "similarity": "cosine"
        }))
        .unwrap();
        assert_eq!(c.query_marker, None);
        assert_eq!(c.doc_marker.as_deref(), Some("[unused1]"));
        assert_eq!((c.query_tokens, c.doc_tokens, c.query_augmentation, c.mask_punctuation, c.skip_query_specials), (24, 120, false, false, true));
        assert_eq!(c.dim, Some(128));
        for bad in [
            serde_json::json!({"query_maxlen": "32"}),
            serde_json::json!({"dim": 0}),
            serde_json::json!({"query_token_id": 5}),
            serde_json::json!({"query_maxlen": 2}),
        ] {
            assert!(Conventions::from_metadata(&bad).is_err(), "{bad}");
        }
    }
}
