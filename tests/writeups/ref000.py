"""Writeup 000 ("Transformer Implementation" blog), transcribed as an independent reference.

The classes below follow the seed's code line by line, with its names, so that its parameters
and computation can be compared with what zoo's `writeup-000` preset builds. The writeup's code
runs as written; nothing is fixed. Only the decoding methods (greedy / beam search, not shown in
full by the writeup) are left out.
"""

from __future__ import annotations

import math
from copy import deepcopy

import torch
from torch import nn
from torch.nn import functional as F

from ._harness import CanonicalMap, tap


class TransformerEmbedding(nn.Module):
    def __init__(self, num_vocab, dim, dropout_rate, PAD, max_seq_len=5000, embedding_matrix=None, is_frozen=True):
        super(TransformerEmbedding, self).__init__()
        self.dim = dim
        self.embedding = nn.Embedding(num_embeddings=num_vocab, embedding_dim=dim, padding_idx=PAD)
        if embedding_matrix is not None:
            assert embedding_matrix.size(0) != num_vocab or embedding_matrix.size(1) != dim
            self.embedding.from_pretrained(embeddings=embedding_matrix, freeze=is_frozen)
        self.dropout = nn.Dropout(dropout_rate)
        self.register_buffer('PE', self.PositionalEncoding(max_seq_len=max_seq_len, dim=dim))
        self.layer_norm = nn.LayerNorm(dim)

    @staticmethod
    def PositionalEncoding(max_seq_len, dim):
        pe = torch.zeros((max_seq_len, dim))
        position = torch.arange(0, max_seq_len).unsqueeze(1)  # (max_seq_len, 1)
        div_term = torch.exp(-torch.arange(0, dim, 2) / dim * math.log(10000.0))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        return pe

    def forward(self, inputs):
        # inputs (B, L) -> (B, L, dim)
        seq_len = inputs.size(1)
        return self.layer_norm(self.dropout(self.embedding(inputs) * math.sqrt(self.dim) + self.PE[:seq_len]))


class Attention(nn.Module):
    def __init__(self, dim, num_heads, dropout_rate=None):
        super(Attention, self).__init__()
        assert dim % num_heads == 0
        self.num_heads = num_heads
        self.sub_dim = dim // num_heads
        self.W_K = nn.Linear(in_features=dim, out_features=dim)
        self.W_Q = nn.Linear(in_features=dim, out_features=dim)
        self.W_V = nn.Linear(in_features=dim, out_features=dim)
        self.W_out = nn.Linear(in_features=dim, out_features=dim)
        self.dropout_rate = dropout_rate
        if dropout_rate is not None:
            self.dropout = nn.Dropout(dropout_rate)

    def forward(self, Q, K, V, mask=None):
        batch_size = Q.size(0)
        Q = self.W_Q(Q).view(batch_size, Q.size(1), self.num_heads, self.sub_dim).transpose(1, 2)  # (B, H, Lq, Dh)
        K = self.W_K(K).view(batch_size, K.size(1), self.num_heads, self.sub_dim).transpose(1, 2)  # (B, H, Lk, Dh)
        V = self.W_V(V).view(batch_size, V.size(1), self.num_heads, self.sub_dim).transpose(1, 2)  # (B, H, Lk, Dh)
        att_score = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.sub_dim)  # (B, H, Lq, Lk)
        if mask is not None:
            att_score = att_score.masked_fill(mask, -1e9)
        att_score = F.softmax(att_score, dim=-1)
        if mask is not None:
            att_score = att_score.masked_fill(mask, 0)
        if self.dropout_rate is not None:
            att_score = self.dropout(att_score)
        outputs = torch.matmul(att_score, V).transpose(1, 2).contiguous().view(
            batch_size, -1, self.num_heads * self.sub_dim)  # (B, Lq, D)
        return self.W_out(outputs)


class FeedForward(nn.Module):
    def __init__(self, dim, inner_layer_dim, dropout_rate):
        super(FeedForward, self).__init__()
        self.W_1 = nn.Linear(in_features=dim, out_features=inner_layer_dim)
        self.W_2 = nn.Linear(in_features=inner_layer_dim, out_features=dim)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, inputs):
        return self.W_2(self.dropout(F.relu(self.W_1(inputs))))


class TransformerBaseEncoderBlock(nn.Module):
    def __init__(self, dim, dropout_rate, Attention, FeedForward):
        super(TransformerBaseEncoderBlock, self).__init__()
        self.att = deepcopy(Attention)
        self.layer_norm = nn.LayerNorm(normalized_shape=dim)  # one norm, reused after both sublayers
        self.feedforward = deepcopy(FeedForward)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, inputs, pad_mask):
        inputs = self.layer_norm(inputs + self.att(inputs, inputs, inputs, pad_mask))
        return self.layer_norm(inputs + self.dropout(self.feedforward(inputs)))


