"""Structured pruning of the split adder (hf_arith.models.minimal_narrowing): the folds that lose
nothing give the same logits, the slices keep what the narrower layout reads, a warm start narrows a
wider checkpoint, and what is not a narrowing of the same design is refused in one line."""

import pytest
import torch
from test_minimal_model import FMT10, SPLIT
from test_minimal_split import make_split, unique_parameters

from hf_arith import MinimalConfig
from hf_arith.models.minimal_narrowing import NarrowingError, narrow_state, path_dims
from hf_arith.models.modeling_minimal import MinimalForCausalLM
from hf_arith.training.warm_start import WarmStartError, warm_start

SLOPE = {"split_paths": "tokens_and_slope"}
FOLDED = {**SLOPE, "norm_weights": "paths", "split_values": "tokens", "o_proj_angle": True}
NARROW = {**FOLDED, "head_dim": 3}


def spread(model, seed: int):
    """Weights that all matter: norm weights away from 1 and an output that writes (it starts at zero)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layernorm" in name:
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("o_proj.up"):
                p.copy_(torch.randn(p.shape, generator=g))


def narrowed(wide, **layout):
    narrow = MinimalForCausalLM(MinimalConfig(**{**wide.config.to_dict(), **layout}))
    narrow.load_state_dict(narrow_state(wide.state_dict(), wide.config, narrow.config))
    return narrow


def test_the_35_parameter_layout_counts_each_tensor():
    model, _ = make_split(seed=0, **NARROW)
    assert unique_parameters(model) == {
        "model.embed_tokens.arc_params": 3,
        "model.spiral.answer_start": 3,
        "model.head_proj.weight": 2 * 3,  # token dims and the slope dim -> token dims
        "model.layers.0.input_layernorm.weight": 3,  # the paths' dims
        "model.layers.0.self_attn.q_rotation": 1,
        "model.layers.0.self_attn.q_proj.weight": 3 * 3,  # x, y, slope -> head dim 3
        "model.layers.0.self_attn.o_proj.angle": 1,  # the direction the output reads the token values along
        "model.layers.0.self_attn.o_proj.up": 3,
        "model.layers.0.mlp.up_proj.weight": 3 * 2,
    }
    assert model.num_parameters() == 35


def test_the_folds_lose_nothing():
    """Norm weights of dims only queries read, the head inside the values, a rank-1 first factor's length
    and a tied query head's fourth dim: folded into other tensors, the logits stay the same."""
    wide, tok = make_split(seed=1, **SLOPE)
    spread(wide, 1)
    narrow = narrowed(wide, **FOLDED)
    assert wide.num_parameters() - narrow.num_parameters() == 2 + 1 + 1
    ids = tok(["1234567890+9876543210", "99+1", "5+7"], padding=True, return_tensors="pt")
    torch.testing.assert_close(narrow(**ids).logits, wide(**ids).logits, rtol=1e-4, atol=1e-3)
    with torch.no_grad():
        wide.model.layers[0].self_attn.q_rotation.fill_(0.5)
    narrowest = narrowed(wide, **NARROW)  # and the query head dim 4 -> 3 (the next tests): 35 parameters
    assert narrowest.num_parameters() == 35
    torch.testing.assert_close(narrowest(**ids).logits, wide(**ids).logits, rtol=1e-4, atol=1e-3)


def test_the_slices_keep_the_rows_and_columns_the_narrower_layout_reads():
    wide, _ = make_split(seed=2)  # every path reads all five dims
    spread(wide, 2)
    narrow = narrowed(wide, **NARROW)
    assert narrow.num_parameters() == 35
    keep = path_dims(narrow.config)
    assert keep == [0, 1, 4]  # the token dims and the slope dim
    w, n = wide.state_dict(), narrow.state_dict()
    torch.testing.assert_close(n["model.head_proj.weight"], w["model.head_proj.weight"][:, keep])
    torch.testing.assert_close(n["model.layers.0.mlp.up_proj.weight"], w["model.layers.0.mlp.up_proj.weight"][:, keep])
    norm = w["model.layers.0.input_layernorm.weight"]
    torch.testing.assert_close(n["model.layers.0.input_layernorm.weight"], norm[keep])
    assert n["model.layers.0.self_attn.q_proj.weight"].shape == (3, 3)  # folded: the next tests
    torch.testing.assert_close(n["model.spiral.answer_start"], w["model.spiral.answer_start"])


