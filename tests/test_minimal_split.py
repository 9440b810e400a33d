"""The minimal family's split residual (token_dims > 0, MicroAdder's layout): parameters counted as
AdderBoard counts them, the spiral positions, what attention reads, and every decoding path."""

import math
from pathlib import Path

import pytest
import torch
from test_minimal_model import FMT10, SPLIT, make

from hf_arith import ArithTokenizer, MinimalConfig, NumberFormat
from hf_arith.runtime.decoding import greedy_decode


def make_split(seed=0, fmt=FMT10, **overrides):
    """A split model with spread-out random weights whose tokens lie far apart on the arc (random arc
    parameters can squeeze every token into one point, and then the rows' answers would not differ)."""
    model, tok = make(seed=seed, fmt=fmt, **{**SPLIT, **overrides})
    with torch.no_grad():
        model.model.embed_tokens.arc_params.copy_(torch.tensor([4.0, 0.0, 0.45]))
    return model, tok


def unique_parameters(model) -> dict[str, int]:
    return {name: p.numel() for name, p in model.named_parameters()}


def test_the_split_design_has_54_parameters_and_each_tie_saves_what_it_should():
    model, _ = make(**SPLIT)
    parts = unique_parameters(model)
    assert parts == {
        "model.embed_tokens.arc_params": 3,  # every token on one arc
        "model.spiral.answer_start": 3,  # the '=' token's point; the digits' points are fixed
        "model.head_proj.weight": 10,  # value projection, FFN down and head, all at once
        "model.layers.0.input_layernorm.weight": 5,  # one norm for all three places
        "model.layers.0.self_attn.q_rotation": 1,
        "model.layers.0.self_attn.q_proj.weight": 12,  # 3 position dims -> head dim 4
        "model.layers.0.self_attn.o_proj.down": 5,
        "model.layers.0.self_attn.o_proj.up": 5,
        "model.layers.0.mlp.up_proj.weight": 10,
    }
    assert model.num_parameters() == sum(parts.values()) == 54
    # No buffer is saved: fixed positions are recomputed, never parameters in disguise.
    assert set(model.state_dict()) == set(parts)
    costs = {"tie_down_head": ({"tie_down_head": False}, 10),  # its own 2 -> 5 down projection
             "tie_qk_rotation": ({"tie_qk_rotation": False}, 12 - 1),  # a key matrix instead of one angle
             "o_proj_rank": ({"o_proj_rank": 0}, 25 - 10),  # a full 5 x 5 output
             "learn_spiral": ({"learn_spiral": True}, 4)}  # amplitude, phase, slope, offset
    for name, (undo, extra) in costs.items():
        assert make(**{**SPLIT, **undo})[0].num_parameters() == 54 + extra, name


TOKEN_ONLY = {"split_paths": "tokens", "answer_start_position": "spiral", "o_proj_rank": 0}


def test_paths_on_the_token_dims_and_a_fixed_answer_start_make_33_parameters():
    model, _ = make(**{**SPLIT, **TOKEN_ONLY})
    parts = unique_parameters(model)
    assert parts == {
        "model.embed_tokens.arc_params": 3,
        "model.head_proj.weight": 4,  # token dims -> token dims
        "model.layers.0.input_layernorm.weight": 5,
        "model.layers.0.self_attn.q_rotation": 1,
        "model.layers.0.self_attn.q_proj.weight": 12,
        "model.layers.0.self_attn.o_proj.weight": 4,  # a full 2 x 2 output
        "model.layers.0.mlp.up_proj.weight": 4,
    }
    assert model.num_parameters() == sum(parts.values()) == 33
    assert set(model.state_dict()) == set(parts)
    # Each option alone: the '=' point costs 3, the wide paths 54 - 3 - 33 = 18 (with a rank-1 output).
    assert make(**{**SPLIT, "answer_start_position": "spiral"})[0].num_parameters() == 51
    assert make(**{**SPLIT, "split_paths": "tokens"})[0].num_parameters() == 36


