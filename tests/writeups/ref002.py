"""Writeup 002 ("Transformer Model Implementation: A Comprehensive Guide", IIT Ropar), as a reference.

Transcribed from the seed with its names: PyTorch's own nn.TransformerEncoderLayer /
nn.TransformerDecoderLayer with their defaults, stacked by nn.TransformerEncoder / Decoder. The
code runs as written; nothing is fixed. The writeup leaves the padding masks to the caller
(`src_padding_mask`, `tgt_padding_mask`); as torch's key_padding_mask arguments they are bool
with True = padding, which is how `run` builds them.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ._harness import CanonicalMap, tap


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000):
        super().__init__()
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)  # (max_len, 1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)  # (1, max_len, D)
        self.register_buffer('pe', pe)

    def forward(self, x):
        seq_len = x.size(1)
        return x + self.pe[:, :seq_len, :]


class TransformerEncoder(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_heads, hidden_dim, num_layers, max_len):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.pos_encoder = PositionalEncoding(embed_dim, max_len)
        encoder_layer = nn.TransformerEncoderLayer(d_model=embed_dim, nhead=num_heads, dim_feedforward=hidden_dim,
                                                   batch_first=True)
        self.encoder = nn.TransformerEncoder(encoder_layer, num_layers=num_layers)

    def forward(self, src, src_key_padding_mask=None):
        x = self.embedding(src)  # (B, S, D)
        x = self.pos_encoder(x)
        x = self.encoder(x, src_key_padding_mask=src_key_padding_mask)
        return x


class TransformerDecoder(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_heads, hidden_dim, num_layers, max_len):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.pos_encoder = PositionalEncoding(embed_dim, max_len)
        decoder_layer = nn.TransformerDecoderLayer(d_model=embed_dim, nhead=num_heads, dim_feedforward=hidden_dim,
                                                   batch_first=True)
        self.decoder = nn.TransformerDecoder(decoder_layer, num_layers=num_layers)
        self.fc_out = nn.Linear(embed_dim, vocab_size)

    def forward(self, tgt, memory, tgt_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None):
        x = self.embedding(tgt)  # (B, T, D)
        x = self.pos_encoder(x)
        x = self.decoder(x, memory, tgt_mask=tgt_mask, tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask)
        return self.fc_out(x)  # (B, T, V) logits


class TransformerModel(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, embed_dim, num_heads, hidden_dim, num_layers, max_len):
        super().__init__()
        self.encoder = TransformerEncoder(src_vocab_size, embed_dim, num_heads, hidden_dim, num_layers, max_len)
        self.decoder = TransformerDecoder(tgt_vocab_size, embed_dim, num_heads, hidden_dim, num_layers, max_len)

    def generate_square_subsequent_mask(self, sz):
        return torch.triu(torch.ones(sz, sz) * float('-inf'), diagonal=1)  # (T, T) float, -inf = future

    def forward(self, src, tgt, src_padding_mask=None, tgt_padding_mask=None):
        memory = self.encoder(src, src_key_padding_mask=src_padding_mask)
        tgt_seq_len = tgt.size(1)
        tgt_mask = self.generate_square_subsequent_mask(tgt_seq_len).to(tgt.device)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, tgt_key_padding_mask=tgt_padding_mask,
                            memory_key_padding_mask=src_padding_mask)


# -- harness ---------------------------------------------------------------------------------------
def make(spec) -> TransformerModel:
    """TransformerModel at the spec's sizes; one num_layers and one max_len serve both stacks.

    Dropout is not an argument: nn.Transformer*Layer's default 0.1 applies, as in the writeup.
    """
    assert spec.encoder_layers == spec.decoder_layers, "002 has one num_layers for both stacks"
    return TransformerModel(spec.src_vocab, spec.tgt_vocab, spec.d_model, spec.n_heads, spec.d_ff,
                            spec.encoder_layers, spec.positional.max_len)


def padding_masks(src, tgt_in, pad_id: int):
    """The caller's key-padding masks: bool (B, S) and (B, T), True = padding."""
    return src.eq(pad_id), tgt_in.eq(pad_id)


def run(model: TransformerModel, src, tgt_in, pad_id: int):
    """(B, S), (B, T) -> (B, T, V) logits."""
    src_padding_mask, tgt_padding_mask = padding_masks(src, tgt_in, pad_id)
    return model(src, tgt_in, src_padding_mask=src_padding_mask, tgt_padding_mask=tgt_padding_mask)


