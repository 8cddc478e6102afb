//! The encoder against hand-built references: MPNet's relative buckets and attention, the int8 and plain paths
//! against candle's, word rows read from disk.

use super::*;
use std::collections::HashMap;

/// Seeded values in -0.5..0.5.
fn values(n: usize, seed: &mut u64) -> Vec<f32> {
    (0..n)
        .map(|_| {
            *seed ^= *seed << 13;
            *seed ^= *seed >> 7;
            *seed ^= *seed << 17;
            ((*seed >> 11) as f64 / (1u64 << 53) as f64 - 0.5) as f32
        })
        .collect()
}

/// A tiny random MPNet checkpoint: name -> (shape, values).
fn tiny_mpnet(cfg: &BertConfig) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
    let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut w = HashMap::new();
    let mut put = |name: String, shape: Vec<usize>| {
        let v = values(shape.iter().product(), &mut seed);
        w.insert(name, (shape, v));
    };
    put("embeddings.word_embeddings.weight".into(), vec![cfg.vocab_size, h]);
    put("embeddings.position_embeddings.weight".into(), vec![cfg.max_position_embeddings, h]);
    put("embeddings.LayerNorm.weight".into(), vec![h]);
    put("embeddings.LayerNorm.bias".into(), vec![h]);
    put("encoder.relative_attention_bias.weight".into(), vec![cfg.relative_attention_num_buckets, cfg.num_attention_heads]);
    for l in 0..cfg.num_hidden_layers {
        let p = format!("encoder.layer.{l}.");
        for n in ["q", "k", "v", "o"] {
            put(format!("{p}attention.attn.{n}.weight"), vec![h, h]);
            put(format!("{p}attention.attn.{n}.bias"), vec![h]);
        }
        put(format!("{p}attention.LayerNorm.weight"), vec![h]);
        put(format!("{p}attention.LayerNorm.bias"), vec![h]);
        put(format!("{p}intermediate.dense.weight"), vec![i, h]);
        put(format!("{p}intermediate.dense.bias"), vec![i]);
        put(format!("{p}output.dense.weight"), vec![h, i]);
        put(format!("{p}output.dense.bias"), vec![h]);
        put(format!("{p}output.LayerNorm.weight"), vec![h]);
        put(format!("{p}output.LayerNorm.bias"), vec![h]);
    }
    w
}