def test_with_paths_on_the_token_dims_the_position_part_stays_as_embedded_and_logits_read_tokens():
    model, tok = make_split(seed=7, **TOKEN_ONLY)
    ids = tok(["1234567890+9876543210"], return_tensors="pt")["input_ids"]
    decoder = model.model
    columns = model.position_ids_from_input_ids(ids)
    embedded = decoder.embed(ids, position_ids=columns)
    layer = decoder.layers[0]
    out, _ = layer(embedded, None, None, head=decoder.head_proj)
    torch.testing.assert_close(out[..., 2:], embedded[..., 2:])  # attention and FFN wrote tokens only
    assert not torch.allclose(out[..., :2], embedded[..., :2])
    hidden = decoder(ids).last_hidden_state
    moved = hidden.clone()
    moved[..., 2:] += 100.0  # the head does not read the position part
    torch.testing.assert_close(model.logits(moved), model.logits(hidden))


def test_paths_on_tokens_and_slope_with_circle_queries_make_35_parameters_and_keep_x_and_y():
    flags = {"split_paths": "tokens_and_slope", "query_positions": "circle", "answer_start_position": "spiral"}
    model, tok = make_split(seed=8, **flags)
    parts = unique_parameters(model)
    assert parts["model.head_proj.weight"] == 2 * 3  # reads token dims and the slope dim
    assert parts["model.layers.0.self_attn.q_proj.weight"] == 2 * 4  # the circle's two dims -> head dim 4
    assert parts["model.layers.0.mlp.up_proj.weight"] == 3 * 2
    assert parts["model.layers.0.self_attn.o_proj.down"] + parts["model.layers.0.self_attn.o_proj.up"] == 3 + 3
    assert model.num_parameters() == 35
    ids = tok(["1234567890+9876543210"], return_tensors="pt")["input_ids"]
    decoder = model.model
    embedded = decoder.embed(ids, position_ids=model.position_ids_from_input_ids(ids))
    with torch.no_grad():
        decoder.layers[0].self_attn.o_proj.up.normal_()  # the output starts at zero: make it write
        out, _ = decoder.layers[0](embedded, None, None, head=decoder.head_proj)
    torch.testing.assert_close(out[..., 2:4], embedded[..., 2:4])  # the circle stays as embedded
    assert not torch.allclose(out[..., 4], embedded[..., 4])  # the slope dim is written to
    hidden = decoder(ids).last_hidden_state
    moved = hidden.clone()
    moved[..., 2:4] += 100.0
    torch.testing.assert_close(model.logits(moved), model.logits(hidden))


NARROW = {"split_paths": "tokens_and_slope", "norm_weights": "paths"}


def test_norm_weights_on_the_paths_fold_into_the_queries_without_changing_an_answer():
    """The x and y norm weights of a tokens-and-slope layout only scale what queries and keys read, so
    moving them into the query projection gives the same logits with two parameters fewer."""
    wide, tok = make_split(seed=9, split_paths="tokens_and_slope")
    narrow, _ = make_split(seed=9, **NARROW)
    assert wide.num_parameters() - narrow.num_parameters() == 2
    with torch.no_grad():
        norm = wide.model.layers[0].input_layernorm.weight
        norm.copy_(torch.tensor([1.3, 0.7, 2.0, 0.5, 1.9]))
        for name, p in narrow.named_parameters():
            p.copy_(dict(wide.named_parameters())[name] if "layernorm" not in name else norm[[0, 1, 4]])
        narrow.model.layers[0].self_attn.q_proj.weight[:, :2] *= norm[2:4]
    ids = tok(["1234567890+9876543210", "5+7"], padding=True, return_tensors="pt")
    torch.testing.assert_close(narrow(**ids).logits, wide(**ids).logits)


def test_values_read_as_tokens_fold_the_head_into_a_rank_one_output():
    """split_values='tokens' reads the token part as values; with a rank-1 output, the old output's
    first factor times the head's transpose is the new first factor: same logits, one parameter fewer."""
    head_values, tok = make_split(seed=10, **NARROW)
    token_values, _ = make_split(seed=10, **NARROW, split_values="tokens")
    assert head_values.num_parameters() - token_values.num_parameters() == 1
    with torch.no_grad():
        head_values.model.layers[0].self_attn.o_proj.up.normal_()  # starts at zero: make it write
        params = dict(head_values.named_parameters())
        for name, p in token_values.named_parameters():
            p.copy_(params[name] if not name.endswith("o_proj.down")
                    else params[name] @ params["model.head_proj.weight"].t())
    ids = tok(["1234567890+9876543210", "5+7"], padding=True, return_tensors="pt")
    torch.testing.assert_close(token_values(**ids).logits, head_values(**ids).logits)