class TransformerBaseEncoder(nn.Module):
    def __init__(self, num_encoder_block, encoder_block):
        super(TransformerBaseEncoder, self).__init__()
        self.encoder_blocks = nn.ModuleList([deepcopy(encoder_block) for _ in range(num_encoder_block)])

    def forward(self, inputs, mask):
        for block in self.encoder_blocks:
            inputs = block(inputs, mask)
        return inputs


class TransformerBaseDecoderBlock(nn.Module):
    def __init__(self, dim, dropout_rate, Attention, FeedForward):
        super(TransformerBaseDecoderBlock, self).__init__()
        self.masked_att = deepcopy(Attention)
        self.att = deepcopy(Attention)
        self.layer_norm = nn.LayerNorm(normalized_shape=dim)
        self.feedforward = deepcopy(FeedForward)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, encoder_outputs, inputs, pad_mask, upper_triangle_mask):
        inputs = self.layer_norm(inputs + self.masked_att(inputs, inputs, inputs, upper_triangle_mask))
        inputs = self.layer_norm(inputs + self.att(inputs, encoder_outputs, encoder_outputs, pad_mask))
        return self.layer_norm(inputs + self.dropout(self.feedforward(inputs)))


class TransformerBaseDecoder(nn.Module):
    def __init__(self, num_decoder_block, decoder_block):
        super(TransformerBaseDecoder, self).__init__()
        self.decoder_blocks = nn.ModuleList([deepcopy(decoder_block) for _ in range(num_decoder_block)])

    def forward(self, encoder_outputs, inputs, pad_mask, upper_triangle_mask):
        for decoder_block in self.decoder_blocks:
            inputs = decoder_block(encoder_outputs, inputs, pad_mask, upper_triangle_mask)
        return inputs


class TransformerBase(nn.Module):
    def __init__(self, num_encoder_block, num_decoder_block, num_heads, num_vocab_src, num_vocab_tgt,
                 dim, inner_layer_dim, dropout_rate, PAD, BOS, EOS):
        super(TransformerBase, self).__init__()
        self.PAD = PAD
        self.BOS = BOS
        self.EOS = EOS
        self.num_vocab_tgt = num_vocab_tgt
        attention = Attention(dim=dim, num_heads=num_heads)
        feedforward = FeedForward(dim=dim, inner_layer_dim=inner_layer_dim, dropout_rate=dropout_rate)
        encoder_block = TransformerBaseEncoderBlock(dim=dim, dropout_rate=dropout_rate, Attention=attention,
                                                    FeedForward=feedforward)
        decoder_block = TransformerBaseDecoderBlock(dim=dim, dropout_rate=dropout_rate, Attention=attention,
                                                    FeedForward=feedforward)
        self.embedding_src = TransformerEmbedding(num_vocab=num_vocab_src, dim=dim, dropout_rate=dropout_rate, PAD=PAD)
        self.embedding_tgt = TransformerEmbedding(num_vocab=num_vocab_tgt, dim=dim, dropout_rate=dropout_rate, PAD=PAD)
        self.encoder = TransformerBaseEncoder(num_encoder_block=num_encoder_block, encoder_block=encoder_block)
        self.decoder = TransformerBaseDecoder(num_decoder_block=num_decoder_block, decoder_block=decoder_block)
        self.projection = nn.Linear(in_features=dim, out_features=num_vocab_tgt)

    def create_pad_mask(self, x):
        return (x == self.PAD).to(x.device)  # True = padding

    @staticmethod
    def create_upper_triangle_mask(x):
        seq_len = x.size(-1)
        return torch.ones((seq_len, seq_len)).triu(1).bool().to(x.device)  # True = future

    def forward(self, inputs, targets):
        inputs_mask = self.create_pad_mask(inputs).unsqueeze(1).unsqueeze(2)  # (B, 1, 1, S)
        inputs = self.embedding_src(inputs)
        from_encoder = self.encoder(inputs, inputs_mask)  # (B, S, D)
        outputs = self.teacher_forcing(inputs_mask=inputs_mask, from_encoder=from_encoder, targets=targets)
        return outputs

    def teacher_forcing(self, inputs_mask, from_encoder, targets):
        pad_mask = self.create_pad_mask(targets).unsqueeze(1)  # (B, 1, T)
        upper_triangle_mask = self.create_upper_triangle_mask(targets).unsqueeze(0)  # (1, T, T)
        upper_triangle_mask = upper_triangle_mask + pad_mask  # (B, T, T)
        targets = self.embedding_tgt(targets)
        outputs = self.decoder(from_encoder, targets, inputs_mask, upper_triangle_mask.unsqueeze(1).bool())
        outputs = F.log_softmax(self.projection(outputs), dim=-1)  # (B, T, V) log-probabilities
        return outputs