/// MPNet's forward pass for one unpadded text, written out with plain loops (the reference).
fn naive_mpnet(w: &HashMap<String, (Vec<usize>, Vec<f32>)>, cfg: &BertConfig, ids: &[u32]) -> Vec<Vec<f32>> {
    let (h, heads) = (cfg.hidden_size, cfg.num_attention_heads);
    let d = h / heads;
    let g = |n: &str| &w[n].1;
    let linear = |x: &[f32], n: &str, out: usize| -> Vec<f32> {
        let (wt, b) = (g(&format!("{n}.weight")), g(&format!("{n}.bias")));
        (0..out).map(|o| b[o] + x.iter().enumerate().map(|(j, v)| v * wt[o * x.len() + j]).sum::<f32>()).collect()
    };
    let norm = |x: &[f32], n: &str| -> Vec<f32> {
        let mean = x.iter().sum::<f32>() / x.len() as f32;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / x.len() as f32;
        let (wt, b) = (g(&format!("{n}.weight")), g(&format!("{n}.bias")));
        x.iter().enumerate().map(|(j, v)| (v - mean) / (var + cfg.layer_norm_eps as f32).sqrt() * wt[j] + b[j]).collect()
    };
    let erf_gelu = |x: f32| {
        // erf by its Taylor series (|x| is small here).
        let z = x as f64 / std::f64::consts::SQRT_2;
        let (mut term, mut sum) = (z, z);
        for n in 1..60 {
            term *= -z * z / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        (0.5 * x as f64 * (1.0 + 2.0 / std::f64::consts::PI.sqrt() * sum)) as f32
    };
    let l = ids.len();
    let mut x: Vec<Vec<f32>> = (0..l)
        .map(|t| {
            let we = &g("embeddings.word_embeddings.weight")[ids[t] as usize * h..][..h];
            let pe = &g("embeddings.position_embeddings.weight")[(t + 2) * h..][..h];
            norm(&we.iter().zip(pe).map(|(a, b)| a + b).collect::<Vec<_>>(), "embeddings.LayerNorm")
        })
        .collect();
    let rel = g("encoder.relative_attention_bias.weight");
    let buckets = relative_buckets(l, cfg.relative_attention_num_buckets, 128);
    for layer in 0..cfg.num_hidden_layers {
        let p = format!("encoder.layer.{layer}.");
        let q: Vec<Vec<f32>> = x.iter().map(|v| linear(v, &format!("{p}attention.attn.q"), h)).collect();
        let k: Vec<Vec<f32>> = x.iter().map(|v| linear(v, &format!("{p}attention.attn.k"), h)).collect();
        let v: Vec<Vec<f32>> = x.iter().map(|v| linear(v, &format!("{p}attention.attn.v"), h)).collect();
        let mut ctx = vec![vec![0f32; h]; l];
        for hd in 0..heads {
            for i in 0..l {
                let scores: Vec<f32> = (0..l)
                    .map(|j| {
                        let dot: f32 = (0..d).map(|e| q[i][hd * d + e] * k[j][hd * d + e]).sum();
                        dot / (d as f32).sqrt() + rel[buckets[i * l + j] as usize * heads + hd]
                    })
                    .collect();
                let max = scores.iter().copied().fold(f32::MIN, f32::max);
                let exp: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f32 = exp.iter().sum();
                for j in 0..l {
                    for e in 0..d {
                        ctx[i][hd * d + e] += exp[j] / total * v[j][hd * d + e];
                    }
                }
            }
        }
        x = (0..l)
            .map(|t| {
                let o = linear(&ctx[t], &format!("{p}attention.attn.o"), h);
                let a = norm(&o.iter().zip(&x[t]).map(|(a, b)| a + b).collect::<Vec<_>>(), &format!("{p}attention.LayerNorm"));
                let inter: Vec<f32> = linear(&a, &format!("{p}intermediate.dense"), cfg.intermediate_size).into_iter().map(erf_gelu).collect();
                let out = linear(&inter, &format!("{p}output.dense"), h);
                norm(&out.iter().zip(&a).map(|(a, b)| a + b).collect::<Vec<_>>(), &format!("{p}output.LayerNorm"))
            })
            .collect();
    }
    x
}

#[test]
fn mpnet_forward_matches_a_plain_loop_reference_with_padding() {
    let cfg = BertConfig {
        architecture: Architecture::MpNet,
        relative_attention_num_buckets: 32,
        vocab_size: 40,
        hidden_size: 8,
        num_hidden_layers: 2,
        num_attention_heads: 2,
        intermediate_size: 16,
        max_position_embeddings: 40,
        type_vocab_size: 1,
        layer_norm_eps: 1e-5,
        hidden_act: "gelu".into(),
        position_offset: 2,
    };
    let w = tiny_mpnet(&cfg);
    let dev = Device::Cpu;
    let tensors = w.iter().map(|(n, (shape, v))| (format!("mpnet.{n}"), Tensor::from_vec(v.clone(), shape.as_slice(), &dev).unwrap())).collect();
    let model = BertModel::load(VarBuilder::from_tensors(tensors, DType::F32, &dev), &cfg, None, &mut HashMap::new()).unwrap();
    // Two texts in one batch: the shorter is padded (id 1) and must come out as if alone. Long enough
    // (20 tokens) for logarithmic position buckets.
    let long: Vec<u32> = (0..20).map(|i| (i * 7 + 3) % 40).collect();
    let short: Vec<u32> = vec![0, 5, 9, 2];
    let seq = long.len();
    let mut ids = long.clone();
    ids.extend(short.iter().copied().chain(std::iter::repeat_n(1, seq - short.len())));
    let mask: Vec<u32> =
        std::iter::repeat_n(1, seq).chain(std::iter::repeat_n(1, short.len())).chain(std::iter::repeat_n(0, seq - short.len())).collect();
    let t = |v: Vec<u32>| Tensor::from_vec(v, (2, seq), &dev).unwrap();
    let hidden = model.forward(&t(ids), &t(vec![0; 2 * seq]), &t(mask)).unwrap();
    let got: Vec<Vec<Vec<f32>>> = hidden.to_vec3().unwrap();
    for (b, text) in [&long, &short].into_iter().enumerate() {
        let want = naive_mpnet(&w, &cfg, text);
        for (tok, row) in want.iter().enumerate() {
            for (e, v) in row.iter().enumerate() {
                assert!((got[b][tok][e] - v).abs() < 1e-4, "text {b} token {tok} dim {e}: {} vs {v}", got[b][tok][e]);
            }
        }
    }
}

/// A tiny random BERT checkpoint (names without prefix).
fn tiny_bert(cfg: &BertConfig, positions: usize) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
    let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut w = HashMap::new();
    let mut put = |name: String, shape: Vec<usize>| {
        let v = values(shape.iter().product(), &mut seed);
        w.insert(name, (shape, v));
    };
    put("embeddings.word_embeddings.weight".into(), vec![cfg.vocab_size, h]);
    put("embeddings.position_embeddings.weight".into(), vec![positions, h]);
    put("embeddings.token_type_embeddings.weight".into(), vec![cfg.type_vocab_size, h]);
    put("embeddings.LayerNorm.weight".into(), vec![h]);
    put("embeddings.LayerNorm.bias".into(), vec![h]);
    for l in 0..cfg.num_hidden_layers {
        let p = format!("encoder.layer.{l}.");
        for n in ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"] {
            put(format!("{p}{n}.weight"), vec![h, h]);
            put(format!("{p}{n}.bias"), vec![h]);
        }
        for n in ["attention.output.LayerNorm", "output.LayerNorm"] {
            put(format!("{p}{n}.weight"), vec![h]);
            put(format!("{p}{n}.bias"), vec![h]);
        }
        put(format!("{p}intermediate.dense.weight"), vec![i, h]);
        put(format!("{p}intermediate.dense.bias"), vec![i]);
        put(format!("{p}output.dense.weight"), vec![h, i]);
        put(format!("{p}output.dense.bias"), vec![h]);
    }
    w
}

