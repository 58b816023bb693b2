// Transformer encoders and decoders: BERT-Large (post-LN encoder, MLM head
// tied to the word embeddings, no pooler), a GPT-style decoder (pre-LN,
// causal attention, tied LM head), an MPT-style one (GPT's, without
// biases or dropout) and a LLaMA-style decoder
// (pre-RMSNorm, SwiGLU feed-forward, no biases, untied LM head).
#include <cmath>
#include <functional>

#include "builders.h"

namespace pcgx::zoo {
namespace {

struct Dims {
  int64_t batch, seq, hidden, heads, ffn;
  int64_t kv_heads = 0;  // grouped-query attention's key/value heads; 0: as many as heads
};

// Multi-head self-attention on x[b, s, h]; returns the output projection.
// `bias`: the projections have biases; `dropout`: on the attention weights.
TensorRef attention(GraphBuilder& b, TensorRef x, const Dims& d, bool causal, const std::string& n, bool bias = true,
                    double dropout = 0.1) {
  const int64_t dh = d.hidden / d.heads;
  // Grouped-query attention (Ainslie et al. 2023): kv key/value heads,
  // each read by heads / kv query heads, its copies side by side.
  const int64_t kv = d.kv_heads > 0 ? d.kv_heads : d.heads, group = d.heads / kv;
  auto heads = [&](TensorRef t, const std::string& what, std::vector<int64_t> perm, int64_t count) {
    TensorRef r = b.reshape(t, {d.batch, d.seq, count, dh}, n + "." + what + "_heads");
    if (count < d.heads) {  // [b, s, kv, g dh]: head i's g copies side by side, then [b, s, kv g, dh] (4-d throughout)
      // Two at a time (a Concat's proofs take two tensors): copies of
      // copies, doubling, and one more where the count is odd.
      int step = 0;
      std::function<TensorRef(int64_t)> copies = [&](int64_t c) -> TensorRef {
        if (c == 1) return r;
        const TensorRef half = copies(c / 2);
        TensorRef out = b.concat({half, half}, 3, n + "." + what + "_repeat" + std::to_string(step++));
        return c % 2 ? b.concat({out, r}, 3, n + "." + what + "_repeat" + std::to_string(step++)) : out;
      };
      r = b.reshape(copies(group), {d.batch, d.seq, d.heads, dh}, n + "." + what + "_repeated");
    }
    return b.transpose(r, perm, n + "." + what + "_t");
  };
  TensorRef q = heads(b.linear(x, d.hidden, "none", bias, n + ".query"), "q", {0, 2, 1, 3}, d.heads);
  TensorRef k = heads(b.linear(x, kv * dh, "none", bias, n + ".key"), "k", {0, 2, 3, 1}, kv);
  TensorRef v = heads(b.linear(x, kv * dh, "none", bias, n + ".value"), "v", {0, 2, 1, 3}, kv);
  TensorRef scores = b.batch_matmul(q, k, n + ".scores");
  scores = b.scalar_mul(scores, 1.0 / std::sqrt(static_cast<double>(dh)), n + ".scale");
  TensorRef probs = b.softmax(scores, causal, n + ".softmax");
  if (dropout > 0) probs = b.dropout(probs, dropout, n + ".attn_dropout");
  TensorRef ctx = b.batch_matmul(probs, v, n + ".context");
  ctx = b.transpose(ctx, {0, 2, 1, 3}, n + ".context_t");
  ctx = b.reshape(ctx, {d.batch, d.seq, d.hidden}, n + ".context_merge");
  return b.linear(ctx, d.hidden, "none", bias, n + ".output");
}

TensorRef feed_forward(GraphBuilder& b, TensorRef x, const Dims& d, const std::string& n) {
  TensorRef h = b.linear(x, d.ffn, "gelu", true, n + ".intermediate");
  return b.linear(h, d.hidden, "none", true, n + ".ffn_output");
}

Dims dims_of(const ModelParams& p) {
  return {param(p, "batch"), param(p, "seq"), param(p, "hidden"), param(p, "heads"), param(p, "ffn"), p.count("kv_heads") ? param(p, "kv_heads") : 0};
}

void check_heads(const Dims& d) {
  if (d.hidden % d.heads != 0)
    throw Error("hidden size " + std::to_string(d.hidden) + " is not a multiple of heads " + std::to_string(d.heads));
  if (d.kv_heads > 0 && (d.kv_heads > d.heads || d.heads % d.kv_heads != 0))
    throw FieldError("ModelParams.kv_heads", std::to_string(d.kv_heads) + " key/value heads do not divide " + std::to_string(d.heads) + " heads");
}

// logits = x * table^T, the LM head sharing the word embedding table.
TensorRef tied_logits(GraphBuilder& b, TensorRef x, TensorRef table) {
  return b.matmul(x, b.transpose(table, {1, 0}, "word_embeddings.T"), "lm_logits");
}

}  // namespace

ModelSpec bert_large(bool tiny) {
  ModelSpec s = named(tiny, "bert-large", "BERT-Large encoder with a masked-LM head (tied), no pooler");
  s.source = "Devlin et al. 2019: 24 layers, hidden 1024, 16 heads, FFN 4096, vocab 30522; Unity per-GPU batch 4";
  s.defaults = tiny ? ModelParams{{"batch", 2}, {"seq", 16}, {"layers", 2}, {"hidden", 32}, {"heads", 4},
                                  {"ffn", 64}, {"vocab", 100}, {"max_positions", 16}}
                    : ModelParams{{"batch", 4}, {"seq", 512}, {"layers", 24}, {"hidden", 1024}, {"heads", 16},
                                  {"ffn", 4096}, {"vocab", 30522}, {"max_positions", 512}};
  s.param_docs = {{"batch", "sequences per step"}, {"seq", "tokens per sequence"}, {"layers", "encoder layers"},
                  {"hidden", "model width"}, {"heads", "attention heads"}, {"ffn", "feed-forward width"},
                  {"vocab", "vocabulary size"}, {"max_positions", "position embeddings"}};
  s.build = [](const ModelParams& p) {
    const Dims d = dims_of(p);
    check_heads(d);
    const int64_t vocab = param(p, "vocab");
    if (d.seq > param(p, "max_positions")) throw Error("seq exceeds max_positions");
    GraphBuilder b("bert-large");
    TensorRef tokens = b.input("tokens", {d.batch, d.seq}, DataType::kInt64, vocab);
    TensorRef positions = b.input("positions", {d.batch, d.seq}, DataType::kInt64, d.seq);
    TensorRef segments = b.input("segments", {d.batch, d.seq}, DataType::kInt64, 2);
    TensorRef word_table = b.weight("word_embeddings.table", {vocab, d.hidden});
    TensorRef x = b.op("Embedding", {}, {tokens, word_table}, "word_embeddings");
    x = b.binary("EwAdd", x, b.embedding(positions, param(p, "max_positions"), d.hidden, "position_embeddings"), "emb_add0");
    x = b.binary("EwAdd", x, b.embedding(segments, 2, d.hidden, "token_type_embeddings"), "emb_add1");
    x = b.dropout(b.layer_norm(x, "embeddings.ln"), 0.1, "embeddings.dropout");
    for (int64_t l = 0; l < param(p, "layers"); ++l) {
      const std::string n = "layer" + std::to_string(l);
      TensorRef a = b.dropout(attention(b, x, d, false, n + ".attention"), 0.1, n + ".attn_out_dropout");
      x = b.layer_norm(b.binary("EwAdd", x, a, n + ".attn_residual"), n + ".attn_ln");
      TensorRef f = b.dropout(feed_forward(b, x, d, n), 0.1, n + ".ffn_dropout");
      x = b.layer_norm(b.binary("EwAdd", x, f, n + ".ffn_residual"), n + ".ffn_ln");
    }
    TensorRef h = b.layer_norm(b.linear(x, d.hidden, "gelu", true, "mlm.transform"), "mlm.ln");
    TensorRef labels = b.input("labels", {d.batch, d.seq}, DataType::kInt64, vocab);
    b.graph().add_output(b.softmax_cross_entropy(tied_logits(b, h, word_table), labels));
    return b.finish();
  };
  return s;
}

namespace {

// GPT's decoder (pre-LN, causal attention, learned positions, tied LM
// head), its projections with biases or without and its dropout at
// `dropout` (0: none at all, as MPT's rates of 0 run).
Graph gpt_decoder(const ModelParams& p, const std::string& name, bool bias, double dropout) {
  const Dims d = dims_of(p);
  check_heads(d);
  const int64_t vocab = param(p, "vocab");
  GraphBuilder b(name);
  auto drop = [&](TensorRef x, const std::string& n) { return dropout > 0 ? b.dropout(x, dropout, n) : x; };
  TensorRef tokens = b.input("tokens", {d.batch, d.seq}, DataType::kInt64, vocab);
  TensorRef positions = b.input("positions", {d.batch, d.seq}, DataType::kInt64, d.seq);
  TensorRef wte = b.weight("wte.table", {vocab, d.hidden});
  TensorRef x = b.op("Embedding", {}, {tokens, wte}, "wte");
  x = b.binary("EwAdd", x, b.embedding(positions, d.seq, d.hidden, "wpe"), "emb_add");
  x = drop(x, "emb_dropout");
  for (int64_t l = 0; l < param(p, "layers"); ++l) {
    const std::string n = "block" + std::to_string(l);
    TensorRef a = attention(b, b.layer_norm(x, n + ".ln1"), d, true, n + ".attn", bias, dropout);
    x = b.binary("EwAdd", x, drop(a, n + ".attn_dropout"), n + ".attn_residual");
    TensorRef h = b.linear(b.layer_norm(x, n + ".ln2"), d.ffn, "gelu", bias, n + ".mlp.intermediate");
    TensorRef f = b.linear(h, d.hidden, "none", bias, n + ".mlp.ffn_output");
    x = b.binary("EwAdd", x, drop(f, n + ".mlp_dropout"), n + ".mlp_residual");
  }
  x = b.layer_norm(x, "ln_f");
  TensorRef labels = b.input("labels", {d.batch, d.seq}, DataType::kInt64, vocab);
  b.graph().add_output(b.softmax_cross_entropy(tied_logits(b, x, wte), labels));
  return b.finish();
}

}  // namespace

// The tiny decoder GPT and MPT share (their full sizes differ).
const ModelParams kTinyDecoder{{"batch", 2}, {"seq", 16}, {"layers", 2}, {"hidden", 32}, {"heads", 4}, {"ffn", 128}, {"vocab", 100}};

ModelSpec gpt(bool tiny) {
  ModelSpec s = named(tiny, "gpt", "GPT-style decoder (pre-LN, causal attention, tied LM head)");
  s.source = "GPT-2 small (Radford et al. 2019): 12 layers, hidden 768, 12 heads, context 1024, vocab 50257";
  s.defaults = tiny ? kTinyDecoder
                    : ModelParams{{"batch", 8}, {"seq", 1024}, {"layers", 12}, {"hidden", 768}, {"heads", 12},
                                  {"ffn", 3072}, {"vocab", 50257}};
  s.param_docs = {{"batch", "sequences per step"}, {"seq", "context length"}, {"layers", "decoder layers"},
                  {"hidden", "model width"}, {"heads", "attention heads"}, {"ffn", "feed-forward width"},
                  {"vocab", "vocabulary size"}};
  s.build = [](const ModelParams& p) { return gpt_decoder(p, "gpt", true, 0.1); };
  return s;
}

ModelSpec mpt(bool tiny) {
  ModelSpec s = named(tiny, "mpt", "MPT-style decoder (pre-LN, causal attention, no biases, no dropout, tied LM head)");
  s.source = "MPT-7B as llm-foundry trains it (MosaicML 2023; scripts/train/yamls/pretrain/mpt-7b.yaml and the MPT "
             "config's defaults): 32 layers, hidden 4096, 32 heads, FFN 4 x hidden, vocabulary 50368 (the released model "
             "pads it to 50432), context 2048, micro-batch 8, learned positions (the default; its benchmark tables' "
             "parameter counts grow by seq x hidden with the context), no biases in the projections, dropout rates 0 (no "
             "dropout at all). GPT's block and names otherwise; the norms keep their bias here (MPT's have none: 2 x "
             "hidden parameters a layer); the released MPT-7B's ALiBi would replace the position table by biases inside "
             "the attention kernel";
  s.defaults = tiny ? kTinyDecoder
                    : ModelParams{{"batch", 8}, {"seq", 2048}, {"layers", 32}, {"hidden", 4096}, {"heads", 32},
                                  {"ffn", 16384}, {"vocab", 50368}};
  s.param_docs = {{"batch", "sequences per step"}, {"seq", "context length"}, {"layers", "decoder layers"},
                  {"hidden", "model width (d_model)"}, {"heads", "attention heads"}, {"ffn", "feed-forward width (expansion_ratio x d_model)"},
                  {"vocab", "vocabulary size"}};
  s.build = [](const ModelParams& p) { return gpt_decoder(p, "mpt", false, 0.0); };
  return s;
}

ModelSpec llama(bool tiny) {
  ModelSpec s = named(tiny, "llama", "LLaMA-style decoder (pre-RMSNorm, SwiGLU feed-forward, causal attention, no biases, untied LM head)");
  s.source = "LLaMA 7B (Touvron et al. 2023, Table 2): 32 layers, hidden 4096, 32 heads, SwiGLU FFN 11008, vocab 32000, "
             "context 2048; 6,738,415,616 parameters. Here the context is 512 by default (seq=2048 restores it: "
             "every float32 activation of a 2048-token sequence is 77 GiB, so at 2048 a plan needs bf16 and "
             "recomputation, which optimize's --recompute auto chooses). Rotary position embeddings are not "
             "modelled (no parameters: an elementwise rotation of q and k per position)";
  s.defaults = tiny ? ModelParams{{"batch", 2}, {"seq", 16}, {"layers", 2}, {"hidden", 32}, {"heads", 4},
                                  {"kv_heads", 0}, {"ffn", 64}, {"vocab", 100}}
                    : ModelParams{{"batch", 1}, {"seq", 512}, {"layers", 32}, {"hidden", 4096}, {"heads", 32},
                                  {"kv_heads", 0}, {"ffn", 11008}, {"vocab", 32000}};
  s.param_docs = {{"batch", "sequences per step"}, {"seq", "context length"}, {"layers", "decoder layers"},
                  {"hidden", "model width"}, {"heads", "attention heads"},
                  {"kv_heads", "key/value heads (grouped-query attention, LLaMA-2 70B's 8; each read by heads / kv_heads query heads); 0: as many as heads"},
                  {"ffn", "SwiGLU hidden width"}, {"vocab", "vocabulary size"}};
  s.build = [](const ModelParams& p) {
    const Dims d = dims_of(p);
    check_heads(d);
    const int64_t vocab = param(p, "vocab");
    GraphBuilder b("llama");
    Attributes eps;
    eps.set("eps", 1e-6);
    auto rms_norm = [&](TensorRef x, const std::string& n) {
      return b.op("RMSNorm", eps, {x, b.weight(n + ".weight", {d.hidden}, "ones")}, n);
    };
    TensorRef tokens = b.input("tokens", {d.batch, d.seq}, DataType::kInt64, vocab);
    TensorRef x = b.embedding(tokens, vocab, d.hidden, "embed_tokens");
    for (int64_t l = 0; l < param(p, "layers"); ++l) {
      const std::string n = "layers" + std::to_string(l);
      TensorRef a = attention(b, rms_norm(x, n + ".input_norm"), d, true, n + ".self_attn", false, 0.0);
      x = b.binary("EwAdd", x, a, n + ".attn_residual");
      // SwiGLU: down(silu(gate(h)) * up(h)).
      TensorRef h = rms_norm(x, n + ".post_attention_norm");
      TensorRef gate = b.unary("Silu", b.linear(h, d.ffn, "none", false, n + ".mlp.gate_proj"), n + ".mlp.silu");
      TensorRef up = b.linear(h, d.ffn, "none", false, n + ".mlp.up_proj");
      TensorRef f = b.linear(b.binary("EwMul", gate, up, n + ".mlp.gated"), d.hidden, "none", false, n + ".mlp.down_proj");
      x = b.binary("EwAdd", x, f, n + ".mlp_residual");
    }
    x = rms_norm(x, "norm");
    TensorRef logits = b.linear(x, vocab, "none", false, "lm_head");
    TensorRef labels = b.input("labels", {d.batch, d.seq}, DataType::kInt64, vocab);
    b.graph().add_output(b.softmax_cross_entropy(logits, labels));
    return b.finish();
  };
  return s;
}

}  // namespace pcgx::zoo