def masks(model: TransformerModel, src, tgt_in, pad_id: int):
    """(encoder self, decoder self, cross) as (attn_mask, key_padding_mask) pairs, as the torch stacks receive them."""
    with tap(model.encoder.encoder) as enc, tap(model.decoder.decoder) as dec:
        run(model, src, tgt_in, pad_id)
    enc_args = {"mask": None, **enc.kwargs}
    dec_args = {"tgt_mask": None, "memory_mask": None, **dec.kwargs}
    return (
        (enc_args["mask"], enc_args["src_key_padding_mask"]),
        (dec_args["tgt_mask"], dec_args["tgt_key_padding_mask"]),
        (dec_args["memory_mask"], dec_args["memory_key_padding_mask"]),
    )


def _weight_bias(ref: str, canon: str) -> CanonicalMap:
    """A Linear or LayerNorm: weight and bias."""
    return {f"{ref}.weight": (f"{canon}.weight",), f"{ref}.bias": (f"{canon}.bias",)}


def _mha(ref: str, canon: str) -> CanonicalMap:
    """nn.MultiheadAttention: in_proj is zoo's q, k, v stacked (3D, D); out_proj is o."""
    return {
        f"{ref}.in_proj_weight": (f"{canon}.q.weight", f"{canon}.k.weight", f"{canon}.v.weight"),
        f"{ref}.in_proj_bias": (f"{canon}.q.bias", f"{canon}.k.bias", f"{canon}.v.bias"),
        **_weight_bias(f"{ref}.out_proj", f"{canon}.o"),
    }


def canonical_map(spec) -> CanonicalMap:
    """Reference parameter -> zoo canonical name(s); norm1/2(/3) are the residual norms in sublayer order."""
    m: CanonicalMap = {
        "encoder.embedding.weight": ("src_embed.tokens.weight",),
        "decoder.embedding.weight": ("tgt_embed.tokens.weight",),
    }
    for i in range(spec.encoder_layers):
        ref, canon = f"encoder.encoder.layers.{i}", f"encoder.layers.{i}"
        m.update(_mha(f"{ref}.self_attn", f"{canon}.self_attn"))
        m.update(_weight_bias(f"{ref}.linear1", f"{canon}.ffn.w1"))
        m.update(_weight_bias(f"{ref}.linear2", f"{canon}.ffn.w2"))
        m.update(_weight_bias(f"{ref}.norm1", f"{canon}.res_attn.norm"))
        m.update(_weight_bias(f"{ref}.norm2", f"{canon}.res_ffn.norm"))
    for i in range(spec.decoder_layers):
        ref, canon = f"decoder.decoder.layers.{i}", f"decoder.layers.{i}"
        m.update(_mha(f"{ref}.self_attn", f"{canon}.self_attn"))
        m.update(_mha(f"{ref}.multihead_attn", f"{canon}.cross_attn"))
        m.update(_weight_bias(f"{ref}.linear1", f"{canon}.ffn.w1"))
        m.update(_weight_bias(f"{ref}.linear2", f"{canon}.ffn.w2"))
        m.update(_weight_bias(f"{ref}.norm1", f"{canon}.res_self.norm"))
        m.update(_weight_bias(f"{ref}.norm2", f"{canon}.res_cross.norm"))
        m.update(_weight_bias(f"{ref}.norm3", f"{canon}.res_ffn.norm"))
    m.update(_weight_bias("decoder.fc_out", "output"))
    return m


def formula(d: int, h: int, f: int, n_enc: int, n_dec: int, v_src: int, v_tgt: int) -> int:
    """Trainable parameters of 002 counted by hand from torch's layers.

    Tables V * D (no padding row). nn.MultiheadAttention: in_proj 3D x D + 3D, out_proj D x D + D,
    i.e. 4(D^2 + D). FFN linear1/linear2: 2DF + F + D. LayerNorms 2D each: two per encoder layer,
    three per decoder layer, no final norm. fc_out D * V + V.
    """
    attn = 4 * (d * d + d)
    ffn = 2 * d * f + f + d
    return (v_src * d + v_tgt * d
            + n_enc * (attn + ffn + 2 * 2 * d)
            + n_dec * (2 * attn + ffn + 3 * 2 * d)
            + d * v_tgt + v_tgt)