def test_an_answer_start_on_the_circle_learns_only_its_slope_coordinate():
    model, tok = make_split(seed=11, answer_start_position="circle")
    assert model.model.spiral.answer_start.shape == (1,)
    assert make_split(seed=11)[0].num_parameters() - model.num_parameters() == 2
    with torch.no_grad():
        model.model.spiral.answer_start.fill_(0.9)
    ids = tok(["1234567890+9876543210"], return_tensors="pt")["input_ids"]
    points = model.model.spiral(ids, model.position_ids_from_input_ids(ids))[0]
    amplitude, period, _ = model.config.spiral
    angle = -2 * math.pi / period
    torch.testing.assert_close(points[21], torch.tensor([amplitude * math.cos(angle), amplitude * math.sin(angle), 0.9]))


def test_a_fixed_answer_start_sits_one_column_before_the_first_answer_digit():
    model, tok = make_split(seed=1, answer_start_position="spiral")
    ids = tok(["1234567890+9876543210"], return_tensors="pt")["input_ids"]
    columns = model.position_ids_from_input_ids(ids)
    points = model.model.spiral(ids, columns)[0]
    amplitude, period, slope = model.config.spiral
    angle = -2 * math.pi / period
    expected = torch.tensor([amplitude * math.cos(angle), amplitude * math.sin(angle), -slope])
    torch.testing.assert_close(points[21], expected)  # '='
    assert torch.equal(points[10], torch.zeros(3))  # '+' stays at the origin
    assert model.model.spiral.answer_start is None


def test_an_odd_head_dim_turns_its_pairs_and_leaves_the_last_dimension():
    from hf_arith.models.minimal_core import rotate_pairs

    x = torch.randn(2, 7, 5)
    angle = torch.tensor(0.7)
    turned = rotate_pairs(x, angle)
    torch.testing.assert_close(turned[..., 4], x[..., 4])
    for i in (0, 2):  # each plane turned by the angle, so lengths stay and the turn is exact
        plane, turned_plane = torch.complex(x[..., i], x[..., i + 1]), torch.complex(turned[..., i], turned[..., i + 1])
        torch.testing.assert_close(turned_plane, plane * torch.polar(torch.tensor(1.0), angle))
    # Five query dims with a learned spiral: MicroAdder's robust attention at 61 parameters.
    model, _ = make(**{**SPLIT, "head_dim": 5, "learn_spiral": True})
    assert model.num_parameters() == 54 + 3 + 4


def test_digit_i_of_both_operands_and_the_answer_share_one_fixed_point():
    model, tok = make_split(seed=1)
    ids = tok(["1234567890+9876543210"], return_tensors="pt")["input_ids"]
    ids = torch.cat([ids, torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]])], dim=1)  # 11 answer digits
    columns = model.position_ids_from_input_ids(ids)
    points = model.model.spiral(ids, columns)[0].detach()
    amplitude, period, slope = model.config.spiral
    for c in range(10):
        angle = 2 * math.pi * c / period
        expected = torch.tensor([amplitude * math.cos(angle), amplitude * math.sin(angle), slope * c])
        for start in (0, 11, 22):  # a, b and the answer, least significant digit first
            torch.testing.assert_close(points[start + c], expected)
    assert torch.equal(points[10], torch.zeros(3))  # '+'
    assert torch.equal(points[21], model.model.spiral.answer_start.detach())  # '=' has its own learned point
    assert not torch.equal(points[21], torch.zeros(3))


