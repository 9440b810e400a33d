"""hf_arith.publishing.leaderboard: the rank on AdderBoard's trained table and each trick's parameter saving."""

from pathlib import Path

import pytest

from hf_arith.publishing.leaderboard import TRAINED_TABLE, parameter_savings, trained_rank
from tests.test_minimal_model import SPLIT, make

# The 58-parameter design: an experiment, whose recipe lives with the benchmarks.
TINY_RECIPE = str(Path(__file__).resolve().parents[1] / "bench" / "recipes" / "minimal-add10-tiny.yaml")

TINY = dict(hidden_size=3, num_attention_heads=1, num_key_value_heads=1, head_dim=4, intermediate_size=2)


def test_rank_counts_smaller_entries_and_needs_99_percent():
    smallest = min(p for p, _ in TRAINED_TABLE)
    assert trained_rank(smallest - 1, 0.99) == 1
    assert trained_rank(smallest, 1.0) == 2  # a tie with an entry at 100 % goes after it
    assert trained_rank(244, 1.0) == 1 + sum(1 for p, _ in TRAINED_TABLE if p < 244)
    assert trained_rank(10, 0.9899) is None


@pytest.mark.parametrize("flags, expected", [
    # every token on the arc: 14 tokens x 3 dims - 3 arc parameters
    ({"digit_embedding": "circular_arc", "special_embedding": "arc"},
     {"every token on one circular arc": 14 * 3 - 3, "tied output head": 14 * 3}),
    ({"digit_embedding": "circular_arc"}, {"circular-arc digit embedding": 10 * 3 - 3, "tied output head": 14 * 3}),
    ({"tie_kv": True, "tie_qo": True}, {"tied K = V": 3 * 4, "tied O = Q^T": 4 * 3, "tied output head": 14 * 3}),
    ({"qk_norm": True, "share_qk_norm": True, "norm_sharing": "all"},
     {"one norm for queries and keys": 4, "shared block norms": 2 * 3, "tied output head": 14 * 3}),
])
def test_each_trick_saves_what_undoing_it_alone_costs(flags, expected):
    model, _ = make(**TINY, max_position_embeddings=40, qk_norm=flags.pop("qk_norm", False), **flags)
    savings = {trick.split(" (")[0]: saved for trick, saved in parameter_savings(model)}
    rope = savings.pop("RoPE")  # learned positions would cost one row per position of the context
    assert rope == 40 * 3
    assert savings == expected


def test_the_split_designs_tricks_save_what_undoing_them_costs():
    model, _ = make(**SPLIT)
    savings = {trick.split(" (")[0].split(",")[0]: saved for trick, saved in parameter_savings(model)}
    assert savings == {
        "every token on one circular arc": 14 * 2 - 3,  # the token part is 2 wide
        "shared block norms": 2 * 5,
        "the head projection is also the FFN's down projection": 2 * 5,
        "tied K = Q": 3 * 4 - 1,  # a key matrix instead of one angle
        "low-rank attention output": 5 * 5 - (5 + 5),
        "fixed": 4,  # a learned spiral: amplitude, phase, slope, offset
    }
    assert model.num_parameters() == 54


def test_the_narrow_path_designs_tricks_save_what_undoing_them_costs():
    model, _ = make(**{**SPLIT, "split_paths": "tokens", "answer_start_position": "spiral", "o_proj_rank": 0})
    savings = {trick.split(" (")[0].split(",")[0]: saved for trick, saved in parameter_savings(model)}
    assert savings["'=' at a fixed spiral point"] == 3
    # the head (2 x 5), the output (5 x 5 with o_proj_rank 0) and the FFN's up (2 x 5) read all five dims
    assert savings["head"] == (10 - 4) + (25 - 4) + (10 - 4)
    assert model.num_parameters() == 33
    circle, _ = make(**{**SPLIT, "split_paths": "tokens_and_slope", "query_positions": "circle"})
    savings = {trick.split(" (")[0].split(",")[0]: saved for trick, saved in parameter_savings(circle)}
    assert savings["queries and keys read the spiral's circle alone"] == 4  # the slope's row of a 3 -> 4 map
    assert savings["head"] == (10 - 6) + (5 + 5 - 3 - 3) + (10 - 6)  # 3 of 5 dims read; rank-1 output


def test_the_tiny_preset_builds_the_58_parameter_design_and_exports_it(tmp_path):
    from hf_arith.data.streaming import worst_case_length
    from hf_arith.publishing.adderboard import write_submission
    from hf_arith.training.recipe import check_recipe, load_recipe
    from hf_arith.training.run import build_model, build_tokenizer, recipe_spec

    recipe = load_recipe(TINY_RECIPE)
    fmt = check_recipe(recipe)
    context = worst_case_length(recipe_spec(recipe, fmt), fmt)
    tokenizer = build_tokenizer(fmt, context)
    model = build_model(recipe, tokenizer, context)
    assert model.num_parameters() == 58
    assert {n for n, _ in model.named_parameters()} == {
        "model.embed_tokens.arc_params", "model.layers.0.input_layernorm.weight",
        "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
        "model.layers.0.self_attn.q_norm.weight", "model.layers.0.post_attention_layernorm.weight",
        "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
        "model.layers.0.mlp.down_proj.weight", "model.norm.weight"}
    module_path = write_submission(model.eval(), tokenizer, tmp_path / "s.py", force=True)  # untrained: forced
    assert f"{58} unique parameters" in module_path.read_text().splitlines()[0]
