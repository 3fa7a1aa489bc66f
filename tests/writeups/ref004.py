"""Writeup 004 ("Transformer Deep Dive", Carlo Lepelaars), transcribed as an independent reference.

The classes follow the seed's code with its names. Fixed, and only these (each is a slip the
`writeup-004` preset's notes list, built by zoo as intended):

1. Embed computes `torch.sqrt(self.d_model)` on an int, which raises: `math.sqrt`.
2. PositionalEncoding.forward reads `Variable([:, :x.size(1)], ...)`, a syntax error:
   `Variable(self.pe[:, :x.size(1)], requires_grad=False)`.
3. Attention is a plain class, so model.eval() never reaches its dropout: it is an nn.Module.

`make_model` hard-codes the paper's sizes through its constructors' defaults; here it takes them
as arguments so the reference can be built small. Its masks are built by the caller: the usage
example passes a padding-only (B, T) target mask, while the Annotated Transformer it follows
builds (B, 1, S) and (B, T, T) = padding AND subsequent, int 1 = keep (`make_masks`).
"""

from __future__ import annotations

import math
from copy import deepcopy

import torch
from torch import nn
from torch.autograd import Variable

from ._harness import CanonicalMap, tap


class Embed(nn.Module):
    def __init__(self, vocab: int, d_model: int = 512):
        super(Embed, self).__init__()
        self.d_model = d_model
        self.vocab = vocab
        self.emb = nn.Embedding(self.vocab, self.d_model)
        self.scaling = math.sqrt(self.d_model)  # fix 1

    def forward(self, x):
        return self.emb(x) * self.scaling  # (B, L) -> (B, L, D)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int = 512, dropout: float = .1, max_len: int = 5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len).unsqueeze(1)  # (max_len, 1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * -(torch.log(torch.Tensor([10000.0])) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0)  # (1, max_len, D)
        self.register_buffer('pe', pe)

    def forward(self, x):
        x = x + Variable(self.pe[:, :x.size(1)], requires_grad=False)  # fix 2
        return self.dropout(x)


class Attention(nn.Module):  # fix 3
    def __init__(self, dropout: float = 0.):
        super(Attention, self).__init__()
        self.dropout = nn.Dropout(dropout)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, query, key, value, mask=None):
        # query (B, H, Lq, Dh), key and value (B, H, Lk, Dh), mask (B, 1, Lq or 1, Lk) 1 = keep
        d_k = query.size(-1)
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)  # (B, H, Lq, Lk)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = self.dropout(self.softmax(scores))
        return torch.matmul(p_attn, value)  # (B, H, Lq, Dh)

    def __call__(self, query, key, value, mask=None):
        return self.forward(query, key, value, mask)


class MultiHeadAttention(nn.Module):
    def __init__(self, h: int = 8, d_model: int = 512, dropout: float = 0.1):
        super(MultiHeadAttention, self).__init__()
        self.d_k = d_model // h
        self.h = h
        self.attn = Attention(dropout)
        self.lindim = (d_model, d_model)
        self.linears = nn.ModuleList([deepcopy(nn.Linear(*self.lindim)) for _ in range(4)])  # the 4th is never used
        self.final_linear = nn.Linear(*self.lindim, bias=False)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask=None):
        if mask is not None:
            mask = mask.unsqueeze(1)  # (B, 1, S) -> (B, 1, 1, S); (B, T, T) -> (B, 1, T, T)
        query, key, value = [l(x).view(query.size(0), -1, self.h, self.d_k).transpose(1, 2)
                             for l, x in zip(self.linears, (query, key, value))]  # (B, H, L, Dh)
        nbatches = query.size(0)
        x = self.attn(query, key, value, mask=mask)
        x = x.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)  # (B, Lq, D)
        return self.final_linear(x)


class LayerNorm(nn.Module):
    def __init__(self, features: int, eps: float = 1e-6):
        super(LayerNorm, self).__init__()
        self.gamma = nn.Parameter(torch.ones(features))
        self.beta = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.gamma * (x - mean) / (std + self.eps) + self.beta


class ResidualConnection(nn.Module):
    def __init__(self, size: int = 512, dropout: float = .1):
        super(ResidualConnection, self).__init__()
        self.norm = LayerNorm(size)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


class FeedForward(nn.Module):
    def __init__(self, d_model: int = 512, d_ff: int = 2048, dropout: float = .1):
        super(FeedForward, self).__init__()
        self.l1 = nn.Linear(d_model, d_ff)
        self.l2 = nn.Linear(d_ff, d_model)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.l2(self.dropout(self.relu(self.l1(x))))