fn tensors(w: &HashMap<String, (Vec<usize>, Vec<f32>)>, prefix: &str) -> HashMap<String, Tensor> {
    w.iter().map(|(n, (shape, v))| (format!("{prefix}{n}"), Tensor::from_vec(v.clone(), shape.as_slice(), &Device::Cpu).unwrap())).collect()
}

#[test]
fn int8_dense_layers_give_the_float_models_hidden_states() {
    if !super::super::int8::supported() {
        eprintln!("skipped: this CPU has no AVX-512 VNNI (int8 weights are dequantised to f32 here)");
        return;
    }
    // Heads of 16, 32 and 64 columns (the attention has register paths for 32 and 64, a plain loop else).
    for (hidden, heads) in [(64, 4), (64, 2), (128, 2)] {
        int8_model_matches(hidden, heads);
    }
}

fn int8_model_matches(hidden: usize, heads: usize) {
    let cfg = BertConfig {
        architecture: Architecture::Bert,
        relative_attention_num_buckets: 32,
        vocab_size: 50,
        hidden_size: hidden,
        num_hidden_layers: 2,
        num_attention_heads: heads,
        intermediate_size: 128,
        max_position_embeddings: 32,
        type_vocab_size: 1,
        layer_norm_eps: 1e-5,
        hidden_act: "gelu".into(),
        position_offset: 0,
    };
    let mut w = tiny_bert(&cfg, 32);
    // Every encoder dense weight quantised symmetrically per output row; the float twin gets the same values
    // dequantised, so the two models differ only by the activations' int8 rounding.
    let mut int8 = HashMap::new();
    for (name, (shape, v)) in &mut w {
        if !(name.starts_with("encoder.") && name.ends_with(".weight") && shape.len() == 2) {
            continue;
        }
        let (out, inp) = (shape[0], shape[1]);
        let mut q = Vec::with_capacity(out * inp);
        let mut scale = Vec::with_capacity(out);
        for row in v.chunks(inp) {
            let s = row.iter().fold(0f32, |m, x| m.max(x.abs())) / 127.0;
            q.extend(row.iter().map(|x| (x / s).round() as i8));
            scale.push(s);
        }
        let iw = Int8Weight::new(out, inp, &q, scale);
        *v = iw.dequantize();
        int8.insert(name.clone(), iw);
    }
    assert_eq!(int8.len(), 12);
    // The same int8 layers for a model that will run them through candle's tensors (below).
    let mut int8_again = int8.clone();
    let dev = Device::Cpu;
    let float = BertModel::load(VarBuilder::from_tensors(tensors(&w, ""), DType::F32, &dev), &cfg, None, &mut HashMap::new()).unwrap();
    let quant = BertModel::load(VarBuilder::from_tensors(tensors(&w, ""), DType::F32, &dev), &cfg, None, &mut int8).unwrap();
    assert!(int8.is_empty(), "every int8 weight was taken by a layer");
    let ids: Vec<u32> = vec![2, 7, 7, 49, 3, 12, 30, 1, 9, 0, 0, 0];
    let mask: Vec<u32> = vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0];
    let t = |v: Vec<u32>| Tensor::from_vec(v, (1, 12), &dev).unwrap();
    let run = |m: &BertModel| -> Vec<Vec<f32>> {
        m.forward(&t(ids.clone()), &t(vec![0; 12]), &t(mask.clone())).unwrap().squeeze(0).unwrap().to_vec2().unwrap()
    };
    let (a, b) = (run(&float), run(&quant));
    for (tok, (x, y)) in a.iter().zip(&b).take(9).enumerate() {
        let cos = memory_core::embedding::cosine(x, y);
        assert!(cos > 0.999, "token {tok}: cosine {cos}");
    }

    // A batch of sequences of different lengths, padded on the right: the int8 model runs on plain buffers
    // (`plain`); each sequence gives what the float model gives it alone, and what the same int8 model gives
    // through candle's tensors with the padding masked.
    assert!(quant.plain_layers().is_some() && float.plain_layers().is_none());
    let lens = [9usize, 12, 4];
    let seqs: Vec<Vec<u32>> = lens.iter().enumerate().map(|(s, &n)| (0..n).map(|i| ((i * 7 + s * 13 + 2) % 50) as u32).collect()).collect();
    let (mut ids, mut mask) = (Vec::new(), Vec::new());
    for q in &seqs {
        ids.extend(q.iter().copied().chain(std::iter::repeat_n(0, 12 - q.len())));
        mask.extend(std::iter::repeat_n(1u32, q.len()).chain(std::iter::repeat_n(0, 12 - q.len())));
    }
    let t3 = |v: Vec<u32>| Tensor::from_vec(v, (3, 12), &dev).unwrap();
    let batch =
        |m: &BertModel| -> Vec<Vec<Vec<f32>>> { m.forward(&t3(ids.clone()), &t3(vec![0; 36]), &t3(mask.clone())).unwrap().to_vec3().unwrap() };
    let plain = batch(&quant);
    let mut tensors_only = BertModel::load(VarBuilder::from_tensors(tensors(&w, ""), DType::F32, &dev), &cfg, None, &mut int8_again).unwrap();
    tensors_only.plain_enabled = false;
    assert!(tensors_only.plain_layers().is_none());
    let masked = batch(&tensors_only);
    for (s, q) in seqs.iter().enumerate() {
        let n = q.len();
        let alone = |m: &BertModel| -> Vec<Vec<f32>> {
            let t1 = |v: Vec<u32>| Tensor::from_vec(v, (1, n), &dev).unwrap();
            m.forward(&t1(q.clone()), &t1(vec![0; n]), &t1(vec![1; n])).unwrap().squeeze(0).unwrap().to_vec2().unwrap()
        };
        let reference = alone(&float);
        for tok in 0..n {
            let cos = memory_core::embedding::cosine(&plain[s][tok], &reference[tok]);
            assert!(cos > 0.999, "sequence {s} token {tok}: cosine {cos} against the float model");
            let cos = memory_core::embedding::cosine(&plain[s][tok], &masked[s][tok]);
            assert!(cos > 0.99999, "sequence {s} token {tok}: cosine {cos} against candle's path");
        }
        assert!(plain[s][n..].iter().flatten().all(|v| *v == 0.0), "padding rows are zero");
    }
}

