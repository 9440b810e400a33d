"""The abacus GPT-2 family: GPT-2 blocks whose digits are positioned by abacus ids.

Layout follows transformers' GPT-2 (pre-norm blocks, fused QKV, GELU MLP, tied head), with the
attention chosen through ALL_ATTENTION_FUNCTIONS, `Cache` objects, `GenerationMixin` and
`CausalLMOutputWithPast`. Multi-token prediction adds one extra block per future token on top
of the trunk (as in Gloeckle et al. 2024), all sharing the final norm and the tied unembedding.
Shipped as Hub remote code: imports only torch, transformers and sibling files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .abacus_positions import (
    abacus_position_ids,
    after_prompt,
    b_digits,
    check_abacus_range,
    closed_slots,
    label_items,
    line_positions,
    line_window_codes,
    line_window_relations,
    offset_answer_segments,
    offset_item_segments,
    operand_line_rows,
    pack_positions,
    pack_roles,
    pack_rows,
    pair_role_codes,
    pair_roles,
    problem_ids,
    random_offsets,
    row_window_allowed,
    segment_ids,
    table_rows,
    unpack_positions,
    unpack_roles,
    unpack_rows,
    window_allowed,
)
from .configuration_abacus_gpt2 import AbacusGPT2Config
from .modeling_common import (
    CACHE_FIELD,
    IGNORE_INDEX,
    ArithModelMixin,
    causal_mask,
    check_prompt,
    eager_attention_forward,
    gather_keys,
    kept_queries,
    positions_from_mask,
    resolve_cache,
    restricted_causal_mask,
    rows_by_code,
)


class AbacusGPT2Attention(nn.Module):
    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.config, self.layer_idx = config, layer_idx
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // self.num_heads
        self.scaling = self.head_dim**-0.5
        self.is_causal = True
        self.c_attn = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.c_proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states, attention_mask, past_key_values=None, queries: int = 0, key_index=None,
                own_only: bool = False, **kwargs):
        """`queries` > 0: keys and values for every position, queries (and output) for the last `queries` only.
        `key_index` [batch, n]: attend over these keys only (the mask covers them; `restricted_causal_mask`).
        `own_only`: each query sees its own key alone, so its softmax is 1 there and the output is its own value."""
        batch, length, _ = hidden_states.shape
        q, k, v = self.c_attn(hidden_states).view(batch, length, 3, self.num_heads, self.head_dim).unbind(2)
        if queries:
            q = q[:, -queries:]
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        if past_key_values is not None:
            k, v = past_key_values.update(k, v, self.layer_idx)
        if own_only:
            output = v[:, :, -q.shape[2]:].transpose(1, 2)  # [batch, queries, heads, head_dim], as attention returns
            return self.resid_dropout(self.c_proj(output.reshape(batch, q.shape[2], -1))), None
        k, v = gather_keys(k, v, key_index)
        attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        dropout = self.config.attn_pdrop if self.training else 0.0
        output, weights = attention_interface(self, q, k, v, attention_mask, scaling=self.scaling, dropout=dropout, **kwargs)
        output = self.resid_dropout(self.c_proj(output.reshape(batch, q.shape[2], -1)))
        return output, weights


class AbacusGPT2MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.hidden_size, config.intermediate_size)
        self.c_proj = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = ACT2FN[config.activation_function]
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class AbacusGPT2Block(nn.Module):
    """A pre-norm GPT-2 block; returns (hidden states, attention weights or None)."""

    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.attn = AbacusGPT2Attention(config, layer_idx)
        self.ln_2 = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.mlp = AbacusGPT2MLP(config)

    def forward(self, hidden_states, attention_mask, past_key_values=None, queries: int = 0, **kwargs):
        """`queries` > 0: outputs for the last `queries` positions only (all of them still fill the cache)."""
        if queries and attention_mask is not None:
            attention_mask = attention_mask[:, :, -queries:]
        attn_out, weights = self.attn(self.ln_1(hidden_states), attention_mask, past_key_values, queries, **kwargs)
        if queries:
            hidden_states = hidden_states[:, -queries:]
        hidden_states = hidden_states + attn_out
        hidden_states = hidden_states + self.mlp(self.ln_2(hidden_states))
        return hidden_states, weights


class AbacusGPT2PreTrainedModel(ArithModelMixin, PreTrainedModel):
    config: AbacusGPT2Config
    config_class = AbacusGPT2Config
    base_model_prefix = "transformer"
    _no_split_modules = ["AbacusGPT2Block"]
    _supports_sdpa = True
    _supports_flash_attn = False
    _supports_attention_backend = True

    @torch.no_grad()
    def _init_weights(self, module):
        # Explicit N(0, 0.02) init, with GPT-2's 1/sqrt(2 * layers) scale on residual projections.
        # transformers.initialization skips tensors that were loaded from a checkpoint.
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            init.normal_(module.weight, mean=0.0, std=std)
            if getattr(module, "bias", None) is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        if isinstance(module, (AbacusGPT2Attention, AbacusGPT2MLP)):
            init.normal_(module.c_proj.weight, mean=0.0, std=std / math.sqrt(2 * self.config.num_hidden_layers))

    def position_ids_from_input_ids(self, input_ids: torch.Tensor, generated_from: int | None = None) -> torch.Tensor:
        """Abacus positions of a whole sequence (with the segments packed in, when the model has them);
        decoders with a KV cache slice the new tokens' tail.

        `generated_from`: the column where generated tokens start. A generated number longer than
        the table is a malformed answer (the limits never let a well-formed one be), so it takes
        the table's last index and the batch decodes on, where the prompt's would be an error.
        """
        c = self.config
        index = abacus_position_ids(input_ids, c.num_digit_tokens, c.answer_start_token_id if c.abacus_align_answer else None)
        if c.abacus_line_positions:
            index, slot = line_positions(input_ids, c.answer_start_token_id, c.num_digit_tokens, index,
                                         pairs=c.abacus_line_window)
            line = index
            if c.abacus_relation_bias:  # the window counts the lines (answer_lines), so their number has no table
                index = torch.where((input_ids == c.answer_start_token_id).long().cumsum(-1) > 0, 1, index)
        if generated_from is not None:
            check_abacus_range(index[:, :generated_from], c.abacus_max_digits)
            index = index.clamp(max=c.abacus_max_digits)
        check_abacus_range(index, c.abacus_max_digits)  # before packing, which a too-long number would corrupt
        if c.abacus_line_positions:  # a pad or a malformed line past the table takes its last slot
            segment = slot.clamp(max=c.abacus_num_segments - 1)
            if c.abacus_prompt_segments:  # before the first `=`: which number, as without line positions
                in_prompt = (input_ids == c.answer_start_token_id).long().cumsum(-1) == 0
                if c.abacus_line_window:  # an item's label, `:`, digits and `,` (three separators) share its number
                    separators = segment_ids(input_ids, c.num_digit_tokens, c.pad_token_id, 3 * c.abacus_num_segments)
                    separators = ((separators + 2) // 3).clamp(max=c.abacus_num_segments - 1)
                else:
                    separators = segment_ids(input_ids, c.num_digit_tokens, c.pad_token_id, c.abacus_num_segments)
                segment = torch.where(in_prompt, separators, segment)
                if c.abacus_line_window:  # the item each token names (an `=`: the slot it closes) rides in the row slot
                    items = label_items(input_ids, segment, in_prompt, c.vocab_size, c.num_digit_tokens,
                                        c.abacus_marked_labels)
                    if c.abacus_line_end:
                        items = items + closed_slots(input_ids, c.answer_start_token_id, segment)
                    if c.abacus_pair_roles:  # computed here, where the whole list is in view, and carried
                        roles = pair_roles(line, segment, in_prompt, per_place=c.abacus_pair_roles != "every_line",
                                           place_ends=bool(c.abacus_digit_places))
                        items = pack_roles(roles, items, c.abacus_num_segments)
                    segment = pack_rows(items, segment, c.abacus_num_segments)
        else:
            segment = segment_ids(input_ids, c.num_digit_tokens, c.pad_token_id, c.abacus_num_segments,
                                  c.eos_token_id if c.abacus_offset_per_problem else None) if c.abacus_num_segments else None
            if c.abacus_operand_rows:  # a malformed answer's extra lines take the table's last row
                rows = operand_line_rows(input_ids, c.answer_start_token_id, c.num_digit_tokens, c.pad_token_id)
                segment = pack_rows(rows.clamp(max=c.abacus_max_digits), segment, c.abacus_num_segments)
                if c.abacus_row_window:  # b's digits are found by row alone: an index would tie them to a's
                    index = torch.where(b_digits(input_ids, rows, c.answer_start_token_id), 0, index)
        return pack_positions(index, segment, c.abacus_max_digits)


@dataclass
class AbacusModelOutputWithPast(BaseModelOutputWithPast):
    """`future_hidden_states`: [batch, length, heads - 1, hidden], the extra heads' final states."""

    future_hidden_states: torch.FloatTensor | None = None


