//! The encoder family and the architecture numbers of a checkpoint.

/// Encoder family of a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    Bert,
    /// XLM-RoBERTa / RoBERTa: BERT's weights, RoBERTa's positions.
    XlmRoberta,
    MpNet,
}

/// The architecture numbers a BERT (or MPNet) checkpoint needs.
#[derive(Debug, Clone, PartialEq)]
pub struct BertConfig {
    pub architecture: Architecture,
    /// MPNet's relative-position buckets (32); unused for BERT.
    pub relative_attention_num_buckets: usize,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    /// `gelu` (erf, BERT's) or `gelu_new` / `gelu_pytorch_tanh` (tanh approximation).
    pub hidden_act: String,
    /// Position id of a text's first token: 0 for BERT, `pad_token_id + 1` (2) for XLM-RoBERTa and MPNet.
    pub position_offset: usize,
}