#[test]
fn xlm_roberta_positions_start_after_padding_and_word_rows_read_from_a_file() {
    let bert_cfg = BertConfig {
        architecture: Architecture::Bert,
        relative_attention_num_buckets: 32,
        vocab_size: 50,
        hidden_size: 8,
        num_hidden_layers: 2,
        num_attention_heads: 2,
        intermediate_size: 16,
        max_position_embeddings: 30,
        type_vocab_size: 1,
        layer_norm_eps: 1e-5,
        hidden_act: "gelu".into(),
        position_offset: 0,
    };
    let w = tiny_bert(&bert_cfg, 32);
    let dev = Device::Cpu;
    // BERT reads positions 0.. of a table; XLM-R the same table shifted by the two reserved rows.
    let mut bert_w = w.clone();
    let (shape, pos) = &w["embeddings.position_embeddings.weight"];
    bert_w.insert("embeddings.position_embeddings.weight".into(), (vec![30, shape[1]], pos[2 * shape[1]..].to_vec()));
    let xlmr_cfg = BertConfig { architecture: Architecture::XlmRoberta, max_position_embeddings: 32, position_offset: 2, ..bert_cfg.clone() };
    let bert = BertModel::load(VarBuilder::from_tensors(tensors(&bert_w, ""), DType::F32, &dev), &bert_cfg, None, &mut HashMap::new()).unwrap();
    let xlmr = BertModel::load(VarBuilder::from_tensors(tensors(&w, "roberta."), DType::F32, &dev), &xlmr_cfg, None, &mut HashMap::new()).unwrap();
    // The word table in a file, read row by row.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("words.bin");
    let (wshape, words) = &w["embeddings.word_embeddings.weight"];
    let mut bytes = vec![0u8; 12]; // some bytes before the table
    bytes.extend(words.iter().flat_map(|x| x.to_le_bytes()));
    std::fs::write(&path, &bytes).unwrap();
    let rows = WordRows::new(std::fs::File::open(&path).unwrap(), 12, DType::F32, wshape[0], wshape[1]);
    let mut no_words = tensors(&w, "roberta.");
    no_words.remove("roberta.embeddings.word_embeddings.weight");
    let mapped = BertModel::load(VarBuilder::from_tensors(no_words, DType::F32, &dev), &xlmr_cfg, Some(rows), &mut HashMap::new()).unwrap();

    let ids: Vec<u32> = vec![0, 7, 7, 49, 3, 12, 1, 1];
    let mask: Vec<u32> = vec![1, 1, 1, 1, 1, 1, 0, 0];
    let t = |v: Vec<u32>| Tensor::from_vec(v, (1, 8), &dev).unwrap();
    let run = |m: &BertModel| -> Vec<f32> {
        m.forward(&t(ids.clone()), &t(vec![0; 8]), &t(mask.clone())).unwrap().flatten_all().unwrap().to_vec1().unwrap()
    };
    let (a, b, c) = (run(&bert), run(&xlmr), run(&mapped));
    for i in 0..a.len() {
        assert!((a[i] - b[i]).abs() < 1e-5, "value {i}: bert {} xlmr {}", a[i], b[i]);
        assert_eq!(b[i], c[i], "value {i}: rows read from the file differ from the table");
    }
    // A token id outside the table is an error, not a crash.
    assert!(mapped.forward(&t(vec![50; 8]), &t(vec![0; 8]), &t(vec![1; 8])).is_err());
}

#[test]
fn relative_position_buckets_follow_mpnet() {
    // Values of MPNet's bucket function (32 buckets, max distance 128) for key - query = -200..200.
    let b = relative_buckets(401, 32, 128);
    // Computed with MPNet's own formula (Hugging Face `relative_position_bucket`), in Python.
    let at = |rel: i64| b[200 * 401 + (200 + rel) as usize];
    let expect: &[(i64, u32)] = &[
        (0, 0),
        (-1, 1),
        (-7, 7),
        (-8, 8),
        (-11, 8),
        (-16, 10),
        (-20, 10),
        (-32, 12),
        (-64, 14),
        (-127, 15),
        (-200, 15),
        (1, 17),
        (7, 23),
        (8, 24),
        (12, 25),
        (16, 26),
        (23, 27),
        (32, 28),
        (45, 28),
        (64, 30),
        (91, 31),
        (200, 31),
    ];
    for &(rel, want) in expect {
        assert_eq!(at(rel), want, "key - query = {rel}");
    }
}