@dataclass
class AbacusCausalLMOutputWithPast(CausalLMOutputWithPast):
    """`future_logits`: [batch, length, heads - 1, vocab]; head j predicts the token j + 1 places after the next."""

    future_logits: torch.FloatTensor | None = None


def check_future_tokens(config, num_future_tokens: int) -> None:
    if not isinstance(num_future_tokens, int) or not 1 <= num_future_tokens <= config.num_future_tokens:
        raise ValueError(f"num_future_tokens={num_future_tokens!r}, but this model has {config.num_future_tokens} "
                         f"output head(s), so it predicts between 1 and {config.num_future_tokens} tokens per pass")


class AbacusGPT2Model(AbacusGPT2PreTrainedModel):
    def __init__(self, config: AbacusGPT2Config):
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        # row 0: not a digit; with abacus_period the rows repeat along a number (table_rows)
        self.abacus = nn.Embedding((config.abacus_period or config.abacus_max_digits) + 1, config.hidden_size)
        # with abacus_relation_bias the line window's slots and items are read as relations, not embedded
        self.segment = (nn.Embedding(config.abacus_num_segments, config.hidden_size)
                        if config.abacus_num_segments and not config.abacus_relation_bias else None)
        self.row = (nn.Embedding(config.abacus_max_digits + 1, config.hidden_size)
                    if config.abacus_operand_rows else None)
        self.role = (nn.Embedding(pair_role_codes(bool(config.abacus_digit_places)), config.hidden_size)
                     if config.abacus_pair_roles else None)  # pair_roles
        self.relation_bias = (nn.Embedding(line_window_codes(bool(config.abacus_digit_places)), config.num_attention_heads)
                              if config.abacus_relation_bias else None)  # line_window_relations, per head
        self.wpe = (nn.Embedding(config.max_position_embeddings, config.hidden_size)
                    if config.absolute_position_embedding else None)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList([AbacusGPT2Block(config, i) for i in range(config.num_hidden_layers)])
        n = config.num_hidden_layers
        self.future_heads = nn.ModuleList([AbacusGPT2Block(config, n + j) for j in range(config.num_future_tokens - 1)])
        self.ln_f = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.post_init()

    def get_input_embeddings(self):
        return self.wte

    def set_input_embeddings(self, value):
        self.wte = value

    def embed(self, input_ids, attention_mask, position_ids, past_length: int):
        """(token + abacus (+ absolute) embeddings, the unshifted position ids of the new tokens); the
        embedded abacus ids get the random offset in training, the attention window reads the unshifted ones."""
        length = input_ids.shape[1]
        check_prompt(self.config, input_ids, length, past_length)
        c = self.config
        computed = position_ids is None
        if computed:
            if past_length:
                raise ValueError("with a KV cache, pass position_ids computed from the whole sequence "
                                 "(model.position_ids_from_input_ids); generate() does this itself")
            position_ids = self.position_ids_from_input_ids(input_ids)
        index, segment = unpack_positions(position_ids, c.abacus_max_digits) if c.abacus_num_segments \
            else (position_ids, None)
        row = role = None
        if self.row is not None:  # rows share the segment slot (position_ids_from_input_ids)
            row, segment = unpack_rows(segment, c.abacus_num_segments)
        elif c.abacus_line_window:  # so do the items the line window reads (not embedded) and the roles
            items, segment = unpack_rows(segment, c.abacus_num_segments)
            role = unpack_roles(items, c.abacus_num_segments)[0] if self.role is not None else None
        if not computed:  # ids from position_ids_from_input_ids were checked there
            check_abacus_range(index, c.abacus_max_digits)
            if segment is not None and segment.numel() and int(segment.max()) >= c.abacus_num_segments:
                raise ValueError(f"position_ids hold segment {int(segment.max())}, but this model has "
                                 f"{c.abacus_num_segments} segments (config.abacus_num_segments)")
            if row is not None and row.numel() and int(row.max()) > c.abacus_max_digits:
                raise ValueError(f"position_ids hold row {int(row.max())}, but this model has rows up to "
                                 f"{c.abacus_max_digits} (config.abacus_max_digits)")
        placed = position_ids
        if computed and self.training:
            packed = c.abacus_offset_per_problem and c.eos_token_id is not None
            problem = problem_ids(input_ids, c.eos_token_id) if packed else None
            shifted = random_offsets(index, c.abacus_max_offset, c.abacus_max_digits, c.abacus_offset_per_sequence,
                                     c.abacus_unshifted_fraction, c.abacus_offset_all_tokens, problem,
                                     c.abacus_even_offsets)
            if c.abacus_offset_segments:
                segment = offset_answer_segments(input_ids, segment, shifted - index, c.answer_start_token_id,
                                                 c.abacus_num_segments, c.abacus_offset_segments)
            if c.abacus_offset_items:  # under the line window, items and slots move together (drawn with relation bias
                # too, unembedded, so the random stream of a recorded run stays the same)
                segment = offset_item_segments(input_ids, segment, c.answer_start_token_id, c.abacus_num_segments,
                                               c.pad_token_id, c.abacus_even_offsets, c.abacus_line_window)
            index = shifted
            if row is not None:  # a draw of its own, so no row stays tied to a digit index, and uniform:
                # with a share left at k = 0, rows from 1 up became a regime of their own, learnt only up to
                # the trained number of lines (docs/findings.md)
                row = random_offsets(row, c.abacus_max_offset, c.abacus_max_digits, c.abacus_offset_per_sequence)
        if self.relation_bias is not None:  # an answer token's index is its line: read by the window, not embedded
            index = torch.where(role > 0, 0, index)
            if not c.abacus_place_rows:  # nor a prompt digit's place: the place relation finds what a line reads
                index = torch.zeros_like(index)
        hidden = self.wte(input_ids) + self.abacus(table_rows(index, c.abacus_period))
        if self.segment is not None:
            hidden = hidden + self.segment(segment)
        if row is not None:
            hidden = hidden + self.row(row)
        if role is not None:
            hidden = hidden + self.role(role)
        if self.wpe is not None:
            hidden = hidden + self.wpe(positions_from_mask(attention_mask, length, past_length, input_ids.device))
        return self.drop(hidden), placed

    def placement(self, position_ids: torch.Tensor) -> tuple:
        """(index, row, segment) of unshifted position ids; row and segment are None where the model has none."""
        c = self.config
        if not c.abacus_num_segments:
            return position_ids, None, None
        index, segment = unpack_positions(position_ids, c.abacus_max_digits)
        row = None
        if self.row is not None or c.abacus_line_window:
            row, segment = unpack_rows(segment, c.abacus_num_segments)
        if self.role is not None:  # the line window reads the items alone
            row = unpack_roles(row, c.abacus_num_segments)[1]
        return index, row, segment

    def attention_mask_for(self, hidden_states, position_ids, attention_mask, past_key_values, past_length: int,
                           key_position_ids=None, output_attentions: bool = False):
        """The blocks' (mask, key_index): the mask is causal (with padding), and with `abacus_attention_window`
        also the window (`abacus_positions.window_allowed`, or `row_window_allowed` with abacus_row_window,
        `line_window_allowed` with abacus_line_window)
        between the new tokens' unshifted `position_ids` and every key's. With a KV cache the keys' come
        from `key_position_ids`, the whole sequence's position ids (`position_inputs` gives them), since
        the cache keeps no positions.

        `key_index` (None, or [batch, n]) is set when cached decoding under a window: a query sees a few
        dozen keys whatever the sequence's length, so attention reads only those (and the mask covers
        only them). Attention maps want every key, so `output_attentions` keeps them all. With
        abacus_relation_bias the mask is [batch, heads, queries, keys]: each head's learned bias for each
        key's relation to its query (`line_window_relations`) is added to it."""
        c = self.config
        if not (c.abacus_attention_window or c.abacus_row_window or c.abacus_line_window):
            return causal_mask(c, hidden_states, attention_mask, past_key_values, past_length), None
        queries = keys = self.placement(position_ids)
        if past_length:
            expected = (position_ids.shape[0], past_length + position_ids.shape[1])
            if key_position_ids is None or tuple(key_position_ids.shape) != expected:
                raise ValueError(f"an abacus attention window with a KV cache needs key_position_ids of shape "
                                 f"{list(expected)} (model.position_inputs gives them); "
                                 f"generate() passes them")
            keys = self.placement(key_position_ids)
        if c.abacus_row_window:
            allowed = row_window_allowed(queries, keys)
        elif c.abacus_line_window:  # the answer starts in the keys' sequence; the queries are its last tokens
            is_answer = after_prompt(keys[0], keys[2])
            relations = line_window_relations((*queries, is_answer[:, -position_ids.shape[1]:]), (*keys, is_answer),
                                              c.abacus_line_end, c.abacus_digit_places, c.abacus_line_behind)
            allowed = relations > 0
        else:
            allowed = window_allowed(queries[0], keys[0], c.abacus_attention_window)
        mask, key_index = restricted_causal_mask(allowed, attention_mask, past_length, hidden_states.dtype,
                                                 gather_keys=bool(past_length) and not output_attentions)
        if self.relation_bias is not None:  # [batch, heads, queries, keys]: each head's score for each relation
            if key_index is not None:
                relations = relations.gather(2, key_index[:, None, :].expand(-1, relations.shape[1], -1))
            mask = mask + rows_by_code(self.relation_bias.weight, relations).permute(0, 3, 1, 2).to(mask.dtype)
        return mask, key_index

    def self_only_attention(self, hidden_states, attention_mask, past_length: int, output_attentions: bool = False):
        """(mask, key_index, block flags) of the blocks above `abacus_window_layers`: each token sees only itself.
        Its attention is then its own value (`own_only`), with no mask built, no attention over the sequence;
        a mask stays where attention maps are asked for or attention dropout would act on that one weight."""
        if output_attentions or (self.training and self.config.attn_pdrop):
            return *self.self_only_mask(hidden_states, attention_mask, past_length, output_attentions), {}
        return None, None, {"own_only": True}

    def self_only_mask(self, hidden_states, attention_mask, past_length: int, output_attentions: bool = False):
        """(mask, key_index) under which each token sees only itself."""
        batch, queries = hidden_states.shape[:2]
        keys = past_length + queries
        own = torch.arange(past_length, keys, device=hidden_states.device)
        allowed = (torch.arange(keys, device=hidden_states.device)[None, :] == own[:, None]).expand(batch, -1, -1)
        return restricted_causal_mask(allowed, attention_mask, past_length, hidden_states.dtype,
                                      gather_keys=bool(past_length) and not output_attentions)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                use_cache=None, output_attentions=False, num_future_tokens: int = 1,
                cache: Cache | None = None, keep_last: int = 0, key_position_ids=None,
                **kwargs) -> AbacusModelOutputWithPast:
        """`keep_last` > 0 (the LM head's `logits_to_keep`): the topmost block of each output (the last
        trunk block, or the extra heads' blocks, which read the whole trunk) computes outputs for the last
        `keep_last` positions only; every position still fills the cache."""
        if input_ids is None:
            raise ValueError("abacus models need input_ids (positions are computed from the digits)")
        check_future_tokens(self.config, num_future_tokens)
        past_key_values = resolve_cache(past_key_values, cache, use_cache)
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0
        hidden_states, placed = self.embed(input_ids, attention_mask, position_ids, past_length)
        mask, key_index = self.attention_mask_for(hidden_states, placed, attention_mask, past_key_values,
                                                  past_length, key_position_ids, output_attentions)
        keep = kept_queries(keep_last, input_ids.shape[1], mask, output_attentions)
        windowed = self.config.abacus_window_layers or len(self.h)
        upper = (mask, key_index, {})  # the blocks above the windowed ones, and the extra heads' blocks
        if self.config.abacus_window_layers:
            upper = self.self_only_attention(hidden_states, attention_mask, past_length, output_attentions)
        attentions = []
        for i, block in enumerate(self.h):
            last = i == len(self.h) - 1 and num_future_tokens == 1
            block_mask, block_keys, flags = (mask, key_index, {}) if i < windowed else upper
            hidden_states, weights = block(hidden_states, block_mask, past_key_values, keep if last else 0,
                                           key_index=block_keys, **flags, **kwargs)
            if output_attentions:
                attentions.append(weights)
        # The extra heads' blocks sit above the trunk: with abacus_window_layers they see only their token.
        future = [block(hidden_states, upper[0], past_key_values, keep, key_index=upper[1], **upper[2], **kwargs)[0]
                  for block in self.future_heads[: num_future_tokens - 1]]
        if future and keep:
            hidden_states = hidden_states[:, -keep:]
        return AbacusModelOutputWithPast(
            last_hidden_state=self.ln_f(hidden_states),
            **{CACHE_FIELD: past_key_values if use_cache else None},
            attentions=tuple(attentions) if output_attentions else None,
            future_hidden_states=self.ln_f(torch.stack(future, dim=2)) if future else None,
        )