# -- harness ---------------------------------------------------------------------------------------
def make(spec) -> TransformerBase:
    """TransformerBase at the spec's sizes; BOS/EOS only matter for decoding, so any ids do."""
    return TransformerBase(
        num_encoder_block=spec.encoder_layers, num_decoder_block=spec.decoder_layers, num_heads=spec.n_heads,
        num_vocab_src=spec.src_vocab, num_vocab_tgt=spec.tgt_vocab, dim=spec.d_model,
        inner_layer_dim=spec.d_ff, dropout_rate=spec.dropout, PAD=spec.pad_id, BOS=1, EOS=2,
    )


def run(model: TransformerBase, src, tgt_in, pad_id: int):
    """(B, S), (B, T) -> (B, T, V) log-probabilities; the model builds its masks from its own PAD."""
    assert model.PAD == pad_id
    return model(src, tgt_in)


def masks(model: TransformerBase, src, tgt_in, pad_id: int):
    """(encoder self, decoder self, cross) masks as the first encoder and decoder blocks receive them."""
    with tap(model.encoder.encoder_blocks[0]) as enc, tap(model.decoder.decoder_blocks[0]) as dec:
        run(model, src, tgt_in, pad_id)
    return enc.args[1], dec.args[3], dec.args[2]


def _weight_bias(ref: str, canon: str) -> CanonicalMap:
    """A Linear or LayerNorm: weight and bias under the same names on both sides."""
    return {f"{ref}.weight": (f"{canon}.weight",), f"{ref}.bias": (f"{canon}.bias",)}


def _attention(ref: str, canon: str) -> CanonicalMap:
    out: CanonicalMap = {}
    for ref_name, canon_name in (("W_Q", "q"), ("W_K", "k"), ("W_V", "v"), ("W_out", "o")):
        out.update(_weight_bias(f"{ref}.{ref_name}", f"{canon}.{canon_name}"))
    return out


def canonical_map(spec) -> CanonicalMap:
    """Reference parameter -> zoo canonical name(s). The block's one layer_norm is zoo's shared per-block norm."""
    m: CanonicalMap = {}
    for side, zoo_side in (("src", "src_embed"), ("tgt", "tgt_embed")):
        m[f"embedding_{side}.embedding.weight"] = (f"{zoo_side}.tokens.weight",)
        m.update(_weight_bias(f"embedding_{side}.layer_norm", f"{zoo_side}.norm"))
    for i in range(spec.encoder_layers):
        ref, canon = f"encoder.encoder_blocks.{i}", f"encoder.layers.{i}"
        m.update(_attention(f"{ref}.att", f"{canon}.self_attn"))
        m.update(_weight_bias(f"{ref}.layer_norm", f"{canon}.res_attn.norm"))
        m.update(_weight_bias(f"{ref}.feedforward.W_1", f"{canon}.ffn.w1"))
        m.update(_weight_bias(f"{ref}.feedforward.W_2", f"{canon}.ffn.w2"))
    for i in range(spec.decoder_layers):
        ref, canon = f"decoder.decoder_blocks.{i}", f"decoder.layers.{i}"
        m.update(_attention(f"{ref}.masked_att", f"{canon}.self_attn"))
        m.update(_attention(f"{ref}.att", f"{canon}.cross_attn"))
        m.update(_weight_bias(f"{ref}.layer_norm", f"{canon}.res_self.norm"))
        m.update(_weight_bias(f"{ref}.feedforward.W_1", f"{canon}.ffn.w1"))
        m.update(_weight_bias(f"{ref}.feedforward.W_2", f"{canon}.ffn.w2"))
    m.update(_weight_bias("projection", "output"))
    return m


def formula(d: int, h: int, f: int, n_enc: int, n_dec: int, v_src: int, v_tgt: int) -> int:
    """Trainable parameters of 000 counted by hand from its code.

    Embedding: table V*D + its LayerNorm 2D. Attention: four biased D x D Linears, 4(D^2 + D).
    FFN: D*F + F + F*D + D. One LayerNorm (2D) per block. Projection D*V + V.
    """
    attn = 4 * (d * d + d)
    ffn = 2 * d * f + f + d
    return ((v_src * d + 2 * d) + (v_tgt * d + 2 * d)
            + n_enc * (attn + 2 * d + ffn)
            + n_dec * (2 * attn + 2 * d + ffn)
            + d * v_tgt + v_tgt)