@pytest.mark.parametrize("layout, message", [
    ({"split_paths": "all"}, "split_paths can narrow"),  # from tokens and slope back to all: a widening
    ({"head_dim": 5}, "head_dim can shrink"),
    ({"hidden_act": "relu"}, "these differ: hidden_act"),
])
def test_what_is_not_a_narrowing_is_refused_in_one_line(layout, message):
    wide, _ = make_split(seed=3, **SLOPE)
    other = MinimalConfig(**{**wide.config.to_dict(), **layout})
    with pytest.raises(NarrowingError, match=message) as err:
        narrow_state(wide.state_dict(), wide.config, other)
    assert "\n" not in str(err.value)


def test_a_warm_start_narrows_a_wider_checkpoint(tmp_path, capsys):
    wide, tok = make_split(seed=4, **SLOPE)
    spread(wide, 4)
    wide.save_pretrained(tmp_path / "wide")
    tok.save_pretrained(tmp_path / "wide")
    narrow = MinimalForCausalLM(MinimalConfig(**{**wide.config.to_dict(), **FOLDED}))
    assert warm_start(narrow, str(tmp_path / "wide"), FMT10.to_dict()) == []  # every tensor from the checkpoint
    assert "Narrowing" in capsys.readouterr().out
    ids = tok(["1234567890+9876543210"], return_tensors="pt")
    torch.testing.assert_close(narrow(**ids).logits, wide(**ids).logits, rtol=1e-4, atol=1e-3)
    widened = MinimalForCausalLM(MinimalConfig(**{**wide.config.to_dict(), "split_paths": "all"}))
    with pytest.raises(WarmStartError, match="cannot start this layout: split_paths can narrow"):
        warm_start(widened, str(tmp_path / "wide"), FMT10.to_dict())


def test_the_angle_option_needs_two_token_values_and_a_rank_one_output():
    with pytest.raises(ValueError, match="o_proj_angle needs split_values='tokens'"):
        MinimalConfig(**{**SPLIT, "o_proj_angle": True})


def test_the_narrow_preset_chains_the_54_parameter_design_and_its_narrowing():
    from test_minimal_split import preset_and_model

    from hf_arith.training.recipe import load_stages

    stages = load_stages("minimal-add10-split-narrow")
    assert [s.label for s in stages] == ["minimal-add10-split-wide-arc", "narrow"]
    assert stages[1].chained and stages[1].recipe.init_from == f"{stages[0].recipe.output_dir}/final"
    assert stages[0].recipe.model == load_stages("minimal-add10-split-wide-arc")[0].recipe.model
    _, model = preset_and_model("minimal-add10-split-narrow")
    assert model.num_parameters() == 35


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_a_tied_head_of_dim_4_folds_into_dim_3_with_the_same_scores(seed):
    """Tied queries and keys over three position dims give scores p^T B p' with B a 3 x 3 matrix whose
    symmetric part is positive definite (turn below a quarter): a head dim of 3 gives exactly the same."""
    from hf_arith.models.minimal_narrowing import fold_query_dims

    wide, tok = make_split(seed=seed)
    spread(wide, seed)
    with torch.no_grad():
        wide.model.layers[0].self_attn.q_rotation.fill_(0.3 + 0.3 * (seed - 5))
    narrow = narrowed(wide, head_dim=3)
    assert wide.num_parameters() - narrow.num_parameters() == 3
    ids = tok(["1234567890+9876543210", "99+1", "5+7"], padding=True, return_tensors="pt")
    for out in ("attentions", "logits"):
        a, b = narrow(**ids, output_attentions=True)[out], wide(**ids, output_attentions=True)[out]
        a, b = (a[0], b[0]) if out == "attentions" else (a, b)
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    # A turn past a quarter makes the symmetric part negative definite: no head dim of 3 gives it.
    weight = wide.model.layers[0].self_attn.q_proj.weight.detach()
    assert fold_query_dims(weight, torch.tensor(2.0), 1.0) is None