class AbacusGPT2ForCausalLM(AbacusGPT2PreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "transformer.wte.weight"}
    # A warm start may lengthen the abacus and row tables (a larger abacus_max_digits) or the segment table
    # (more numbers or lines, abacus_num_segments): the trained rows are kept and the new ones learned, which
    # is how a model extends the lengths it can place.
    _warm_start_growable_tables = ("transformer.abacus.weight", "transformer.segment.weight",
                                   "transformer.row.weight")
    trunk_class = AbacusGPT2Model  # the looped family runs its own trunk under the same head

    def __init__(self, config: AbacusGPT2Config):
        super().__init__(config)
        self.transformer = self.trunk_class(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def prepare_inputs_for_generation(self, input_ids, **kwargs):
        # Abacus ids depend on the whole sequence: compute them from the full input_ids; the
        # generation mixin then slices them to the tokens the cache has not seen. Numbers after the
        # prompt are generated: one longer than the table is a malformed answer that decodes on, as
        # in the shared decoder, instead of an error halfway through generate().
        kwargs.update(self.position_inputs(input_ids, input_ids.shape[1]))
        return super().prepare_inputs_for_generation(input_ids, **kwargs)

    def position_inputs(self, sequence: torch.Tensor, new_tokens: int, generated_from: int | None = None) -> dict:
        """The position kwargs of a forward over the last `new_tokens` of `sequence` (the rest cached):
        their `position_ids` (generate() slices them itself, so it asks for all of them), and with an
        attention window the whole sequence's as `key_position_ids`. `generated_from`: the column where
        generated tokens start (default: after the latest row's first `=`)."""
        if generated_from is None:
            generated_from = self.prompt_end(sequence)
        full = self.position_ids_from_input_ids(sequence, generated_from)
        inputs = {"position_ids": full[:, -new_tokens:]}
        c = self.config
        if c.abacus_attention_window or c.abacus_row_window or c.abacus_line_window:
            inputs["key_position_ids"] = full
        return inputs

    def prompt_end(self, input_ids: torch.Tensor) -> int | None:
        """The column after the latest row's first `=` (the prompt's last token), or None when a row has
        none: every number before it is checked against the table, none of the prompt is ever clamped."""
        start = self.config.answer_start_token_id
        is_start = input_ids == start if start is not None else None
        if is_start is None or not bool(is_start.any(-1).all()):
            return None
        return int(is_start.int().argmax(-1).max()) + 1

    def get_input_embeddings(self):
        return self.transformer.wte

    def get_output_embeddings(self):
        return self.lm_head

    def init_missing_from_loaded(self, missing: list[str]) -> None:
        """After a warm start from a model with fewer heads: new head blocks start as copies of the
        last trunk block, which already looks up operand digits, rather than from noise, whose
        gradients would wreck the trained trunk in the first steps."""
        trunk = self.transformer.h[-1].state_dict()
        for j, block in enumerate(self.transformer.future_heads):
            if any(name.startswith(f"transformer.future_heads.{j}.") for name in missing):
                block.load_state_dict(trunk)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values: Cache | None = None,
                labels=None, use_cache=None, logits_to_keep=0, output_attentions=False,
                num_future_tokens: int | None = None, cache: Cache | None = None, key_position_ids=None,
                **kwargs) -> AbacusCausalLMOutputWithPast:
        if num_future_tokens is None:  # training trains every head; generate() needs the next token only
            num_future_tokens = self.config.num_future_tokens if labels is not None else 1
        outputs = self.transformer(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
            past_key_values=past_key_values if cache is None else cache, use_cache=use_cache, output_attentions=output_attentions,
            num_future_tokens=num_future_tokens, keep_last=logits_to_keep if isinstance(logits_to_keep, int) else 0,
            key_position_ids=key_position_ids, **kwargs,
        )
        hidden, future = outputs.last_hidden_state, outputs.future_hidden_states
        if logits_to_keep:
            hidden = hidden[:, -logits_to_keep:]
            future = future[:, -logits_to_keep:] if future is not None else None
        logits = self.lm_head(hidden)
        future_logits = self.lm_head(future) if future is not None else None
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
            for j in range(1, num_future_tokens):
                # Head j at position t predicts token t + 1 + j: the labels shifted j more places.
                shifted = F.pad(labels[:, j:], (0, j), value=IGNORE_INDEX)
                loss = loss + self.loss_function(logits=future_logits[:, :, j - 1], labels=shifted,
                                                 vocab_size=self.config.vocab_size, **kwargs)
            loss = loss / num_future_tokens
        return AbacusCausalLMOutputWithPast(
            loss=loss, logits=logits, **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)}, attentions=outputs.attentions,
            future_logits=future_logits,
        )


__all__ = ["AbacusGPT2ForCausalLM", "AbacusGPT2Model", "AbacusGPT2PreTrainedModel"]
