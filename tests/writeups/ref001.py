"""Writeup 001 (Zhihu article, pengshuang/Transformer), transcribed as an independent reference.

The classes follow the seed's code with its names. Fixed, and only these (each is a slip the
`writeup-001` preset's notes list, built by zoo as intended):

1. `import torch.functional as F` has no `relu`: `torch.nn.functional` is imported.
2. `if attn_mask:` on a tensor raises: `if attn_mask is not None:`.
3. Heads were split with `view(batch * heads, -1, dim_per_head)` (no transpose: positions mix
   across heads) and masks repeated head-major with `repeat(num_heads, 1, 1)`: heads are split
   with a transpose, batch-major, and each mask is repeated per head in the same order.
4. EncoderLayer passed the `padding_mask` function instead of its `attn_mask` argument.
5. `drange` is `range`.
6. The sinusoid table was `torch.cat` of a tensor with a numpy array: it is made a float32 tensor.
7. The cross-attention mask was `padding_mask(tgt_seq, src_seq)` (target padding as keys, shape
   (B, S, T)): it is `padding_mask(src_seq, tgt_seq)`, source padding as keys, (B, T, S).

PAD is 0 throughout, as the writeup hard-codes it.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F  # fix 1

from ._harness import CanonicalMap, tap


class ScaledDotProductAttention(nn.Module):
    """Scaled dot-product attention mechanism."""

    def __init__(self, attention_dropout=0.0):
        super(ScaledDotProductAttention, self).__init__()
        self.dropout = nn.Dropout(attention_dropout)
        self.softmax = nn.Softmax(dim=2)

    def forward(self, q, k, v, scale=None, attn_mask=None):
        # q (B*H, Lq, Dh), k and v (B*H, Lk, Dh), attn_mask (B*H, Lq, Lk) True = blocked
        attention = torch.bmm(q, k.transpose(1, 2))  # (B*H, Lq, Lk)
        if scale:
            attention = attention * scale
        if attn_mask is not None:  # fix 2
            attention = attention.masked_fill_(attn_mask, -np.inf)
        attention = self.softmax(attention)
        attention = self.dropout(attention)
        context = torch.bmm(attention, v)  # (B*H, Lq, Dh)
        return context, attention


class MultiHeadAttention(nn.Module):
    as_written = False  # slip 3 restored when True (set by make)

    def __init__(self, model_dim=512, num_heads=8, dropout=0.0):
        super(MultiHeadAttention, self).__init__()
        self.dim_per_head = model_dim // num_heads
        self.num_heads = num_heads
        self.linear_k = nn.Linear(model_dim, self.dim_per_head * num_heads)
        self.linear_v = nn.Linear(model_dim, self.dim_per_head * num_heads)
        self.linear_q = nn.Linear(model_dim, self.dim_per_head * num_heads)
        self.dot_product_attention = ScaledDotProductAttention(dropout)
        self.linear_final = nn.Linear(model_dim, model_dim)
        self.dropout = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(model_dim)

    def forward(self, key, value, query, attn_mask=None):
        residual = query
        dim_per_head = self.dim_per_head
        num_heads = self.num_heads
        batch_size = key.size(0)

        key = self.linear_k(key)  # (B, Lk, D)
        value = self.linear_v(value)
        query = self.linear_q(query)  # (B, Lq, D)

        if self.as_written:  # the seed's lines (slip 3), selected by make(..., as_written=True)
            key = key.view(batch_size * num_heads, -1, dim_per_head)
            value = value.view(batch_size * num_heads, -1, dim_per_head)
            query = query.view(batch_size * num_heads, -1, dim_per_head)
            if attn_mask is not None:
                attn_mask = attn_mask.repeat(num_heads, 1, 1)
        else:
            # fix 3: (B, L, D) -> (B, L, H, Dh) -> (B, H, L, Dh) -> (B*H, L, Dh), batch-major
            key = key.view(batch_size, -1, num_heads, dim_per_head).transpose(1, 2)
            key = key.reshape(batch_size * num_heads, -1, dim_per_head)
            value = value.view(batch_size, -1, num_heads, dim_per_head).transpose(1, 2)
            value = value.reshape(batch_size * num_heads, -1, dim_per_head)
            query = query.view(batch_size, -1, num_heads, dim_per_head).transpose(1, 2)
            query = query.reshape(batch_size * num_heads, -1, dim_per_head)

            if attn_mask is not None:  # fix 2
                attn_mask = attn_mask.repeat_interleave(num_heads, dim=0)  # fix 3: (B, Lq, Lk) -> (B*H, Lq, Lk)

        scale = (key.size(-1)) ** -0.5
        context, attention = self.dot_product_attention(query, key, value, scale, attn_mask)

        if self.as_written:
            context = context.view(batch_size, -1, dim_per_head * num_heads)
        else:
            # fix 3: (B*H, Lq, Dh) -> (B, H, Lq, Dh) -> (B, Lq, H*Dh)
            context = context.view(batch_size, num_heads, -1, dim_per_head).transpose(1, 2)
            context = context.reshape(batch_size, -1, dim_per_head * num_heads)

        output = self.linear_final(context)
        output = self.dropout(output)
        output = self.layer_norm(residual + output)
        return output, attention


def padding_mask(seq_k, seq_q):
    # seq_k, seq_q (B, L); True where the key is PAD (0)
    len_q = seq_q.size(1)
    pad_mask = seq_k.eq(0)
    pad_mask = pad_mask.unsqueeze(1).expand(-1, len_q, -1)  # (B, Lq, Lk)
    return pad_mask


def sequence_mask(seq):
    batch_size, seq_len = seq.size()
    mask = torch.triu(torch.ones((seq_len, seq_len), dtype=torch.uint8), diagonal=1)
    mask = mask.unsqueeze(0).expand(batch_size, -1, -1)  # (B, L, L) uint8, 1 = future
    return mask


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_seq_len):
        super(PositionalEncoding, self).__init__()
        position_encoding = np.array([
            [pos / np.power(10000, 2.0 * (j // 2) / d_model) for j in range(d_model)]
            for pos in range(max_seq_len)])
        position_encoding[:, 0::2] = np.sin(position_encoding[:, 0::2])
        position_encoding[:, 1::2] = np.cos(position_encoding[:, 1::2])
        pad_row = torch.zeros([1, d_model])
        position_encoding = torch.cat((pad_row, torch.tensor(position_encoding, dtype=torch.float32)))  # fix 6
        self.position_encoding = nn.Embedding(max_seq_len + 1, d_model)
        self.position_encoding.weight = nn.Parameter(position_encoding, requires_grad=False)

    def forward(self, input_len):
        # input_len (B, 1) lengths -> (B, max_len, D); row 0 of the table (PAD) is all zeros
        max_len = torch.max(input_len)
        tensor = torch.cuda.LongTensor if input_len.is_cuda else torch.LongTensor
        input_pos = tensor([
            list(range(1, len + 1)) + [0] * (max_len - len) for len in input_len])
        return self.position_encoding(input_pos)


class PositionalWiseFeedForward(nn.Module):
    def __init__(self, model_dim=512, ffn_dim=2048, dropout=0.0):
        super(PositionalWiseFeedForward, self).__init__()
        self.w1 = nn.Conv1d(model_dim, ffn_dim, 1)
        self.w2 = nn.Conv1d(ffn_dim, model_dim, 1)
        self.dropout = nn.Dropout(dropout)
        self.layer_norm = nn.LayerNorm(model_dim)

    def forward(self, x):
        output = x.transpose(1, 2)  # (B, D, L)
        output = self.w2(F.relu(self.w1(output)))  # (B, F, L) -> (B, D, L)
        output = self.dropout(output.transpose(1, 2))  # (B, L, D)
        output = self.layer_norm(x + output)
        return output


class EncoderLayer(nn.Module):
    """One layer of the Encoder."""

    def __init__(self, model_dim=512, num_heads=8, ffn_dim=2048, dropout=0.0):
        super(EncoderLayer, self).__init__()
        self.attention = MultiHeadAttention(model_dim, num_heads, dropout)
        self.feed_forward = PositionalWiseFeedForward(model_dim, ffn_dim, dropout)

    def forward(self, inputs, attn_mask=None):
        context, attention = self.attention(inputs, inputs, inputs, attn_mask)  # fix 4
        output = self.feed_forward(context)
        return output, attention


class Encoder(nn.Module):
    """Encoder composed of multiple EncoderLayer."""

    def __init__(self, vocab_size, max_seq_len, num_layers=6, model_dim=512, num_heads=8, ffn_dim=2048, dropout=0.0):
        super(Encoder, self).__init__()
        self.encoder_layers = nn.ModuleList(
            [EncoderLayer(model_dim, num_heads, ffn_dim, dropout) for _ in range(num_layers)])  # fix 5
        self.seq_embedding = nn.Embedding(vocab_size + 1, model_dim, padding_idx=0)
        self.pos_embedding = PositionalEncoding(model_dim, max_seq_len)

    def forward(self, inputs, inputs_len):
        output = self.seq_embedding(inputs)
        output += self.pos_embedding(inputs_len)
        self_attention_mask = padding_mask(inputs, inputs)  # (B, S, S)
        attentions = []
        for encoder in self.encoder_layers:
            output, attention = encoder(output, self_attention_mask)
            attentions.append(attention)
        return output, attentions


class DecoderLayer(nn.Module):
    def __init__(self, model_dim, num_heads=8, ffn_dim=2048, dropout=0.0):
        super(DecoderLayer, self).__init__()
        self.attention = MultiHeadAttention(model_dim, num_heads, dropout)  # one module for both attentions
        self.feed_forward = PositionalWiseFeedForward(model_dim, ffn_dim, dropout)

    def forward(self, dec_inputs, enc_outputs, self_attn_mask=None, context_attn_mask=None):
        dec_output, self_attention = self.attention(dec_inputs, dec_inputs, dec_inputs, self_attn_mask)
        dec_output, context_attention = self.attention(enc_outputs, enc_outputs, dec_output, context_attn_mask)
        dec_output = self.feed_forward(dec_output)
        return dec_output, self_attention, context_attention


class Decoder(nn.Module):
    def __init__(self, vocab_size, max_seq_len, num_layers=6, model_dim=512, num_heads=8, ffn_dim=2048, dropout=0.0):
        super(Decoder, self).__init__()
        self.num_layers = num_layers
        self.decoder_layers = nn.ModuleList(
            [DecoderLayer(model_dim, num_heads, ffn_dim, dropout) for _ in range(num_layers)])  # fix 5
        self.seq_embedding = nn.Embedding(vocab_size + 1, model_dim, padding_idx=0)
        self.pos_embedding = PositionalEncoding(model_dim, max_seq_len)

    def forward(self, inputs, inputs_len, enc_output, context_attn_mask=None):
        output = self.seq_embedding(inputs)
        output += self.pos_embedding(inputs_len)
        self_attention_padding_mask = padding_mask(inputs, inputs)  # (B, T, T) bool
        seq_mask = sequence_mask(inputs)  # (B, T, T) uint8
        self_attn_mask = torch.gt((self_attention_padding_mask + seq_mask), 0)  # (B, T, T) bool
        self_attentions = []
        context_attentions = []
        for decoder in self.decoder_layers:
            output, self_attn, context_attn = decoder(output, enc_output, self_attn_mask, context_attn_mask)
            self_attentions.append(self_attn)
            context_attentions.append(context_attn)
        return output, self_attentions, context_attentions


class Transformer(nn.Module):
    as_written = False  # slip 7 restored when True (set by make)

    def __init__(self, src_vocab_size, src_max_len, tgt_vocab_size, tgt_max_len, num_layers=6, model_dim=512,
                 num_heads=8, ffn_dim=2048, dropout=0.2):
        super(Transformer, self).__init__()
        self.encoder = Encoder(src_vocab_size, src_max_len, num_layers, model_dim, num_heads, ffn_dim, dropout)
        self.decoder = Decoder(tgt_vocab_size, tgt_max_len, num_layers, model_dim, num_heads, ffn_dim, dropout)
        self.linear = nn.Linear(model_dim, tgt_vocab_size, bias=False)
        self.softmax = nn.Softmax(dim=2)

    def forward(self, src_seq, src_len, tgt_seq, tgt_len):
        if self.as_written:  # slip 7 as the seed writes it: (B, S, T)
            context_attn_mask = padding_mask(tgt_seq, src_seq)
        else:
            context_attn_mask = padding_mask(src_seq, tgt_seq)  # fix 7: (B, T, S)
        output, enc_self_attn = self.encoder(src_seq, src_len)
        output, dec_self_attn, ctx_attn = self.decoder(tgt_seq, tgt_len, output, context_attn_mask)
        output = self.linear(output)
        output = self.softmax(output)  # (B, T, V) probabilities
        return output, enc_self_attn, dec_self_attn, ctx_attn


# -- harness ---------------------------------------------------------------------------------------
def make(spec, max_len: int | None = None, as_written: bool = False) -> Transformer:
    """Transformer at the spec's sizes. One `num_layers` serves both stacks, and PAD is 0.

    `max_len` (default: the spec's positional table length) sizes the frozen position tables; they
    are not trainable, so counting parameters may pass a short one to skip building a long table.
    """
    assert spec.encoder_layers == spec.decoder_layers, "001 has one num_layers for both stacks"
    assert spec.pad_id == 0, "001 hard-codes PAD = 0"
    max_len = spec.positional.max_len if max_len is None else max_len
    model = Transformer(spec.src_vocab, max_len, spec.tgt_vocab, max_len, num_layers=spec.encoder_layers,
                        model_dim=spec.d_model, num_heads=spec.n_heads, ffn_dim=spec.d_ff, dropout=spec.dropout)
    for module in model.modules():  # `as_written` restores slips 3 and 7, the two that change the function
        if isinstance(module, (Transformer, MultiHeadAttention)):
            module.as_written = as_written
    return model


def run(model: Transformer, src, tgt_in, pad_id: int):
    """(B, S), (B, T) -> (B, T, V) probabilities. Lengths, (B, 1), count the non-pad tokens."""
    assert pad_id == 0
    src_len = src.ne(pad_id).sum(dim=1, keepdim=True)  # (B, 1)
    tgt_len = tgt_in.ne(pad_id).sum(dim=1, keepdim=True)
    return model(src, src_len, tgt_in, tgt_len)[0]


def masks(model: Transformer, src, tgt_in, pad_id: int):
    """(encoder self, decoder self, cross) masks as the first encoder and decoder layers receive them."""
    with tap(model.encoder.encoder_layers[0]) as enc, tap(model.decoder.decoder_layers[0]) as dec:
        run(model, src, tgt_in, pad_id)
    return enc.args[1], dec.args[2], dec.args[3]


def _weight_bias(ref: str, canon: str) -> CanonicalMap:
    """A Linear, Conv1d or LayerNorm: weight and bias (Conv1d's (F, D, 1) is filled from zoo's (F, D))."""
    return {f"{ref}.weight": (f"{canon}.weight",), f"{ref}.bias": (f"{canon}.bias",)}


def _attention(ref: str, canon: str, norm: str) -> CanonicalMap:
    out: CanonicalMap = {}
    for ref_name, canon_name in (("linear_q", "q"), ("linear_k", "k"), ("linear_v", "v"), ("linear_final", "o")):
        out.update(_weight_bias(f"{ref}.{ref_name}", f"{canon}.{canon_name}"))
    out.update(_weight_bias(f"{ref}.layer_norm", norm))
    return out


def canonical_map(spec) -> CanonicalMap:
    """Reference parameter -> zoo canonical name(s).

    Embedding tables have vocab + 1 rows: zoo's `weight` (vocab rows) then `extra_rows`. The
    decoder's one attention (and its norm) is zoo's shared self/cross attention (and res_self norm).
    """
    m: CanonicalMap = {}
    for stack, zoo_side in (("encoder", "src_embed"), ("decoder", "tgt_embed")):
        m[f"{stack}.seq_embedding.weight"] = (f"{zoo_side}.tokens.weight", f"{zoo_side}.tokens.extra_rows")
        m[f"{stack}.pos_embedding.position_encoding.weight"] = None  # frozen sinusoid table
    for i in range(spec.encoder_layers):
        ref, canon = f"encoder.encoder_layers.{i}", f"encoder.layers.{i}"
        m.update(_attention(f"{ref}.attention", f"{canon}.self_attn", f"{canon}.res_attn.norm"))
        m.update(_weight_bias(f"{ref}.feed_forward.w1", f"{canon}.ffn.w1"))
        m.update(_weight_bias(f"{ref}.feed_forward.w2", f"{canon}.ffn.w2"))
        m.update(_weight_bias(f"{ref}.feed_forward.layer_norm", f"{canon}.res_ffn.norm"))
    for i in range(spec.decoder_layers):
        ref, canon = f"decoder.decoder_layers.{i}", f"decoder.layers.{i}"
        m.update(_attention(f"{ref}.attention", f"{canon}.self_attn", f"{canon}.res_self.norm"))
        m.update(_weight_bias(f"{ref}.feed_forward.w1", f"{canon}.ffn.w1"))
        m.update(_weight_bias(f"{ref}.feed_forward.w2", f"{canon}.ffn.w2"))
        m.update(_weight_bias(f"{ref}.feed_forward.layer_norm", f"{canon}.res_ffn.norm"))
    m["linear.weight"] = ("output.weight",)
    return m


def formula(d: int, h: int, f: int, n_enc: int, n_dec: int, v_src: int, v_tgt: int) -> int:
    """Trainable parameters of 001 counted by hand from its code.

    Tables (V + 1) * D each (the sinusoid tables are frozen). Every layer, encoder or decoder, has
    ONE attention: four biased D x D Linears 4(D^2 + D) plus its LayerNorm 2D, and one Conv1d FFN:
    D*F + F + F*D + D plus its LayerNorm 2D. Projection D * V, no bias.
    """
    layer = 4 * (d * d + d) + 2 * d + (2 * d * f + f + d) + 2 * d
    return (v_src + 1) * d + (v_tgt + 1) * d + (n_enc + n_dec) * layer + d * v_tgt
