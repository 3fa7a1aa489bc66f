"""Writeup 003 ("Transformer Paper From Scratch", Brando Koch), transcribed as an independent reference.

The model classes follow the seed's code with its names (data loading, tokenizer, scheduler and
training loop are left out: they do not define the model). The code runs as written; nothing is
fixed. The writeup's `MachineTranslationTransformer.forward` takes the whole target sequence and
drops its last token itself; `run` hands it the decoder input with one extra column appended, so
the model sees exactly `tgt_in`.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from ._harness import CanonicalMap, tap


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_seq_len=500, dropout_proba=0.1):
        super(PositionalEncoding, self).__init__()
        self.max_seq_len = max_seq_len
        self.d_model = d_model

        pe_table = self.get_pe_table()
        self.register_buffer('pe_table', pe_table)

        self.dropout = nn.Dropout(dropout_proba)

    def get_pe_table(self):
        position_idxs = torch.arange(self.max_seq_len).unsqueeze(1)  # (max_seq_len, 1)
        embedding_idxs = torch.arange(self.d_model).unsqueeze(0)  # (1, D)

        # (max_seq_len, D)
        angle_rads = position_idxs * 1 / torch.pow(10000, (2 * (embedding_idxs // 2)) / self.d_model)

        angle_rads[:, 0::2] = torch.sin(angle_rads[:, 0::2])
        angle_rads[:, 1::2] = torch.cos(angle_rads[:, 1::2])

        pe_table = angle_rads.unsqueeze(0)  # (1, max_seq_len, D)

        return pe_table

    def forward(self, embeddings_batch):
        seq_len = embeddings_batch.size(1)
        pe_batch = self.pe_table[:, :seq_len].clone().detach()
        return self.dropout(embeddings_batch + pe_batch)


class AddAndNorm(nn.Module):
    def __init__(self, d_model):
        super(AddAndNorm, self).__init__()
        self.layer_norm = nn.LayerNorm(d_model)

    def forward(self, x, residual):
        return self.layer_norm(x + residual)


class PositionWiseFeedForwardNet(nn.Module):
    def __init__(self, d_model, d_ff):
        super(PositionWiseFeedForwardNet, self).__init__()
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))


class ScaledDotProductAttention(nn.Module):
    def __init__(self, d_head):
        super(ScaledDotProductAttention, self).__init__()
        self.d_head = d_head
        self.attention_dropout = nn.Dropout(p=0.1)

    def forward(self, q, k, v, mask=None):
        # q (B, H, Lq, Dh), k and v (B, H, Lk, Dh); mask True = may attend
        attention_weights = torch.matmul(q, k.transpose(-2, -1))  # (B, H, Lq, Lk)
        scaled_attention_weights = attention_weights / math.sqrt(self.d_head)
        if mask is not None:
            scaled_attention_weights = scaled_attention_weights.masked_fill(mask == 0, float('-inf'))
        scaled_attention_weights = nn.functional.softmax(scaled_attention_weights, dim=-1)
        scaled_attention_weights = self.attention_dropout(scaled_attention_weights)
        weighted_v = torch.matmul(scaled_attention_weights, v)  # (B, H, Lq, Dh)
        return weighted_v


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads):
        super(MultiHeadAttention, self).__init__()
        self.n_heads = n_heads
        assert d_model % n_heads == 0
        self.d_head = d_model // n_heads
        self.dot_product_attention_layer = ScaledDotProductAttention(self.d_head)
        self.W_0 = nn.Linear(d_model, d_model)

    def _split_into_heads(self, q, k, v):
        q = q.view(q.size(0), q.size(1), self.n_heads, self.d_head)  # (B, L, H, Dh)
        k = k.view(k.size(0), k.size(1), self.n_heads, self.d_head)
        v = v.view(v.size(0), v.size(1), self.n_heads, self.d_head)
        q = q.transpose(1, 2)  # (B, H, L, Dh)
        k = k.transpose(1, 2)
        v = v.transpose(1, 2)
        return q, k, v

    def _concatenate_heads(self, attention_output):
        attention_output = attention_output.transpose(1, 2).contiguous()  # (B, L, H, Dh)
        attention_output = attention_output.view(attention_output.size(0), attention_output.size(1), -1)  # (B, L, D)
        return attention_output

    def forward(self, q, k, v, mask=None):
        q, k, v = self._split_into_heads(q, k, v)
        attention_output = self.dot_product_attention_layer(q, k, v, mask)
        attention_output = self._concatenate_heads(attention_output)
        attention_output = self.W_0(attention_output)
        return attention_output


class TransformerEncoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout_proba):
        super(TransformerEncoderBlock, self).__init__()
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.mha_layer = MultiHeadAttention(d_model, n_heads)
        self.dropout_layer_1 = nn.Dropout(dropout_proba)
        self.add_and_norm_layer_1 = AddAndNorm(d_model)
        self.ffn_layer = PositionWiseFeedForwardNet(d_model, d_ff)
        self.dropout_layer_2 = nn.Dropout(dropout_proba)
        self.add_and_norm_layer_2 = AddAndNorm(d_model)

    def forward(self, x, mask):
        # x (B, S, D), mask (B, 1, 1, S)
        q = self.W_q(x)
        k = self.W_k(x)
        v = self.W_v(x)
        mha_out = self.mha_layer(q, k, v, mask)
        mha_out = self.dropout_layer_1(mha_out)
        mha_out = self.add_and_norm_layer_1(x, mha_out)
        ffn_out = self.ffn_layer(mha_out)
        ffn_out = self.dropout_layer_2(ffn_out)
        ffn_out = self.add_and_norm_layer_2(mha_out, ffn_out)
        return ffn_out


class TransformerEncoder(nn.Module):
    def __init__(self, n_blocks, n_heads, d_model, d_ff, dropout_proba=0.1):
        super(TransformerEncoder, self).__init__()
        self.encoder_blocks = nn.ModuleList(
            [TransformerEncoderBlock(d_model, n_heads, d_ff, dropout_proba) for _ in range(n_blocks)])

    def forward(self, x, mask):
        for encoder_block in self.encoder_blocks:
            x = encoder_block(x, mask)
        return x


class TransformerDecoderBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout_proba):
        super(TransformerDecoderBlock, self).__init__()
        self.W_q_1 = nn.Linear(d_model, d_model)
        self.W_k_1 = nn.Linear(d_model, d_model)
        self.W_v_1 = nn.Linear(d_model, d_model)
        self.mha_layer_1 = MultiHeadAttention(d_model, n_heads)
        self.dropout_layer_1 = nn.Dropout(dropout_proba)
        self.add_and_norm_1 = AddAndNorm(d_model)

        self.W_q_2 = nn.Linear(d_model, d_model)
        self.W_k_2 = nn.Linear(d_model, d_model)
        self.W_v_2 = nn.Linear(d_model, d_model)
        self.mha_layer_2 = MultiHeadAttention(d_model, n_heads)
        self.dropout_layer_2 = nn.Dropout(dropout_proba)
        self.add_and_norm_2 = AddAndNorm(d_model)

        self.ffn_layer = PositionWiseFeedForwardNet(d_model, d_ff)
        self.dropout_layer_3 = nn.Dropout(dropout_proba)
        self.add_and_norm_3 = AddAndNorm(d_model)

    def forward(self, x, encoder_output, src_mask, trg_mask):
        # x (B, T, D), encoder_output (B, S, D), src_mask (B, 1, 1, S), trg_mask (B, 1, T, T)
        q_1 = self.W_q_1(x)
        k_1 = self.W_k_1(x)
        v_1 = self.W_v_1(x)
        mha_layer_1_out = self.mha_layer_1(q_1, k_1, v_1, trg_mask)
        mha_layer_1_out = self.dropout_layer_1(mha_layer_1_out)
        mha_layer_1_out = self.add_and_norm_1(mha_layer_1_out, x)

        q_2 = self.W_q_2(mha_layer_1_out)  # (B, T, D)
        k_2 = self.W_k_2(encoder_output)  # (B, S, D)
        v_2 = self.W_v_2(encoder_output)
        mha_layer_2_out = self.mha_layer_2(q_2, k_2, v_2, src_mask)
        mha_layer_2_out = self.dropout_layer_2(mha_layer_2_out)
        mha_layer_2_out = self.add_and_norm_2(mha_layer_2_out, mha_layer_1_out)

        ffn_out = self.ffn_layer(mha_layer_2_out)
        ffn_out = self.dropout_layer_3(ffn_out)
        ffn_out = self.add_and_norm_3(ffn_out, mha_layer_2_out)
        return ffn_out


class TransformerDecoder(nn.Module):
    def __init__(self, n_blocks, n_heads, d_model, d_ff, dropout_proba):
        super(TransformerDecoder, self).__init__()
        self.decoder_blocks = nn.ModuleList(
            [TransformerDecoderBlock(d_model, n_heads, d_ff, dropout_proba) for _ in range(n_blocks)])

    def forward(self, x, encoder_output, src_mask, trg_mask):
        for decoder_block in self.decoder_blocks:
            x = decoder_block(x, encoder_output, src_mask, trg_mask)
        return x


class TransformerEncoderDecoder(nn.Module):
    def __init__(self, d_model, n_blocks, src_vocab_size, trg_vocab_size, n_heads, d_ff, dropout_proba):
        super(TransformerEncoderDecoder, self).__init__()
        self.dropout_proba = dropout_proba
        self.d_model = d_model

        self.src_embedding = nn.Embedding(src_vocab_size, d_model)
        self.src_pos_embedding = PositionalEncoding(d_model)
        self.encoder = TransformerEncoder(n_blocks, n_heads, d_model, d_ff, dropout_proba)

        self.trg_embedding = nn.Embedding(trg_vocab_size, d_model)
        self.trg_pos_embedding = PositionalEncoding(d_model)
        self.decoder = TransformerDecoder(n_blocks, n_heads, d_model, d_ff, dropout_proba)

        self.linear = nn.Linear(d_model, trg_vocab_size)

        self.init_with_xavier()

        # one table for source, target and the pre-softmax projection
        self.src_embedding.weight = self.trg_embedding.weight
        self.linear.weight = self.trg_embedding.weight

    def encode(self, src_token_ids, src_mask):
        src_embeddings = self.src_embedding(src_token_ids) * math.sqrt(self.d_model)  # (B, S, D)
        src_embeddings = self.src_pos_embedding(src_embeddings)
        encoder_outputs = self.encoder(src_embeddings, src_mask)
        return encoder_outputs

    def decode(self, trg_token_ids, encoder_outputs, src_mask, trg_mask):
        trg_embeddings = self.trg_embedding(trg_token_ids) * math.sqrt(self.d_model)  # (B, T, D)
        trg_embeddings = self.trg_pos_embedding(trg_embeddings)
        decoder_outputs = self.decoder(trg_embeddings, encoder_outputs, src_mask, trg_mask)
        linear_out = self.linear(decoder_outputs)  # (B, T, V) logits
        return linear_out

    def forward(self, src_token_ids, trg_token_ids, src_mask, trg_mask):
        encoder_outputs = self.encode(src_token_ids, src_mask)
        decoder_outputs = self.decode(trg_token_ids, encoder_outputs, src_mask, trg_mask)
        return decoder_outputs

    def init_with_xavier(self):
        for name, p in self.named_parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)


class MachineTranslationTransformer(nn.Module):
    def __init__(self, d_model, n_blocks, src_vocab_size, trg_vocab_size, n_heads, d_ff, dropout_proba):
        super(MachineTranslationTransformer, self).__init__()
        self.transformer_encoder_decoder = TransformerEncoderDecoder(
            d_model, n_blocks, src_vocab_size, trg_vocab_size, n_heads, d_ff, dropout_proba)

    def _get_pad_mask(self, token_ids, pad_idx=0):
        pad_mask = (token_ids != pad_idx).unsqueeze(-2)  # (B, 1, L)
        return pad_mask.unsqueeze(1)  # (B, 1, 1, L)

    def _get_lookahead_mask(self, token_ids):
        sz_b, len_s = token_ids.size()
        subsequent_mask = (1 - torch.triu(torch.ones((1, len_s, len_s), device=token_ids.device), diagonal=1)).bool()
        return subsequent_mask.unsqueeze(1)  # (1, 1, L, L)

    def forward(self, src_token_ids, trg_token_ids):
        trg_token_ids = trg_token_ids[:, :-1]  # drop [EOS]: the decoder input
        src_mask = self._get_pad_mask(src_token_ids)  # (B, 1, 1, S)
        trg_mask = self._get_pad_mask(trg_token_ids) & self._get_lookahead_mask(trg_token_ids)  # (B, 1, T, T)
        return self.transformer_encoder_decoder(src_token_ids, trg_token_ids, src_mask, trg_mask)


# -- harness ---------------------------------------------------------------------------------------
def make(spec) -> MachineTranslationTransformer:
    """MachineTranslationTransformer at the spec's sizes; one n_blocks for both stacks, PAD 0.

    Xavier initialisation runs in the constructor, as written; on the meta device it is a no-op.
    """
    assert spec.encoder_layers == spec.decoder_layers, "003 has one n_blocks for both stacks"
    assert spec.pad_id == 0, "003 builds its masks with pad_idx=0"
    return MachineTranslationTransformer(spec.d_model, spec.encoder_layers, spec.src_vocab, spec.tgt_vocab,
                                         spec.n_heads, spec.d_ff, spec.dropout)


def run(model: MachineTranslationTransformer, src, tgt_in, pad_id: int):
    """(B, S), (B, T) -> (B, T, V) logits. One column is appended for forward to drop again."""
    assert pad_id == 0
    trg_token_ids = torch.cat([tgt_in, torch.full_like(tgt_in[:, :1], pad_id)], dim=1)  # (B, T + 1)
    return model(src, trg_token_ids)


def masks(model: MachineTranslationTransformer, src, tgt_in, pad_id: int):
    """(encoder self, decoder self, cross) masks as the first encoder and decoder blocks receive them."""
    inner = model.transformer_encoder_decoder
    with tap(inner.encoder.encoder_blocks[0]) as enc, tap(inner.decoder.decoder_blocks[0]) as dec:
        run(model, src, tgt_in, pad_id)
    return enc.args[1], dec.args[3], dec.args[2]


def _weight_bias(ref: str, canon: str) -> CanonicalMap:
    """A Linear or LayerNorm: weight and bias."""
    return {f"{ref}.weight": (f"{canon}.weight",), f"{ref}.bias": (f"{canon}.bias",)}


def canonical_map(spec) -> CanonicalMap:
    """Reference parameter -> zoo canonical name(s).

    Q/K/V live in the block (W_q, W_k, W_v), W_O in the MultiHeadAttention (W_0). The tied table
    appears under its three names on both sides.
    """
    t = "transformer_encoder_decoder"
    m: CanonicalMap = {
        f"{t}.src_embedding.weight": ("src_embed.tokens.weight",),
        f"{t}.trg_embedding.weight": ("tgt_embed.tokens.weight",),
        f"{t}.linear.weight": ("output.weight",),
        f"{t}.linear.bias": ("output.bias",),
    }
    for i in range(spec.encoder_layers):
        ref, canon = f"{t}.encoder.encoder_blocks.{i}", f"encoder.layers.{i}"
        for proj in "qkv":
            m.update(_weight_bias(f"{ref}.W_{proj}", f"{canon}.self_attn.{proj}"))
        m.update(_weight_bias(f"{ref}.mha_layer.W_0", f"{canon}.self_attn.o"))
        m.update(_weight_bias(f"{ref}.add_and_norm_layer_1.layer_norm", f"{canon}.res_attn.norm"))
        m.update(_weight_bias(f"{ref}.ffn_layer.w_1", f"{canon}.ffn.w1"))
        m.update(_weight_bias(f"{ref}.ffn_layer.w_2", f"{canon}.ffn.w2"))
        m.update(_weight_bias(f"{ref}.add_and_norm_layer_2.layer_norm", f"{canon}.res_ffn.norm"))
    for i in range(spec.decoder_layers):
        ref, canon = f"{t}.decoder.decoder_blocks.{i}", f"decoder.layers.{i}"
        for n, attn, res in ((1, "self_attn", "res_self"), (2, "cross_attn", "res_cross")):
            for proj in "qkv":
                m.update(_weight_bias(f"{ref}.W_{proj}_{n}", f"{canon}.{attn}.{proj}"))
            m.update(_weight_bias(f"{ref}.mha_layer_{n}.W_0", f"{canon}.{attn}.o"))
            m.update(_weight_bias(f"{ref}.add_and_norm_{n}.layer_norm", f"{canon}.{res}.norm"))
        m.update(_weight_bias(f"{ref}.ffn_layer.w_1", f"{canon}.ffn.w1"))
        m.update(_weight_bias(f"{ref}.ffn_layer.w_2", f"{canon}.ffn.w2"))
        m.update(_weight_bias(f"{ref}.add_and_norm_3.layer_norm", f"{canon}.res_ffn.norm"))
    return m


def formula(d: int, h: int, f: int, n_enc: int, n_dec: int, v_src: int, v_tgt: int) -> int:
    """Trainable parameters of 003 counted by hand from its code.

    One table V * D shared by source, target and projection, plus the projection's bias V.
    Attention: W_q, W_k, W_v and W_0, biased D x D, 4(D^2 + D). FFN 2DF + F + D. One LayerNorm
    (2D) per sublayer: two per encoder block, three per decoder block.
    """
    assert v_src == v_tgt
    attn = 4 * (d * d + d)
    ffn = 2 * d * f + f + d
    return v_tgt * d + v_tgt + n_enc * (attn + ffn + 2 * 2 * d) + n_dec * (2 * attn + ffn + 3 * 2 * d)