class EncoderLayer(nn.Module):
    def __init__(self, size: int, self_attn: MultiHeadAttention, feed_forward: FeedForward, dropout: float = .1):
        super(EncoderLayer, self).__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sub1 = ResidualConnection(size, dropout)
        self.sub2 = ResidualConnection(size, dropout)
        self.size = size

    def forward(self, x, mask):
        x = self.sub1(x, lambda x: self.self_attn(x, x, x, mask))
        return self.sub2(x, self.feed_forward)


class Encoder(nn.Module):
    def __init__(self, layer, n: int = 6):
        super(Encoder, self).__init__()
        self.layers = nn.ModuleList([deepcopy(layer) for _ in range(n)])
        self.norm = LayerNorm(layer.size)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class DecoderLayer(nn.Module):
    def __init__(self, size: int, self_attn: MultiHeadAttention, src_attn: MultiHeadAttention,
                 feed_forward: FeedForward, dropout: float = .1):
        super(DecoderLayer, self).__init__()
        self.size = size
        self.self_attn = self_attn
        self.src_attn = src_attn
        self.feed_forward = feed_forward
        self.sub1 = ResidualConnection(size, dropout)
        self.sub2 = ResidualConnection(size, dropout)
        self.sub3 = ResidualConnection(size, dropout)

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self.sub1(x, lambda x: self.self_attn(x, x, x, tgt_mask))
        x = self.sub2(x, lambda x: self.src_attn(x, memory, memory, src_mask))
        return self.sub3(x, self.feed_forward)


class Decoder(nn.Module):
    def __init__(self, layer: DecoderLayer, n: int = 6):
        super(Decoder, self).__init__()
        self.layers = nn.ModuleList([deepcopy(layer) for _ in range(n)])
        self.norm = LayerNorm(layer.size)

    def forward(self, x, memory, src_mask, tgt_mask):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class Output(nn.Module):
    def __init__(self, input_dim: int, output_dim: int):
        super(Output, self).__init__()
        self.l1 = nn.Linear(input_dim, output_dim)
        self.log_softmax = nn.LogSoftmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits = self.l1(x)
        return self.log_softmax(logits)  # (B, T, V) log-probabilities


class EncoderDecoder(nn.Module):
    def __init__(self, encoder: Encoder, decoder: Decoder, src_embed: Embed, tgt_embed: Embed, final_layer: Output):
        super(EncoderDecoder, self).__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.final_layer = final_layer

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.final_layer(self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask))

    def encode(self, src, src_mask):
        return self.encoder(self.src_embed(src), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.tgt_embed(tgt), memory, src_mask, tgt_mask)


def make_model(input_vocab: int, output_vocab: int, d_model: int = 512, h: int = 8, d_ff: int = 2048,
               n_enc: int = 6, n_dec: int = 6, dropout: float = .1, max_len: int = 5000):
    """The writeup's make_model, with the sizes its constructors take by default passed through."""
    encoder = Encoder(EncoderLayer(d_model, MultiHeadAttention(h, d_model, dropout),
                                   FeedForward(d_model, d_ff, dropout), dropout), n_enc)
    decoder = Decoder(DecoderLayer(d_model, MultiHeadAttention(h, d_model, dropout),
                                   MultiHeadAttention(h, d_model, dropout),
                                   FeedForward(d_model, d_ff, dropout), dropout), n_dec)
    input_embed = nn.Sequential(Embed(vocab=input_vocab, d_model=d_model),
                                PositionalEncoding(d_model, dropout, max_len))
    output_embed = nn.Sequential(Embed(vocab=output_vocab, d_model=d_model),
                                 PositionalEncoding(d_model, dropout, max_len))
    output = Output(input_dim=d_model, output_dim=output_vocab)
    model = EncoderDecoder(encoder, decoder, input_embed, output_embed, output)
    for p in model.parameters():
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    return model


def subsequent_mask(size):
    """(1, T, T) bool, True at and below the diagonal (the Annotated Transformer's helper)."""
    attn_shape = (1, size, size)
    return torch.triu(torch.ones(attn_shape), diagonal=1) == 0


def make_masks(src, tgt, pad):
    """The Annotated Transformer's Batch masks as int (the writeup's example uses int masks, 1 = keep).

    src (B, S) -> (B, 1, S); tgt (B, T) -> (B, T, T): not padding AND not in the future.
    """
    src_mask = (src != pad).unsqueeze(-2)  # (B, 1, S)
    tgt_mask = (tgt != pad).unsqueeze(-2)  # (B, 1, T)
    tgt_mask = tgt_mask & subsequent_mask(tgt.size(-1)).to(tgt.device)  # (B, T, T)
    return src_mask.long(), tgt_mask.long()