def test_a_learned_spiral_starts_as_the_fixed_one_and_moves_with_its_parameters():
    fixed, tok = make_split(seed=1)
    learned, _ = make_split(seed=1, learn_spiral=True)
    ids = tok(["1234567890+9876543210"], return_tensors="pt")["input_ids"]
    columns = fixed.position_ids_from_input_ids(ids)
    with torch.no_grad():
        learned.model.spiral.shape.copy_(learned.model.spiral.default_shape())
        learned.model.spiral.answer_start.copy_(fixed.model.spiral.answer_start)
    torch.testing.assert_close(learned.model.spiral(ids, columns), fixed.model.spiral(ids, columns))
    with torch.no_grad():
        learned.model.spiral.shape.copy_(torch.tensor([2.0, 0.5, 0.3, 1.0]))  # amplitude, phase, slope, offset
    points = learned.model.spiral(ids, columns)[0].detach()
    angle = 2 * math.pi * 3 / 10 + 0.5  # column 3 of a
    torch.testing.assert_close(points[3], torch.tensor([2.0 * math.cos(angle), 2.0 * math.sin(angle), 0.3 * 3 + 1.0]))
    assert torch.equal(points[10], torch.zeros(3))  # '+' stays at the origin


def test_queries_and_keys_read_positions_and_values_read_tokens():
    model, tok = make_split(seed=2)
    model.set_attn_implementation("eager")
    a = tok(["1234567890+9876543210"], return_tensors="pt")["input_ids"]
    b = tok(["5555555555+1000000001"], return_tensors="pt")["input_ids"]
    out_a, out_b = model(a, output_attentions=True), model(b, output_attentions=True)
    # Where each position looks does not depend on the digits (only the norm's scale does)...
    weights_a, weights_b = out_a.attentions[0], out_b.attentions[0]
    assert weights_a.shape == weights_b.shape
    # ...so with the norm switched off it is exactly the same pattern.
    with torch.no_grad():
        model.model.layers[0].input_layernorm.kind = "none"
        pattern_a = model(a, output_attentions=True).attentions[0]
        pattern_b = model(b, output_attentions=True).attentions[0]
        model.model.layers[0].input_layernorm.kind = "rmsnorm"
    torch.testing.assert_close(pattern_a, pattern_b)
    assert not torch.allclose(out_a.logits, out_b.logits)  # what it copies does


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("fmt", [FMT10, NumberFormat(end_token=True)], ids=["fixed-width", "left-padded"])
def test_every_decoding_path_gives_the_same_tokens(attn, fmt):
    model, tok = make_split(seed=3, fmt=fmt)
    model.set_attn_implementation(attn)
    enc = tok(["12+34", "9999999999+1", "5+5", "123456+654321"], padding=True, return_tensors="pt")
    reference = model.generate(**enc, max_new_tokens=11, do_sample=False)[:, enc.input_ids.shape[1]:]
    stop = dict(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    cached = greedy_decode(model, enc.input_ids, enc.attention_mask, 11, use_cache=True, **stop)
    uncached = greedy_decode(model, enc.input_ids, enc.attention_mask, 11, use_cache=False, **stop)
    assert torch.equal(cached, reference)
    assert torch.equal(uncached, reference)
    last = model(**enc).logits[:, -1]
    assert not torch.allclose(last[0], last[1])  # the rows' digits reach the output


def test_left_padding_does_not_move_a_rows_positions():
    fmt = NumberFormat(end_token=True)
    model, tok = make_split(seed=4, fmt=fmt)
    alone = tok(["7+8"], return_tensors="pt")
    batch = tok(["7+8", "123456+7"], padding=True, return_tensors="pt")
    assert batch.attention_mask[0, 0] == 0
    a = greedy_decode(model, alone.input_ids, alone.attention_mask, 6)
    b = greedy_decode(model, batch.input_ids, batch.attention_mask, 6)
    assert torch.equal(a[0], b[0])


def test_only_spiral_models_compute_positions_from_the_sequence():
    split, _ = make_split()
    rope, _ = make()
    assert hasattr(split, "position_ids_from_input_ids")
    assert not hasattr(rope, "position_ids_from_input_ids")  # its positions follow from the mask


def test_a_cached_step_without_position_ids_is_a_clear_error():
    from transformers import DynamicCache

    model, tok = make_split(seed=5)
    ids = tok(["12+34"], return_tensors="pt")["input_ids"]
    cache = DynamicCache()
    model(ids, past_key_values=cache, use_cache=True)
    with pytest.raises(ValueError, match="position_ids computed from the whole sequence"):
        model(torch.tensor([[3]]), past_key_values=cache, use_cache=True)


@pytest.mark.parametrize("bad, message", [
    ({"position_embedding": "rope", "head_dim": 4}, "token_dims > 0 and position_embedding='spiral' go together"),
    ({"hidden_size": 6}, "hidden_size must be token_dims \\+ 3"),
    ({"mlp_type": "gated"}, "mlp_type='plain'"),
    ({"num_attention_heads": 2}, "one attention head"),
    ({"intermediate_size": 3}, "tie_down_head needs intermediate_size == token_dims"),
    ({"spiral": [1.0, 0.0, 0.1]}, "spiral must be"),
    ({"spiral": [1.0, 10.0]}, "spiral must be"),
    ({"answer_start_token_id": None}, "answer_start_token_id"),
    ({"token_dims": -1}, "token_dims"),
    ({"o_proj_rank": 1.5}, "o_proj_rank"),
    ({"tie_qk_rotation": "yes"}, "tie_qk_rotation"),
    ({"learn_spiral": 1}, "learn_spiral"),
    ({"split_paths": "yes"}, "split_paths"),
    ({"query_positions": "slope"}, "query_positions"),
    ({"norm_weights": "paths"}, "norm_weights='paths' needs"),  # the paths are all dims
    ({"split_values": "x"}, "split_values"),
    ({"answer_start_position": "origin"}, "answer_start_position"),
])
def test_malformed_split_configs_name_the_problem(bad, message):
    tok = ArithTokenizer(number_format=FMT10)
    kwargs = {**SPLIT, "vocab_size": len(tok), "answer_start_token_id": tok.convert_tokens_to_ids("=")}
    with pytest.raises(ValueError, match=message):
        MinimalConfig(**{**kwargs, **bad})


@pytest.mark.parametrize("option", [{"tie_down_head": True}, {"learn_spiral": True}, {"tie_qk_rotation": True},
                                    {"o_proj_rank": 1}, {"split_paths": "tokens"},
                                    {"answer_start_position": "spiral"}, {"query_positions": "circle"},
                                    {"norm_weights": "paths"}, {"split_values": "tokens"}])
def test_split_only_options_need_the_split_residual(option):
    name = next(iter(option))
    with pytest.raises(ValueError, match=f"{name} needs the split residual"):
        MinimalConfig(**option)


def test_summary_counts_the_split_model_and_its_compute():
    """The head projection reaches the layers as a module: a parameter among a module's inputs would
    trip the module tracker of torch's FlopCounterMode, which the summary runs under no_grad."""
    from hf_arith.evaluation.model_summary import model_summary

    model, tok = make_split(seed=6)
    summary = model_summary(model, tok, "9999999999+1")
    assert summary["parameters"]["unique"] == 54
    assert summary["compute"]["prefill_macs"] > 0 and summary["compute"]["generated_tokens"] == 11


def preset_and_model(name: str):
    """A preset's recipe and the untrained model it builds."""
    from hf_arith.data.streaming import worst_case_length
    from hf_arith.training.recipe import check_recipe, load_recipe
    from hf_arith.training.run import build_model, build_tokenizer, recipe_spec

    recipe = load_recipe(name)
    fmt = check_recipe(recipe)
    context = worst_case_length(recipe_spec(recipe, fmt), fmt)
    return recipe, build_model(recipe, build_tokenizer(fmt, context), context)


def test_the_wide_arc_preset_builds_the_bundled_54_parameter_design():
    """Its record against the bundled model's: tests/test_recipe_stages.py, for every bundled model."""
    import json

    import hf_arith

    recipe, model = preset_and_model("minimal-add10-split-wide-arc")
    assert model.num_parameters() == 54
    assert recipe.model["arc_init"] == [10.0, -1.2, 0.1] and recipe.optim.screen_steps == 0  # one run, no screen
    summary = json.loads((Path(hf_arith.bundled_path("minimal-add10-split-wide-arc")) / "training_summary.json")
                         .read_text())
    assert summary["verify"]["correct"] == summary["verify"]["total"] == 10010