# -- harness ---------------------------------------------------------------------------------------
def make(spec) -> EncoderDecoder:
    return make_model(spec.src_vocab, spec.tgt_vocab, d_model=spec.d_model, h=spec.n_heads, d_ff=spec.d_ff,
                      n_enc=spec.encoder_layers, n_dec=spec.decoder_layers, dropout=spec.dropout,
                      max_len=spec.positional.max_len)


def run(model: EncoderDecoder, src, tgt_in, pad_id: int):
    """(B, S), (B, T) -> (B, T, V) log-probabilities."""
    src_mask, tgt_mask = make_masks(src, tgt_in, pad_id)
    return model(src, tgt_in, src_mask, tgt_mask)


def masks(model: EncoderDecoder, src, tgt_in, pad_id: int):
    """(encoder self, decoder self, cross) masks as the first encoder and decoder layers receive them."""
    with tap(model.encoder.layers[0]) as enc, tap(model.decoder.layers[0]) as dec:
        run(model, src, tgt_in, pad_id)
    return enc.args[1], dec.args[3], dec.args[2]


def _weight_bias(ref: str, canon: str) -> CanonicalMap:
    """A Linear: weight and bias."""
    return {f"{ref}.weight": (f"{canon}.weight",), f"{ref}.bias": (f"{canon}.bias",)}


def _norm(ref: str, canon: str) -> CanonicalMap:
    """004's LayerNorm calls its gain and bias gamma and beta."""
    return {f"{ref}.gamma": (f"{canon}.weight",), f"{ref}.beta": (f"{canon}.bias",)}


def _attention(ref: str, canon: str) -> CanonicalMap:
    """linears[0..2] are Q, K, V; linears[3] is zoo's `unused`; final_linear (no bias) is W_O."""
    out: CanonicalMap = {}
    for i, name in enumerate(("q", "k", "v", "unused")):
        out.update(_weight_bias(f"{ref}.linears.{i}", f"{canon}.{name}"))
    out[f"{ref}.final_linear.weight"] = (f"{canon}.o.weight",)
    return out


def canonical_map(spec) -> CanonicalMap:
    """Reference parameter -> zoo canonical name(s); sub1/2(/3) are the pre-norm residuals in order."""
    m: CanonicalMap = {
        "src_embed.0.emb.weight": ("src_embed.tokens.weight",),
        "tgt_embed.0.emb.weight": ("tgt_embed.tokens.weight",),
        **_norm("encoder.norm", "encoder.final_norm"),
        **_norm("decoder.norm", "decoder.final_norm"),
        **_weight_bias("final_layer.l1", "output"),
    }
    for i in range(spec.encoder_layers):
        ref, canon = f"encoder.layers.{i}", f"encoder.layers.{i}"
        m.update(_attention(f"{ref}.self_attn", f"{canon}.self_attn"))
        m.update(_weight_bias(f"{ref}.feed_forward.l1", f"{canon}.ffn.w1"))
        m.update(_weight_bias(f"{ref}.feed_forward.l2", f"{canon}.ffn.w2"))
        m.update(_norm(f"{ref}.sub1.norm", f"{canon}.res_attn.norm"))
        m.update(_norm(f"{ref}.sub2.norm", f"{canon}.res_ffn.norm"))
    for i in range(spec.decoder_layers):
        ref, canon = f"decoder.layers.{i}", f"decoder.layers.{i}"
        m.update(_attention(f"{ref}.self_attn", f"{canon}.self_attn"))
        m.update(_attention(f"{ref}.src_attn", f"{canon}.cross_attn"))
        m.update(_weight_bias(f"{ref}.feed_forward.l1", f"{canon}.ffn.w1"))
        m.update(_weight_bias(f"{ref}.feed_forward.l2", f"{canon}.ffn.w2"))
        m.update(_norm(f"{ref}.sub1.norm", f"{canon}.res_self.norm"))
        m.update(_norm(f"{ref}.sub2.norm", f"{canon}.res_cross.norm"))
        m.update(_norm(f"{ref}.sub3.norm", f"{canon}.res_ffn.norm"))
    return m


def formula(d: int, h: int, f: int, n_enc: int, n_dec: int, v_src: int, v_tgt: int) -> int:
    """Trainable parameters of 004 counted by hand from its code.

    Tables V * D each. Attention: four biased D x D Linears (one never used) plus a bias-free
    final_linear: 4(D^2 + D) + D^2. FFN 2DF + F + D. LayerNorm 2D per residual (two per encoder
    layer, three per decoder layer) plus one final norm per stack. Output D * V + V.
    """
    attn = 4 * (d * d + d) + d * d
    ffn = 2 * d * f + f + d
    return (v_src * d + v_tgt * d
            + n_enc * (attn + ffn + 2 * 2 * d) + 2 * d
            + n_dec * (2 * attn + ffn + 3 * 2 * d) + 2 * d
            + d * v_tgt + v_tgt)
