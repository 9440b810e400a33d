"""The abacus GPT-2 family: abacus positions, offsets, multi-token heads, caching, remote code."""

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from remote_code import run_remote_code
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import hf_arith
from hf_arith import AbacusGPT2Config, AbacusGPT2ForCausalLM, ArithTokenizer, NumberFormat
from hf_arith.data.formatting import FormatError
from hf_arith.models.abacus_positions import (
    AT_PLACE,
    abacus_position_ids,
    after_prompt,
    answer_lines,
    check_abacus_range,
    label_items,
    line_positions,
    line_window_allowed,
    line_window_codes,
    line_window_relations,
    offset_answer_segments,
    operand_line_rows,
    pair_roles,
    problem_ids,
    random_offsets,
    row_window_allowed,
    segment_ids,
    unpack_positions,
    unpack_roles,
    unpack_rows,
    window_allowed,
)
from hf_arith.runtime.decoding import greedy_decode
from hf_arith.runtime.saving import save_checkpoint

REVERSED = NumberFormat(task="add", reverse_operands=True, reverse_answer=True, end_token=True)
PROBLEMS = ["1342+879", "5+12345", "0+0", "99999999+1"]
HEX_RECIPE = Path(__file__).parents[1] / "bench" / "recipes" / "abacus-gpt2-add-hex.yaml"


def make(seed=0, fmt=REVERSED, **overrides):
    torch.manual_seed(seed)
    tok = ArithTokenizer(number_format=fmt, model_max_length=256)
    kwargs = dict(vocab_size=len(tok), num_digit_tokens=fmt.base, hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=4, abacus_max_digits=40, pad_token_id=tok.pad_token_id,
                  eos_token_id=tok.eos_token_id, tie_word_embeddings=False)
    kwargs.update(overrides)
    model = AbacusGPT2ForCausalLM(AbacusGPT2Config(**kwargs)).eval()
    # Spread the weights and untie the head so greedy outputs differ between rows and steps
    # (a random tied model mostly repeats its last token).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" not in name:  # norms keep their identity init, or their biases decide the output
                p.normal_(0, 0.5)
    return model, tok


def test_positions_count_digits_within_each_number():
    # The example: "+1342+879+" (reversed digits) gives 0123401230.
    plus, digits = 10, [1, 3, 4, 2, 8, 7, 9]
    ids = torch.tensor([[plus, 1, 3, 4, 2, plus, 8, 7, 9, plus]])
    assert abacus_position_ids(ids, 10).tolist() == [[0, 1, 2, 3, 4, 0, 1, 2, 3, 0]]
    assert digits  # every digit id is < 10 and every symbol >= 10
    # Through the tokenizer, with left padding: pads are not digits and do not shift the count.
    _, tok = make()
    enc = tok(["1342+879", "5+12345"], padding=True, return_tensors="pt")
    assert abacus_position_ids(enc.input_ids, 10).tolist() == [
        [1, 2, 3, 4, 0, 1, 2, 3, 0],
        [0, 1, 0, 1, 2, 3, 4, 5, 0],
    ]


def test_aligned_answers_carry_the_index_of_the_digit_they_predict():
    _, tok = make()
    eq, eos = tok.convert_tokens_to_ids("="), tok.eos_token_id
    # 1342 + 879 = 2221, reversed: "2431+978=1222<eos>"
    ids = torch.tensor([tok("1342+879").input_ids + [1, 2, 2, 2, eos]])
    assert abacus_position_ids(ids, 10).tolist() == [[1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2, 3, 4, 0]]
    # the `=` predicts answer digit 1 and gets index 1; answer digit i predicts digit i + 1
    assert abacus_position_ids(ids, 10, eq).tolist() == [[1, 2, 3, 4, 0, 1, 2, 3, 1, 2, 3, 4, 5, 0]]
    model, _ = make(abacus_align_answer=True, answer_start_token_id=eq)
    assert model.position_ids_from_input_ids(ids).tolist() == abacus_position_ids(ids, 10, eq).tolist()
    with pytest.raises(ValueError, match="answer_start_token_id"):
        AbacusGPT2Config(vocab_size=14, abacus_align_answer=True)


def test_base16_digits_get_positions_and_symbols_do_not():
    fmt = NumberFormat(task="add", base=16, reverse_operands=True, reverse_answer=True, end_token=True)
    model, tok = make(fmt=fmt)
    enc = tok(["255+4096"], return_tensors="pt")  # ff + 1000 in hex
    assert tok.convert_ids_to_tokens(enc.input_ids[0].tolist()) == ["F", "F", "+", "0", "0", "0", "1", "="]
    assert model.position_ids_from_input_ids(enc.input_ids).tolist() == [[1, 2, 0, 1, 2, 3, 4, 0]]


def table_inputs(model, ids, tables: tuple[str, ...], draws: int) -> dict[str, list[torch.Tensor]]:
    """The ids each named embedding table of the model gets for the first row of `ids`: once in eval mode,
    then in `draws` training-mode passes (each draws its own offsets)."""
    seen = {name: [] for name in tables}
    hooks = [getattr(model.transformer, name).register_forward_hook(
        lambda m, args, out, name=name: seen[name].append(args[0][0].clone())) for name in tables]
    model.eval()
    model(input_ids=ids)
    model.train()
    for _ in range(draws):
        model(input_ids=ids)
    for hook in hooks:
        hook.remove()
    return seen


def test_random_offsets_shift_digits_only_and_stay_in_the_table():
    torch.manual_seed(0)
    base = abacus_position_ids(torch.randint(0, 12, (256, 30)), 10)
    for per_sequence in (False, True):
        shifted = random_offsets(base, max_offset=25, max_digits=40, per_sequence=per_sequence)
        assert torch.equal(shifted == 0, base == 0)  # non-digits keep position 0
        k = (shifted - base).max(dim=1).values
        assert torch.equal((shifted - base)[base > 0], k[:, None].expand_as(base)[base > 0])  # one k per row
        assert int(shifted.max()) <= 40 and int(k.min()) >= 0 and int(k.max()) <= 25
        if per_sequence:  # rows draw their own k (checked in detail below)
            assert len(set(k.tolist())) > 1
        else:  # one k for the whole batch
            assert len(set(k.tolist())) == 1
    per_row = random_offsets(base, 25, 40, per_sequence=True)
    assert len(set((per_row - base).max(dim=1).values.tolist())) > 5  # per sequence really varies
    assert torch.equal(random_offsets(base, 0, 40, True), base)
    # shift_all_tokens moves every token by the row's k, non-digits included
    whole = random_offsets(base, 25, 40, per_sequence=True, shift_all_tokens=True)
    k = (whole - base)[:, :1]
    assert torch.equal(whole, base + k) and int(whole.max()) <= 40
    # unshifted_fraction keeps k = 0 for about that share of rows
    kept = random_offsets(base, 25, 40, per_sequence=True, unshifted_fraction=0.5)
    zero_share = float(((kept - base).max(dim=1).values == 0).float().mean())
    assert 0.35 < zero_share < 0.65


def test_training_mode_draws_offsets_and_eval_mode_does_not():
    model, tok = make()
    enc = tok(["1342+879"], return_tensors="pt")
    seen = []
    hook = model.transformer.abacus.register_forward_hook(lambda m, args, out: seen.append(args[0].clone()))
    model.eval()
    model(input_ids=enc.input_ids)
    model.train()
    for _ in range(20):
        model(input_ids=enc.input_ids)
    hook.remove()
    assert seen[0].tolist() == [[1, 2, 3, 4, 0, 1, 2, 3, 0]]
    assert len({tuple(s[0].tolist()) for s in seen[1:]}) > 3


def test_numbers_beyond_the_abacus_range_are_a_clear_error():
    model, tok = make(abacus_max_digits=12)
    with pytest.raises(FormatError, match="abacus range of 12 digits"):
        hf_arith.solve(model, tok, ["1" * 13 + "+1"])
    with pytest.raises(FormatError, match="abacus range of 12 digits"):
        hf_arith.solve(model, tok, ["999999999999+1"])  # 12-digit operands, but a 13-digit answer
    with pytest.raises(ValueError, match="longer than this model's abacus range"):
        check_abacus_range(torch.tensor([[0, 13]]), 12)
    with pytest.raises(ValueError, match="abacus range"):
        model(input_ids=tok(["1" * 13 + "+1"], return_tensors="pt").input_ids)
    with pytest.raises(ValueError, match="abacus range of 12 digits"):  # generate() checks the prompt too
        model.generate(**tok(["1" * 13 + "+1"], return_tensors="pt"), max_new_tokens=3, do_sample=False)
    enc = tok(["12+5", "1+2"], padding=True, return_tensors="pt")  # the prompt ends after the latest `=`
    assert model.prompt_end(enc.input_ids) is None  # no answer_start_token_id: every number is checked
    model, tok = make(abacus_max_digits=12, answer_start_token_id=11)
    assert model.prompt_end(enc.input_ids) == enc.input_ids.shape[1]
    assert model.prompt_end(enc.input_ids[:, :-1]) is None
    assert hf_arith.solve(model, tok, "12+5") is None or isinstance(hf_arith.solve(model, tok, "12+5"), str)


@pytest.mark.parametrize("attn, align, segments, lines, window, rows", [
    ("eager", False, 0, False, 0, False), ("sdpa", False, 0, False, 0, False), ("sdpa", True, 0, False, 0, False),
    ("sdpa", True, 4, False, 0, False), ("sdpa", False, 5, True, 0, False),
    ("eager", False, 4, False, 1, False), ("sdpa", True, 0, False, 2, False), ("sdpa", True, 3, False, 0, True)])
def test_decoder_equals_generate_and_cache_equals_no_cache(attn, align, segments, lines, window, rows):
    # seeds whose random models write varied tokens (a windowed one that writes a separator sees only separators)
    model, tok = make(seed=0 if window else 1, abacus_align_answer=align, answer_start_token_id=11,
                      abacus_num_segments=segments, abacus_line_positions=lines, abacus_attention_window=window,
                      abacus_operand_rows=rows)
    model.set_attn_implementation(attn)
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    assert tok.padding_side == "left" and not enc.attention_mask.all()
    n = 12
    generated = model.generate(**enc, max_new_tokens=n, do_sample=False, eos_token_id=None,
                               pad_token_id=tok.pad_token_id)[:, enc.input_ids.shape[1]:]
    uncached_generate = model.generate(**enc, max_new_tokens=n, do_sample=False, eos_token_id=None, use_cache=False,
                                       pad_token_id=tok.pad_token_id)[:, enc.input_ids.shape[1]:]
    cached = greedy_decode(model, enc.input_ids, enc.attention_mask, n, pad_token_id=tok.pad_token_id)
    uncached = greedy_decode(model, enc.input_ids, enc.attention_mask, n, pad_token_id=tok.pad_token_id,
                             use_cache=False)
    assert len(set(cached.flatten().tolist())) > 2  # a non-trivial output
    assert torch.equal(generated, cached) and torch.equal(cached, uncached) and torch.equal(generated, uncached_generate)


def test_segments_count_separators_and_skip_padding():
    tok = ArithTokenizer(number_format=REVERSED)
    ids = tok(["12+345", "1+2"], padding=True, return_tensors="pt").input_ids
    # "21+543=" and left-padded "1+2=": a is 0, "+" and b are 1, "=" is 2; padding counts as nothing.
    assert segment_ids(ids, 10, tok.pad_token_id, 4).tolist() == [[0, 0, 1, 1, 1, 1, 2], [0, 0, 0, 0, 1, 1, 2]]
    assert segment_ids(ids, 10, tok.pad_token_id, 2).max() == 1  # capped
    model, _ = make(abacus_num_segments=4, abacus_align_answer=True, answer_start_token_id=11)
    index, segment = unpack_positions(model.position_ids_from_input_ids(ids), 40)
    assert torch.equal(index, abacus_position_ids(ids, 10, 11)) and torch.equal(segment, segment_ids(ids, 10, 12, 4))
    with pytest.raises(ValueError, match="segment"):
        model(input_ids=ids[:, :3], position_ids=torch.full((2, 3), 41 * 4))


def test_sort_lines_give_each_label_its_line_and_its_slot():
    """radix_passes answers "a:31,b:7,c:120" with cab=bca=bac: line p sorts by digit place p + 1
    (abacus index p + 1), so its labels carry index p + 1 and their place in the line as the slot."""
    fmt = NumberFormat(task="sort", scratchpad="radix_passes")
    tok = ArithTokenizer(number_format=fmt)
    prompt = tok(["a:31,b:7,c:120"], return_tensors="pt").input_ids
    answer = torch.tensor([tok.convert_tokens_to_ids(list("cab=bca=bac")) + [tok.eos_token_id]])
    ids = torch.cat([prompt, answer], dim=1)
    eq = tok.convert_tokens_to_ids("=")
    index, slot = line_positions(ids, eq, 10, abacus_position_ids(ids, 10))
    n = prompt.shape[1] - 1  # the prompt before its `=`, which opens line 1
    assert torch.equal(index[0, :n], abacus_position_ids(prompt, 10)[0, :n]) and not slot[0, :n].any()
    assert index[0, n:].tolist() == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 3]
    assert slot[0, n:].tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 4]
    model, _ = make(fmt=fmt, abacus_line_positions=True, answer_start_token_id=eq, abacus_num_segments=4)
    packed_index, packed_slot = unpack_positions(model.position_ids_from_input_ids(ids), 40)
    assert torch.equal(packed_index, index) and packed_slot[0, -1] == 3  # a slot past the table takes its last
    with pytest.raises(ValueError, match="abacus_line_positions needs"):
        AbacusGPT2Config(vocab_size=len(tok), abacus_line_positions=True, answer_start_token_id=eq)


def test_prompt_segments_tell_each_sort_item_apart_before_the_lines():
    """With abacus_prompt_segments, the prompt's tokens take their separator count as their segment
    (the digits of "a:13" are 2, of "b:7" 5), where plain line positions give every one slot 0;
    the lines keep their slots."""
    fmt = NumberFormat(task="sort", scratchpad="radix_passes")
    tok = ArithTokenizer(number_format=fmt)
    ids = torch.tensor([tok.convert_tokens_to_ids(list("a:13,b:7,c:021=cab=bca=bac"))])
    eq = tok.convert_tokens_to_ids("=")
    segments = {}
    for prompt_segments in (False, True):
        model, _ = make(fmt=fmt, abacus_line_positions=True, answer_start_token_id=eq, abacus_num_segments=16,
                        abacus_prompt_segments=prompt_segments)
        segments[prompt_segments] = unpack_positions(model.position_ids_from_input_ids(ids), 40)[1][0].tolist()
    assert segments[False][:14] == [0] * 14
    assert segments[True][:14] == [1, 2, 2, 2, 3, 4, 5, 5, 6, 7, 8, 8, 8, 8]
    assert segments[True][14:] == segments[False][14:] == [0, 1, 2, 3] * 3
    with pytest.raises(ValueError, match="abacus_prompt_segments applies with abacus_line_positions"):
        AbacusGPT2Config(vocab_size=len(tok), abacus_prompt_segments=True)


def test_offset_items_move_prompt_segments_and_line_slots_by_draws_of_their_own():
    """With abacus_offset_items, training moves every prompt segment of a row by one k and every slot of
    its lines by another (the `=`s, slot 0, and padding stay), within the table; evaluation moves none."""
    fmt = NumberFormat(task="sort", scratchpad="radix_passes")
    tok = ArithTokenizer(number_format=fmt)
    eq = tok.convert_tokens_to_ids("=")
    ids = torch.tensor([tok.convert_tokens_to_ids(list("a:13,b:7,c:021=cab=bca=bac")) + [tok.pad_token_id] * 3])
    model, _ = make(fmt=fmt, abacus_line_positions=True, answer_start_token_id=eq, abacus_num_segments=16,
                    abacus_prompt_segments=True, abacus_offset_items=True)
    plain = unpack_positions(model.position_ids_from_input_ids(ids), 40)[1][0]
    seen = table_inputs(model, ids, ("segment",), 40)["segment"]
    assert torch.equal(seen[0], plain)
    prompt, lines = torch.arange(len(plain)) < 14, (torch.arange(len(plain)) >= 14) & (torch.arange(len(plain)) < 26)
    moves = set()
    for segment in seen[1:]:
        shift = segment - plain
        k_prompt, k_slot = int(shift[0]), int(shift[15])
        assert torch.equal(shift[prompt], torch.full((14,), k_prompt))  # one k for the whole prompt
        assert torch.equal(shift[lines], torch.where(plain[lines] > 0, k_slot, 0))  # the `=`s stay at 0
        assert (shift[26:] == 0).all() and int(segment.max()) <= 15  # padding stays; nothing leaves the table
        moves.add((k_prompt, k_slot))
    assert len({k for k, _ in moves}) > 2 and len({k for _, k in moves}) > 2 and any(a != b for a, b in moves)
    with pytest.raises(ValueError, match="abacus_offset_items moves prompt segments"):
        AbacusGPT2Config(vocab_size=len(tok), abacus_line_positions=True, answer_start_token_id=eq,
                         abacus_num_segments=16, abacus_offset_items=True)


def test_even_offsets_keep_every_index_and_slot_parity_in_training():
    """With abacus_even_offsets, every training draw (the digits' and lines' indices, the prompt segments,
    the line slots) is even, and over many draws more than one even k is drawn; below max offset 2 the
    config is refused, since every even offset would be 0."""
    fmt = NumberFormat(task="sort", scratchpad="transposition_rounds")
    tok = ArithTokenizer(number_format=fmt)
    eq = tok.convert_tokens_to_ids("=")
    ids = torch.tensor([tok.convert_tokens_to_ids(list("a:13,b:7,c:021=abc=acb=cab=cab=cba=bca=bca=bac=bac"))])
    model, _ = make(fmt=fmt, abacus_line_positions=True, answer_start_token_id=eq, abacus_num_segments=16,
                    abacus_prompt_segments=True, abacus_offset_items=True, abacus_even_offsets=True,
                    abacus_max_offset=9, abacus_offset_per_sequence=True)
    for what, drawn in table_inputs(model, ids, ("abacus", "segment"), 40).items():
        plain, shifts = drawn[0], [d - drawn[0] for d in drawn[1:]]
        assert all((shift % 2 == 0).all() for shift in shifts), what
        assert len({int(shift.max()) for shift in shifts}) > 1, what  # the draws vary
        assert all(int(d.max()) <= (40 if what == "abacus" else 15) for d in drawn), what
        assert plain.ne(0).any()
    with pytest.raises(ValueError, match="abacus_even_offsets needs abacus_max_offset >= 2"):
        AbacusGPT2Config(vocab_size=len(tok), abacus_even_offsets=True, abacus_max_offset=1)


def test_packed_problems_restart_segments_and_draw_their_own_offsets():
    """Two problems in one row, each closed by <eos> (id 13): the second numbers its operands from 0
    again, and with `problem` each problem of a row draws its own training offset."""
    a = [2, 1, 10, 4, 3, 11, 6, 4, 13]  # 12+34=46<eos>, reversed
    b = [5, 10, 5, 11, 0, 1, 13]  # 5+5=10<eos>
    ids = torch.tensor([a + b, b + a])
    problem = problem_ids(ids, 13)
    assert problem.tolist() == [[0] * 9 + [1] * 7, [0] * 7 + [1] * 9]  # an <eos> belongs to the problem it closes
    restarted = segment_ids(ids, 10, 12, 4, end_token_id=13)
    assert restarted.tolist() == [[0, 0, 1, 1, 1, 2, 2, 2, 3, 0, 1, 1, 2, 2, 2, 3],
                                  [0, 1, 1, 2, 2, 2, 3, 0, 0, 1, 1, 1, 2, 2, 2, 3]]
    assert segment_ids(ids, 10, 12, 4)[0, 9:].tolist() == [3] * 7  # without restarting: capped from the <eos> on
    torch.manual_seed(0)
    base = abacus_position_ids(ids.repeat(64, 1), 10, 11)
    shifted = random_offsets(base, 25, 40, per_sequence=True, shift_all_tokens=True, problem=problem.repeat(64, 1))
    k = shifted - base
    first, second = k[0::2, 0], k[0::2, -1]
    assert torch.equal(k[0::2, :9], first[:, None].expand(-1, 9)) and torch.equal(k[0::2, 9:], second[:, None].expand(-1, 7))
    assert (first != second).float().mean() > 0.8 and int(k.max()) <= 25 and int(shifted.max()) <= 40
    # One problem per row: the same draws as without `problem`
    torch.manual_seed(1)
    single = random_offsets(base[:, :9], 25, 40, True, 0.3, True, problem=torch.zeros_like(base[:, :9]))
    torch.manual_seed(1)
    assert torch.equal(single, random_offsets(base[:, :9], 25, 40, True, 0.3, True))


def test_offset_per_problem_needs_per_sequence_offsets_and_restarts_segments_after_eos():
    with pytest.raises(ValueError, match="abacus_offset_per_problem needs abacus_offset_per_sequence"):
        AbacusGPT2Config(abacus_offset_per_problem=True, eos_token_id=13)
    model, tok = make(abacus_num_segments=4, abacus_offset_per_sequence=True, abacus_offset_per_problem=True)
    ids = tok(["12+34"], return_tensors="pt").input_ids
    packed = torch.cat([ids, torch.tensor([[6, 4, tok.eos_token_id]]), ids], dim=1)
    _, segment = unpack_positions(model.position_ids_from_input_ids(packed), 40)
    assert segment[0].tolist() == [0, 0, 1, 1, 1, 2, 2, 2, 3, 0, 0, 1, 1, 1, 2]
    model.train()  # training draws one offset per problem: the two copies of 12+34 get different indices
    seen = []
    hook = model.transformer.abacus.register_forward_hook(lambda m, args, out: seen.append(args[0].clone()))
    for _ in range(10):
        model(input_ids=packed)
    hook.remove()
    assert any(not torch.equal(s[0, :6], s[0, 9:]) for s in seen)


def test_offset_segments_move_the_answers_segments_with_its_digits_in_training_only():
    """Long multiplication with shifted sums: line j of the answer works on digit j of b, so with
    abacus_offset_segments the answer's segments shift by the row's digit offset and b's do not."""
    ids = torch.tensor([[2, 1, 10, 4, 3, 11, 8, 0, 4, 11, 0, 3, 13]] * 64)  # 12*34=804=030<eos>-like lines
    segment = segment_ids(ids, 10, 12, 20)
    base = abacus_position_ids(ids, 10, 11)
    torch.manual_seed(0)
    shifted = random_offsets(base, 6, 40, per_sequence=True, shift_all_tokens=True)
    moved = offset_answer_segments(ids, segment, shifted - base, 11, 20)
    k = (shifted - base)[:, :1]
    assert len(set(k[:, 0].tolist())) > 3
    assert torch.equal(moved[:, :5], segment[:, :5])  # the prompt's a and b keep theirs
    assert torch.equal(moved[:, 5:], segment[:, 5:] + k)  # from the `=` on: + k
    assert int(offset_answer_segments(ids, segment, shifted - base, 11, 4).max()) == 3  # capped by the table
    half = offset_answer_segments(ids, segment, shifted - base, 11, 20, share=0.5)
    moved_rows = (half != segment).any(dim=1) & (k[:, 0] > 0)
    assert 0.2 < float(moved_rows.float().mean()) < 0.8  # about half the rows that drew k > 0
    assert torch.equal(half[moved_rows], moved[moved_rows]) and torch.equal(half[~moved_rows & (k[:, 0] > 0)],
                                                                             segment[~moved_rows & (k[:, 0] > 0)])
    fmt = NumberFormat(task="mul", reverse_operands=True, reverse_answer=True, end_token=True, scratchpad="shifted_sums")
    model, tok = make(fmt=fmt, abacus_num_segments=20, abacus_max_offset=6, abacus_offset_per_sequence=True,
                      abacus_offset_all_tokens=True, abacus_align_answer=True, abacus_offset_segments=1.0,
                      answer_start_token_id=ArithTokenizer(number_format=fmt).convert_tokens_to_ids("="))
    enc = torch.tensor([tok.convert_tokens_to_ids(list("21*43=804=030")) + [tok.eos_token_id]])
    seen = []
    hook = model.transformer.segment.register_forward_hook(lambda m, args, out: seen.append(args[0].clone()))
    model.eval()
    model(input_ids=enc)
    model.train()
    for _ in range(20):
        model(input_ids=enc)
    hook.remove()
    plain = seen[0][0]
    assert plain.tolist() == segment_ids(enc, 10, tok.pad_token_id, 20)[0].tolist()  # eval: no shift
    shifts = {int((s[0] - plain)[-1]) for s in seen[1:]}
    assert len(shifts) > 2 and all(torch.equal(s[0][:5], plain[:5]) for s in seen[1:])
    with pytest.raises(ValueError, match="abacus_offset_segments needs"):
        AbacusGPT2Config(vocab_size=14, abacus_offset_segments=1.0, abacus_num_segments=4)
    with pytest.raises(ValueError, match="abacus_offset_segments must lie in"):
        AbacusGPT2Config(vocab_size=14, abacus_offset_segments=1.5, abacus_num_segments=4, answer_start_token_id=11)


def test_operand_rows_give_digit_j_of_b_and_line_j_one_row_with_an_offset_of_their_own():
    """Long multiplication with shifted sums: line j works on digit j of b, so with abacus_operand_rows
    both carry row j; training moves the rows by a draw independent of the digit indices'."""
    fmt = NumberFormat(task="mul", reverse_operands=True, reverse_answer=True, end_token=True, scratchpad="shifted_sums")
    eq = ArithTokenizer(number_format=fmt).convert_tokens_to_ids("=")
    model, tok = make(fmt=fmt, abacus_num_segments=3, abacus_max_offset=6, abacus_offset_per_sequence=True,
                      abacus_offset_all_tokens=True, abacus_align_answer=True, abacus_operand_rows=True,
                      answer_start_token_id=eq)
    # 123 * 45 written reversed: 321*54=5160=3550<eos> (lines of len(a) + 1 digits)
    text = tok.convert_tokens_to_ids(list("321*54=5160=3550")) + [tok.eos_token_id]
    enc = torch.tensor([[tok.pad_token_id] * 2 + text])  # left padding changes no row
    rows = operand_line_rows(enc, eq, 10, tok.pad_token_id)[0].tolist()
    assert rows == [0, 0, 0, 0, 0, 0, 1, 2] + [1] * 5 + [2] * 5 + [2]
    index, packed = unpack_positions(model.position_ids_from_input_ids(enc), 40)
    row, segment = unpack_rows(packed, 3)
    assert segment.tolist() == segment_ids(enc, 10, tok.pad_token_id, 3).tolist()  # segments as before
    assert row[0].tolist() == rows
    seen = table_inputs(model, enc, ("row", "abacus"), 30)
    seen_rows, seen_index = seen["row"], seen["abacus"]
    plain = torch.tensor(rows)
    assert torch.equal(seen_rows[0], plain)  # eval: no shift
    row_k = [int((r - plain)[6]) for r in seen_rows[1:]]
    index_k = [int((i - index[0])[2]) for i in seen_index[1:]]
    for r, k in zip(seen_rows[1:], row_k):  # every placed row moves by one k; digit j of b stays line j's row
        assert torch.equal(r, torch.where(plain > 0, plain + k, plain))
    assert len(set(row_k)) > 2 and row_k != index_k  # a draw of its own
    with pytest.raises(ValueError, match="abacus_operand_rows needs"):
        AbacusGPT2Config(vocab_size=14, abacus_operand_rows=True, answer_start_token_id=11)
    with pytest.raises(ValueError, match="abacus_operand_rows needs"):
        AbacusGPT2Config(vocab_size=14, abacus_operand_rows=True, answer_start_token_id=11, abacus_num_segments=3,
                         abacus_offset_segments=1.0)


def test_left_padding_does_not_change_a_rows_output():
    model, tok = make(seed=2)
    alone = tok(["5+12345"], return_tensors="pt")
    batch = tok(["5+12345", "1234567890123+1"], padding=True, return_tensors="pt")
    a = greedy_decode(model, alone.input_ids, alone.attention_mask, 8, pad_token_id=tok.pad_token_id)
    b = greedy_decode(model, batch.input_ids, batch.attention_mask, 8, pad_token_id=tok.pad_token_id)
    assert torch.equal(a[0], b[0])


def test_eager_and_sdpa_agree():
    model, tok = make(seed=3)
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    model.set_attn_implementation("eager")
    eager = model(**enc).logits
    model.set_attn_implementation("sdpa")
    sdpa = model(**enc).logits
    assert torch.allclose(eager[enc.attention_mask.bool()], sdpa[enc.attention_mask.bool()], atol=1e-4)


def test_absolute_positions_are_optional_and_counted():
    plain, _ = make(absolute_position_embedding=False)
    absolute, tok = make(absolute_position_embedding=True, max_position_embeddings=128)
    assert absolute.num_parameters() - plain.num_parameters() == 128 * 32
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    cached = greedy_decode(absolute, enc.input_ids, enc.attention_mask, 6, pad_token_id=tok.pad_token_id)
    uncached = greedy_decode(absolute, enc.input_ids, enc.attention_mask, 6, pad_token_id=tok.pad_token_id,
                             use_cache=False)
    assert torch.equal(cached, uncached)


# -- multi-token prediction -----------------------------------------------------------------
def test_future_heads_train_on_labels_shifted_by_their_distance():
    model, tok = make(num_future_tokens=3)
    enc = tok(["1342+879", "5+12345"], padding=True, padding_side="right", return_tensors="pt")
    labels = enc.input_ids.masked_fill(enc.attention_mask == 0, -100)
    out = model(**enc, labels=labels)
    assert out.future_logits.shape == (*enc.input_ids.shape, 2, len(tok))
    expected = 0
    for j, logits in enumerate([out.logits, out.future_logits[:, :, 0], out.future_logits[:, :, 1]]):
        # head j at position t predicts token t + 1 + j
        target = labels[:, 1 + j:]
        expected += F.cross_entropy(logits[:, : target.shape[1]].reshape(-1, len(tok)), target.reshape(-1),
                                    ignore_index=-100)
    assert torch.allclose(out.loss, expected / 3, atol=1e-5)
    # without labels only the next-token head runs, as generate() expects
    assert model(**enc).future_logits is None


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("window", [0, 2])
def test_raw_multi_token_decoding_is_cache_consistent_and_uses_fewer_passes(k, window):
    # A windowed model's cached passes need every key's index (model.position_inputs), k tokens at a time too.
    model, tok = make(seed=6, num_future_tokens=3, abacus_attention_window=window, abacus_align_answer=bool(window),
                      answer_start_token_id=11)
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    n = 11
    cached, passes = greedy_decode(model, enc.input_ids, enc.attention_mask, n, pad_token_id=tok.pad_token_id,
                                   tokens_per_step=k, return_passes=True, confirm=False)
    uncached = greedy_decode(model, enc.input_ids, enc.attention_mask, n, pad_token_id=tok.pad_token_id,
                             tokens_per_step=k, use_cache=False, confirm=False)
    assert torch.equal(cached, uncached) and cached.shape == (len(PROBLEMS), n)
    assert len(set(cached.flatten().tolist())) > 2  # a non-trivial output
    assert passes == -(-n // k)
    # The first pass's tokens are the argmax of the heads on the prompt.
    out = model(**enc, num_future_tokens=k)
    first = [out.logits[:, -1].argmax(-1)] + [out.future_logits[:, -1, j].argmax(-1) for j in range(k - 1)]
    assert torch.equal(cached[:, :k], torch.stack(first, dim=1))


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("heads", [1, 3])
@pytest.mark.parametrize("problems", [PROBLEMS, PROBLEMS[:1]], ids=["padded", "unpadded"])
@pytest.mark.parametrize("keep", [1, 2])
def test_prompt_pass_with_logits_to_keep_computes_the_same_logits_and_cache(attn, heads, problems, keep):
    """The topmost blocks skip the outputs of positions whose logits are not kept; nothing else changes."""
    from transformers import DynamicCache

    model, tok = make(seed=8, num_future_tokens=heads)
    model.set_attn_implementation(attn)
    enc = tok(problems, padding=True, return_tensors="pt")
    full_cache, kept_cache = DynamicCache(), DynamicCache()
    with torch.no_grad():
        full = model(**enc, past_key_values=full_cache, use_cache=True, num_future_tokens=heads)
        kept = model(**enc, past_key_values=kept_cache, use_cache=True, num_future_tokens=heads, logits_to_keep=keep)
    assert kept.logits.shape[1] == keep
    assert torch.allclose(kept.logits, full.logits[:, -keep:], atol=1e-5)
    if heads > 1:
        assert torch.allclose(kept.future_logits, full.future_logits[:, -keep:], atol=1e-5)
    assert len(kept_cache.layers) == len(full_cache.layers) == model.config.num_hidden_layers + heads - 1
    for a, b in zip(full_cache.layers, kept_cache.layers, strict=True):
        assert torch.allclose(a.keys, b.keys, atol=1e-6) and torch.allclose(a.values, b.values, atol=1e-6)
    if keep == 1:  # the topmost block really computed one position
        with torch.no_grad():
            hidden = model.transformer(**enc, num_future_tokens=heads, keep_last=1).last_hidden_state
        assert hidden.shape[1] == 1


def test_one_token_per_step_is_byte_identical_to_generate_on_a_multi_head_model():
    model, tok = make(seed=7, num_future_tokens=2)
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    generated = model.generate(**enc, max_new_tokens=10, do_sample=False, eos_token_id=None,
                               pad_token_id=tok.pad_token_id)[:, enc.input_ids.shape[1]:]
    assert torch.equal(generated, greedy_decode(model, enc.input_ids, enc.attention_mask, 10,
                                                pad_token_id=tok.pad_token_id, tokens_per_step=1))


def test_more_tokens_per_step_than_heads_is_a_clear_error():
    model, tok = make(num_future_tokens=2)
    with pytest.raises(ValueError, match="at most 2 token"):
        hf_arith.solve(model, tok, ["1+1"], tokens_per_step=3)
    with pytest.raises(ValueError, match="has 2 output head"):
        model(input_ids=tok(["1+1"], return_tensors="pt").input_ids, num_future_tokens=4)


@pytest.mark.parametrize("bad, field", [
    ({"hidden_size": 30, "num_attention_heads": 4}, "hidden_size"),
    ({"num_future_tokens": 0}, "num_future_tokens"),
    ({"abacus_max_offset": -1}, "abacus_max_offset"),
    ({"abacus_max_digits": "many"}, "abacus_max_digits"),
    ({"num_digit_tokens": 40}, "num_digit_tokens"),
    ({"abacus_attention_window": -1}, "abacus_attention_window"),
    ({"abacus_attention_window": 1.5}, "abacus_attention_window"),
    ({"abacus_period": 8}, "abacus_period"),  # a period needs a window
    ({"abacus_period": 5, "abacus_attention_window": 2}, "abacus_period"),  # 2w + 1 indices must keep distinct rows
    ({"abacus_period": 50, "abacus_attention_window": 2, "abacus_max_digits": 40}, "abacus_period"),
    ({"abacus_period": -1}, "abacus_period"),
    ({"abacus_row_window": True, "abacus_align_answer": True, "answer_start_token_id": 11, "abacus_num_segments": 3},
     "abacus_row_window"),  # rows needed
    ({"abacus_row_window": True, "abacus_operand_rows": True, "answer_start_token_id": 11, "abacus_num_segments": 3},
     "abacus_row_window"),  # an aligned answer needed
    ({"abacus_row_window": True, "abacus_operand_rows": True, "abacus_align_answer": True, "answer_start_token_id": 11,
      "abacus_num_segments": 2}, "abacus_row_window"),  # a, b and the answer need three segments
    ({"abacus_row_window": True, "abacus_operand_rows": True, "abacus_align_answer": True, "answer_start_token_id": 11,
      "abacus_num_segments": 3, "abacus_attention_window": 2}, "abacus_row_window"),  # it is its own window
    ({"abacus_line_window": True}, "abacus_line_window"),  # lines with prompt items needed
    ({"abacus_line_window": True, "abacus_line_positions": True, "abacus_prompt_segments": True, "abacus_num_segments": 8,
      "answer_start_token_id": 11, "abacus_attention_window": 2}, "abacus_line_window"),  # it is its own window
    ({"abacus_marked_labels": 8}, "abacus_marked_labels"),  # only the line window reads them
    ({"abacus_window_layers": 1}, "abacus_window_layers"),  # no window to limit
    ({"abacus_window_layers": 5, "abacus_attention_window": 2}, "abacus_window_layers"),  # more than the blocks
    ({"abacus_window_layers": -1, "abacus_attention_window": 2}, "abacus_window_layers"),
])
def test_malformed_config_names_the_field(bad, field):
    with pytest.raises(ValueError, match=field):
        AbacusGPT2Config(vocab_size=14, **bad)


# -- the abacus attention window ----------------------------------------------------------------
def test_window_lets_placed_tokens_see_near_indices_and_separators_see_separators():
    index = torch.tensor([[1, 2, 3, 0, 1, 2, 3, 0, 5]])
    allowed = window_allowed(index, index, 1)[0]
    # digit 2 of the first number: indices 1-3 of both numbers, and both separators; not index 5
    assert allowed[1].tolist() == [True, True, True, True, True, True, True, True, False]
    # index 1 does not see index 3; index 5 sees no digit but the separators
    assert allowed[0].tolist() == [True, True, False, True, True, True, False, True, False]
    assert allowed[8].tolist() == [False, False, False, True, False, False, False, True, True]
    # a separator sees separators only
    assert allowed[3].tolist() == [False, False, False, True, False, False, False, True, False]


ROW_WINDOW = dict(abacus_row_window=True, abacus_operand_rows=True, abacus_num_segments=3, abacus_align_answer=True,
                  answer_start_token_id=11)


def test_row_window_sees_what_a_shifted_sum_digit_needs_and_nothing_else():
    # 4321 x 567 in shifted sums, digits reversed: "1234+765=74203=05982=00542" (the tokenizer's
    # addition vocabulary; the rows only need a second number and lines joined by `=`).
    model, tok = make(**ROW_WINDOW)
    eq = tok.convert_tokens_to_ids("=")
    lines = [[7, 4, 2, 0, 3], [0, 5, 9, 8, 2], [0, 0, 5, 4, 2]]
    ids = torch.tensor([tok("4321+567").input_ids + lines[0] + [eq] + lines[1] + [eq] + lines[2]])
    text = [tok.convert_ids_to_tokens(i) for i in ids[0].tolist()]
    assert "".join(text) == "1234+765=74203=05982=00542"
    placed = model.transformer.placement(model.position_ids_from_input_ids(ids))
    allowed = row_window_allowed(placed, placed)[0]

    def seen(query):
        return "".join(t if allowed[query, k] else "." for k, t in enumerate(text[:query + 1]))

    # b's digits carry no index, only a row; a prompt token sees itself and the `+`
    assert placed[0][0, 5:8].tolist() == [0, 0, 0] and placed[1][0, 5:8].tolist() == [1, 2, 3]
    assert seen(6) == "....+.6" and seen(3) == "...4"
    # line 2's `=` (index 1, row 2): a's digit 1, the `+`, b's digits 2 and 3 (not 1), line 1 at
    # indices 2-3, itself
    assert seen(14) == "1...+.65.74...="
    # line 3's fourth digit (index 5): a's digits 4-5 (only 4 exists), b's digit 3 only (no digit 4),
    # line 2 at indices 6-7 (only 6 exists), its own line at 4-5; not line 1
    assert seen(24) == "...4+..5...........2...54"
    # The model runs under it: rewriting line 1 cannot move line 3's logits through one layer, but
    # moves line 2's. Deeper models pass it on through line 2, unless only the first block reads
    # through the window (abacus_window_layers: the blocks above see only their own token).
    far = ids.clone()
    far[0, 9:14] = torch.tensor([1, 1, 1, 1, 1])
    one_layer, _ = make(num_hidden_layers=1, **ROW_WINDOW)
    window_below, _ = make(num_hidden_layers=3, abacus_window_layers=1, **ROW_WINDOW)
    deep, _ = make(num_hidden_layers=3, **ROW_WINDOW)
    with torch.no_grad():
        for model in (one_layer, window_below):
            assert torch.allclose(model(ids).logits[0, 20:], model(far).logits[0, 20:], atol=1e-5)
            assert not torch.allclose(model(ids).logits[0, 14:20], model(far).logits[0, 14:20], atol=1e-3)
        assert not torch.allclose(deep(ids).logits[0, 20:], deep(far).logits[0, 20:], atol=1e-3)


def line_window_model(num_hidden_layers=2, **overrides):
    """A model under the line window, its tokenizer and 'a:3,b:1,c:2' written as transposition rounds."""
    fmt = NumberFormat(task="sort", scratchpad="transposition_rounds", max_items=8)
    tok = ArithTokenizer(number_format=fmt)
    model, _ = make(fmt=fmt, num_hidden_layers=num_hidden_layers, abacus_line_positions=True,
                    answer_start_token_id=tok.convert_tokens_to_ids("="), abacus_num_segments=16,
                    abacus_prompt_segments=True, abacus_line_window=True, **overrides)
    text = list("a:3,b:1,c:2=bac=bca=bca") + ["<eos>"]
    return model, tok, text, torch.tensor([tok.convert_tokens_to_ids(text)])


def test_line_window_sees_the_neighbouring_slots_of_the_line_before():
    model, tok, text, ids = line_window_model()
    index, item, segment = model.transformer.placement(model.position_ids_from_input_ids(ids))
    assert segment[0, :11].tolist() == [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3]  # a prompt token's item, not its separator
    assert item[0, 11:].tolist() == [0, 2, 1, 3, 0, 2, 3, 1, 0, 2, 3, 1, 0]  # the item each answer label names
    is_answer = after_prompt(index, segment)
    allowed = line_window_allowed((index, item, segment, is_answer), (index, item, segment, is_answer))[0]

    def seen(query):
        return "".join(t if allowed[query, k] else "." for k, t in enumerate(text[:query + 1]))

    assert seen(6) == "....b:1"  # a prompt token: its own item
    assert seen(11) == "a:3,b:1,...="  # line 1's `=` (slot 0): items 1 and 2 (the prompt is the line before)
    assert seen(14) == "....b:1,c:2...c"  # line 1 slot 3: items 2-4 (4 is absent), its own item c and itself
    assert seen(16) == "....b:1,...=bac.b"  # line 2 slot 1: line 1's slots 0-3 and item b, which it names
    assert seen(22) == "a:3," + "." * 13 + "ca...a"  # line 3 slot 3: line 2's slots 2-5 and item a, not line 1
    # The model runs under it: rewriting line 1 cannot move line 3's logits through one layer, but moves line 2's.
    far = ids.clone()
    far[0, 12:15] = torch.tensor(tok.convert_tokens_to_ids(list("cba")))
    one_layer = line_window_model(num_hidden_layers=1)[0]
    with torch.no_grad():
        near_logits, far_logits = one_layer(ids).logits[0], one_layer(far).logits[0]
    assert torch.allclose(near_logits[19:], far_logits[19:], atol=1e-5)
    assert not torch.allclose(near_logits[15:19], far_logits[15:19], atol=1e-3)


def test_marked_labels_name_their_items_and_unmarked_tokens_name_none():
    fmt = NumberFormat(task="sort", scratchpad="transposition_marked", max_items=8)
    tok = ArithTokenizer(number_format=fmt)
    text = list("c:3,d:1,e:2=Dce=dEc=") + ["<eos>"]  # a list moved to labels c-e: item 1 is c
    ids = torch.tensor([tok.convert_tokens_to_ids(text)])
    shift = tok.convert_tokens_to_ids("A") - tok.convert_tokens_to_ids("a")
    assert shift == fmt.max_items
    in_prompt = torch.arange(len(text))[None] < 11
    item = torch.tensor([[1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3] + [0] * 10])
    assert label_items(ids, item, in_prompt, len(tok), 10, shift)[0, 11:].tolist() == [0, 2, 1, 3, 0, 2, 3, 1, 0, 0]
    assert label_items(ids, item, in_prompt, len(tok), 10)[0, 11:].tolist() == [0, 0, 1, 3, 0, 2, 0, 1, 0, 0]


def test_line_window_gives_a_label_and_its_digit_one_slot_and_their_line():
    # transposition_keys: each label followed by its digit. The pair shares a slot, both carry the line's
    # number and name the label's item, so a digit sees its own label, the pairs of the line before and its item.
    fmt = NumberFormat(task="sort", scratchpad="transposition_keys", max_items=8)
    tok = ArithTokenizer(number_format=fmt)
    model, _ = make(fmt=fmt, num_hidden_layers=1, abacus_line_positions=True, abacus_marked_labels=8,
                    answer_start_token_id=tok.convert_tokens_to_ids("="), abacus_num_segments=16,
                    abacus_prompt_segments=True, abacus_line_window=True)
    text = list("a:3,b:1,c:2=B1a3c2=b1C2a3=b1c2A3") + ["<eos>"]
    ids = torch.tensor([tok.convert_tokens_to_ids(text)])
    index, item, segment = model.transformer.placement(model.position_ids_from_input_ids(ids))
    assert segment[0, 11:19].tolist() == [0, 1, 1, 2, 2, 3, 3, 0] and index[0, 11:26].tolist() == [1] * 7 + [2] * 7 + [3]
    assert item[0, 11:19].tolist() == [0, 2, 2, 1, 1, 3, 3, 0]
    is_answer = after_prompt(index, segment)
    allowed = line_window_allowed((index, item, segment, is_answer), (index, item, segment, is_answer))[0]

    def seen(query):
        return "".join(t if allowed[query, k] else "." for k, t in enumerate(text[:query + 1]))

    assert seen(24) == "a:3," + "." * 10 + "a3c2" + "." * 5 + "a3"  # line 2's last digit
    assert seen(20) == "....b:1," + "..." + "=B1a3c2" + "." + "b1"  # line 2's first digit: line 1's slots 0-3
    assert_cached_decoding_matches(model, tok, ["a:3,b:1,c:2", "a:5,b:5", "a:9,b:0,c:7,d:1"], 14)
    # abacus_line_end: the token whose next slot is one past the line before's last label (slot 3 of 3)
    # also sees the `=` that ended that line, its own line's first; the other slots do not.
    ended, _ = make(fmt=fmt, num_hidden_layers=1, abacus_line_positions=True, abacus_marked_labels=8,
                    answer_start_token_id=tok.convert_tokens_to_ids("="), abacus_num_segments=16,
                    abacus_prompt_segments=True, abacus_line_window=True, abacus_line_end=True)
    index, item, segment = ended.transformer.placement(ended.position_ids_from_input_ids(ids))
    assert item[0, [11, 18, 25]].tolist() == [4, 4, 4]  # each `=` closes slot 3: the prompt's items, then lines
    allowed = line_window_allowed((index, item, segment, is_answer), (index, item, segment, is_answer), True)[0]
    assert seen(24) == "a:3," + "." * 10 + "a3c2" + "=" + "...." + "a3"  # line 2's last digit: line 2's `=`
    assert seen(17) == "....b:1,c:2=....c2"  # line 1's last digit: items 2-3 and the prompt's `=`
    assert seen(23) == "a:3," + "." * 10 + "a3c2=....a"  # its label (the pair shares the slot)
    assert seen(21) == "........c:2.B1a3c2...C"  # slot 2 of 3: no `=`
    assert seen(20) == "....b:1," + "..." + "=B1a3c2" + "." + "b1"
    assert_cached_decoding_matches(ended, tok, ["a:3,b:1,c:2", "a:5,b:5", "a:9,b:0,c:7,d:1"], 14)
    with pytest.raises(ValueError, match="abacus_line_end applies with abacus_line_window"):
        make(abacus_line_end=True)


def test_pair_roles_name_each_slots_neighbour_in_its_round_and_restart_at_each_place():
    # abacus_pair_roles: round r (line r + 1, modulo the list's items) pairs 0-based slots of r's parity with
    # their right neighbour; a token at 1-based slot s gets 1 + (s + r) % 2, a prompt token 0.
    fmt = NumberFormat(task="sort", scratchpad="transposition_keys", max_items=8)
    tok = ArithTokenizer(number_format=fmt)
    settings = dict(fmt=fmt, num_hidden_layers=1, abacus_line_positions=True, abacus_marked_labels=8,
                    answer_start_token_id=tok.convert_tokens_to_ids("="), abacus_num_segments=16,
                    abacus_prompt_segments=True, abacus_line_window=True, abacus_line_end=True)
    model, _ = make(**settings, abacus_pair_roles=True)
    text = list("a:3,b:1,c:2=B1a3c2=b1C2a3=b1c2A3") + ["<eos>"]
    ids = torch.tensor([tok.convert_tokens_to_ids(text)])
    placed = model.position_ids_from_input_ids(ids)
    index, item, segment = model.transformer.placement(placed)
    plain, _ = make(**settings)
    assert [t.tolist() for t in (index, item, segment)] == \
        [t.tolist() for t in plain.transformer.placement(plain.position_ids_from_input_ids(ids))]  # the window's ids
    role = unpack_roles(unpack_rows(unpack_positions(placed, model.config.abacus_max_digits)[1], 16)[0], 16)[0][0]
    assert role[:11].tolist() == [0] * 11
    assert role[11:].tolist() == [1, 2, 2, 1, 1, 2, 2] + [2, 1, 1, 2, 2, 1, 1] + [1, 2, 2, 1, 1, 2, 2] + [1]  # <eos>: slot 4
    # Three items: line 4 is round 0 of the next digit place, so its roles are line 1's.
    line = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 3, 4, 4, 5]])
    slot = torch.tensor([[1, 2, 3, 0, 1, 0, 1, 1, 0, 1, 1]])
    in_prompt = torch.tensor([[True] * 3 + [False] * 8])
    assert pair_roles(line, slot, in_prompt).tolist() == [[0, 0, 0, 1, 2, 2, 1, 2, 1, 2, 1]]
    # "every_line" (transposition_flags): the rounds go on alternating, so line 4 is round 3, not round 0.
    assert pair_roles(line, slot, in_prompt, per_place=False).tolist() == [[0, 0, 0, 1, 2, 2, 1, 2, 2, 1, 2]]
    flags_fmt = NumberFormat(task="sort", scratchpad="transposition_flags", max_items=8)
    every, _ = make(**{**settings, "fmt": flags_fmt}, abacus_pair_roles="every_line")
    text = list("a:3,b:1,c:2=B1A3c2=b1C2A3=b1c2a3=b1c2a3") + ["<eos>"]
    ids = torch.tensor([ArithTokenizer(number_format=flags_fmt).convert_tokens_to_ids(text)])
    placed = unpack_positions(every.position_ids_from_input_ids(ids), every.config.abacus_max_digits)[1]
    role = unpack_roles(unpack_rows(placed, 16)[0], 16)[0][0]
    odd, even = [1, 2, 2, 1, 1, 2, 2], [2, 1, 1, 2, 2, 1, 1]  # a line's `=`, then its label-digit pairs
    assert role[11:].tolist() == odd + even + odd + even + [2]  # line 4 is round 3, where per place it is round 0
    with pytest.raises(ValueError, match="abacus_pair_roles must be true, false or 'every_line', got 'odd'"):
        make(**settings, abacus_pair_roles="odd")
    torch.manual_seed(0)
    with torch.no_grad():
        model.transformer.role.weight.zero_()
        without = model(ids).logits
        model.transformer.role.weight.normal_()
        assert not torch.allclose(model(ids).logits, without)  # the role is embedded
    assert_cached_decoding_matches(model, tok, ["a:3,b:1,c:2", "a:5,b:5", "a:9,b:0,c:7,d:1"], 14)
    with pytest.raises(ValueError, match="abacus_pair_roles applies with abacus_line_window"):
        make(abacus_pair_roles=True)


def relation_window_settings(scratchpad: str, **overrides) -> tuple[ArithTokenizer, dict]:
    """The tokenizer and `make` settings of a two-block model under the line window (read in the first block),
    with line ends and pair roles, for sorts written as `scratchpad` (label-digit pairs, marked rounds)."""
    fmt = NumberFormat(task="sort", scratchpad=scratchpad, max_items=8)
    tok = ArithTokenizer(number_format=fmt)
    return tok, dict(fmt=fmt, num_hidden_layers=2, abacus_window_layers=1, abacus_line_positions=True,
                     abacus_marked_labels=8, answer_start_token_id=tok.convert_tokens_to_ids("="),
                     abacus_num_segments=16, abacus_prompt_segments=True, abacus_line_window=True,
                     abacus_line_end=True, abacus_pair_roles=True, **overrides)


def test_relation_bias_tells_window_keys_apart_by_relation_and_embeds_no_slot():
    # abacus_relation_bias: each key the line window lets a token see gets a code for what it is to that
    # token, each head adds its learned bias for that code, and no slot or item id is embedded.
    tok, settings = relation_window_settings("transposition_keys", abacus_offset_items=True, abacus_max_offset=0)
    model, _ = make(**settings, abacus_relation_bias=True, seed=1)
    text = list("a:3,b:1,c:2=B1a3c2=b1C2a3=b1c2A3") + ["<eos>"]
    ids = torch.tensor([tok.convert_tokens_to_ids(text)])
    index, item, segment = model.transformer.placement(model.position_ids_from_input_ids(ids))
    is_answer = after_prompt(index, segment)
    window = (index, item, segment, is_answer)
    relations = line_window_relations(window, window, True)[0]
    assert torch.equal(relations > 0, line_window_allowed(window, window, True)[0])
    # line 2's first digit (slot 1): line 1's `=` and slots 1-3 (offsets -1..2), item b (named), itself
    assert relations[20].tolist()[:21] == [0, 0, 0, 0, 11, 11, 11, 11] + [0] * 3 + [2, 3, 3, 4, 4, 5, 5, 0, 6, 6]
    assert relations[6, 4:8].tolist() == [6] * 4 and relations[6, :4].tolist() == [0] * 4  # a prompt token: its item
    assert relations[24, 18].item() == 21  # line 2's last digit: the `=` that ends line 1 (line_end)
    assert model.transformer.segment is None
    embedded = table_inputs(model, ids, ("abacus",), 0)["abacus"][0]
    assert embedded[11:].eq(0).all() and embedded[[2, 6, 10]].tolist() == [1, 1, 1]  # lines not, prompt digits are
    # Offsets that move every item and slot in training (the digit and line indices stay) change nothing:
    # no absolute slot is embedded.
    plain, _ = make(**settings)
    with torch.no_grad():
        for m, moves in ((model, False), (plain, True)):
            m.eval()
            still = m(ids).logits
            m.train()
            torch.manual_seed(1)
            assert torch.allclose(m(ids).logits, still, atol=1e-5) != moves
            m.eval()
        model.transformer.relation_bias.weight.zero_()
        assert not torch.allclose(model(ids).logits, still, atol=1e-3)  # the bias is read
    model.transformer.relation_bias.weight.data.normal_(0, 2.0)
    assert_cached_decoding_matches(model, tok, ["a:3,b:1,c:2", "a:5,b:5", "a:9,b:0,c:7,d:1"], 14)
    with pytest.raises(ValueError, match="abacus_relation_bias applies with abacus_line_window"):
        make(abacus_relation_bias=True)
    with pytest.raises(ValueError, match="abacus_relation_bias needs abacus_pair_roles"):
        make(**{**settings, "abacus_pair_roles": False}, abacus_relation_bias=True)


def test_the_relation_bias_is_read_as_an_embedding_and_learns_as_one():
    # rows_by_code: the embedding's values, and its gradient summed per code by index_add_ instead of a sort
    from hf_arith.models.modeling_common import rows_by_code

    torch.manual_seed(0)
    table = torch.randn(81, 4, requires_grad=True)
    codes = torch.randint(0, 81, (3, 50, 60))
    codes[0] = 7  # one code at every pair of a row
    weights = torch.randn(3, 50, 60, 4)
    (rows_by_code(table, codes) * weights).sum().backward()
    embedding = torch.nn.Embedding.from_pretrained(table.detach().clone(), freeze=False)
    (embedding(codes) * weights).sum().backward()
    assert torch.equal(rows_by_code(table, codes), embedding(codes))
    assert torch.allclose(table.grad, embedding.weight.grad, atol=1e-4) and table.grad.abs().sum() > 0
    assert torch.allclose(table.grad[7], weights[0].sum((0, 1)) + weights[1:][codes[1:] == 7].sum(0), atol=1e-4)


def test_digit_places_mark_the_prompt_digit_each_line_writes_and_count_lines_past_the_abacus_table():
    # abacus_digit_places (transposition_next_keys): line L of a list of n items writes each label's digit at
    # place L // n, so a place's last round already holds the next place's digits. The prompt digit at that
    # place gets a code of its own (+ AT_PLACE) among the keys a token sees; the last line's roles say so.
    tok, settings = relation_window_settings("transposition_next_keys", abacus_relation_bias=True, abacus_max_digits=8)
    model, _ = make(**settings, abacus_digit_places=True, seed=2)
    answer = "A1b7c0=a1C0b7=c2a3B0=C2a3b0=c2B0a3=b0c1A0=B0c1a0=b0A0c1=b0a0C0"  # 31, 7, 120: nine lines
    text = list("a:13,b:7,c:021=" + answer) + ["<eos>"]
    ids = torch.tensor([tok.convert_tokens_to_ids(text)])
    placed = model.position_ids_from_input_ids(ids)  # nine lines, more than the table's 8 indices
    index, item, segment = model.transformer.placement(placed)
    is_answer = after_prompt(index, segment)
    assert index[0, 15:].eq(1).all()  # no answer token carries its line: the window counts them
    assert answer_lines(segment, is_answer)[0, 15:].tolist() == [(i + 1) // 7 + 1 for i in range(len(answer))] + [9]
    window = (index, item, segment, is_answer)
    relations = line_window_relations(window, window, True, True)[0]

    def at_place(query):
        return [text[k] for k in range(query + 1) if relations[query, k] > AT_PLACE]

    # the prompt "a:13,b:7,c:021=" at 0-14, line 1 "A1b7c0" at 15-20, each line 7 tokens with its `=`
    assert at_place(14) == ["1", "7"]  # line 1's `=`: the place-0 digits of items 1-2, the line before
    assert at_place(15) == ["1", "7", "0"]  # line 1's label A: items 1-3's; a's is also the one it writes
    assert [text[29], at_place(29)] == ["c", ["2"]]  # line 3, the place's last round: c's digit at place 1
    assert [text[52], at_place(52)] == ["c", ["1"]]  # line 6: c's digit at place 2
    assert [text[54], at_place(54)] == ["A", []]  # 31 has no place 2: its 0 is written from no digit
    assert [text[75], at_place(75)] == ["C", []]  # line 9 writes place 3, past the longest item
    assert relations[15:, 15:].gt(AT_PLACE).sum() == 0  # written tokens are never at a place
    # "narrow": of the prompt, an answer token sees only the items' labels and the digits at its place.
    narrow = line_window_relations(window, window, True, "narrow")[0]

    def prompt_seen(query):
        return "".join(t if narrow[query, k] > 0 else "." for k, t in enumerate(text[:15]))

    assert prompt_seen(15) == "a.1..b.7.c.0..."  # line 1's label A: items 1-3's labels and place-0 digits
    assert prompt_seen(52) == ".........c...1."  # line 6's label c: its item's label and digit at place 2
    assert prompt_seen(54) == "a.............."  # line 6's label A: 31 has no place 2
    assert torch.equal(narrow[narrow > 0], relations[narrow > 0])  # what it keeps, it codes as before
    assert prompt_seen(6) == ".....b:7,......"  # a prompt token still sees its own item (causality aside)
    role = unpack_roles(unpack_rows(unpack_positions(placed, 8)[1], 16)[0], 16)[0][0]
    lines = answer_lines(segment, is_answer)[0]
    first, last = (lines[14:] - 1) % 3 == 0, lines[14:] == 9  # a place's first round (lines 1, 4, 7), line 9
    assert torch.equal((role[14:] - 1) // 2, first.long() + 2 * last.long())  # + 2, + 4 on the parity's 1 or 2
    assert role[:14].eq(0).all() and set(role[14:].tolist()) == {1, 2, 3, 4, 5, 6}  # from the prompt's `=` on
    assert relations.max() < line_window_codes(True) == model.transformer.relation_bias.num_embeddings == 81
    assert model.transformer.role.num_embeddings == 7
    # a model may write on past the list's last line before it fails: those lines are last lines, in the table
    runaway = torch.tensor([tok.convert_tokens_to_ids(text[:-1] + list("=a0b0c0=b0a0c0"))])
    placed = model.position_ids_from_input_ids(runaway)
    role = unpack_roles(unpack_rows(unpack_positions(placed, 8)[1], 16)[0], 16)[0][0]
    assert set(role[-14:].tolist()) == {5, 6} and torch.isfinite(model(input_ids=runaway).logits).all()
    assert_cached_decoding_matches(model, tok, ["a:13,b:7,c:021", "a:5,b:5", "a:9,b:0,c:7,d:1"], 30)
    assert_cached_decoding_matches(make(**settings, abacus_digit_places="narrow", seed=2)[0], tok,
                                   ["a:13,b:7,c:021", "a:5,b:5", "a:9,b:0,c:7,d:1"], 30)
    with pytest.raises(ValueError, match="abacus_digit_places needs abacus_relation_bias"):
        make(**{**settings, "abacus_relation_bias": False}, abacus_digit_places=True)
    with pytest.raises(ValueError, match="abacus_digit_places must be true, false or 'narrow', got 'wide'"):
        make(**settings, abacus_digit_places="wide")


def test_line_behind_false_takes_the_slot_before_out_of_the_line_window():
    # abacus_line_behind false: the token at slot q (writing slot q + 1) no longer sees slot q - 1 of the line
    # before, where a larger digit that just moved into slot q came from; every other key keeps its code.
    tok, settings = relation_window_settings("transposition_keys", abacus_relation_bias=True)
    text = list("a:3,b:1,c:2=B1a3c2=b1C2a3=b1c2A3") + ["<eos>"]
    ids = torch.tensor([tok.convert_tokens_to_ids(text)])
    model, _ = make(**settings, abacus_line_behind=False, seed=1)
    index, item, segment = model.transformer.placement(model.position_ids_from_input_ids(ids))
    window = (index, item, segment, after_prompt(index, segment))
    full = line_window_relations(window, window, True)[0]
    narrowed = line_window_relations(window, window, True, behind=False)[0]
    # line 2's first digit (slot 1): line 1's `=` (slot 0) goes; slots 1-3, item b and itself stay
    assert full[20, 11].item() == 2 and narrowed[20].tolist()[:21] == [0, 0, 0, 0, 11, 11, 11, 11] + [0] * 4 + [
        3, 3, 4, 4, 5, 5, 0, 6, 6]
    # line 2's second digit (slot 2): line 1's slot 1 (B1) goes, slots 2-3 and its line end stay
    assert full[22, 12:14].tolist() == [2, 2] and narrowed[22, 12:14].tolist() == [0, 0]
    # every other change is the same key losing that code: alone (2 -> unseen) or beside its named item (12 -> 11)
    changed = narrowed != full
    assert set(zip(full[changed].tolist(), narrowed[changed].tolist())) == {(2, 0), (12, 11)}
    plain, _ = make(**settings, seed=1)
    with torch.no_grad():
        assert not torch.allclose(model(ids).logits, plain(ids).logits, atol=1e-4)  # the model reads the flag
    assert_cached_decoding_matches(model, tok, ["a:3,b:1,c:2", "a:5,b:5", "a:9,b:0,c:7,d:1"], 14)
    with pytest.raises(ValueError, match="abacus_line_behind: false applies with abacus_line_window"):
        make(abacus_line_behind=False)


def test_place_rows_false_leaves_no_input_that_depends_on_a_digits_place():
    # abacus_place_rows false (with abacus_digit_places): prompt digits get no abacus row, so the offsets
    # drawn in training, which move every digit's row, change nothing; with the rows they do.
    tok, settings = relation_window_settings("transposition_next_keys", abacus_relation_bias=True,
                                             abacus_max_digits=12, abacus_max_offset=6, abacus_offset_per_sequence=True)
    text = list("a:13,b:7,c:021=A1b7c0=a1C0b7=c2a3B0")
    ids = torch.tensor([tok.convert_tokens_to_ids(text)])
    for place_rows in (True, False):
        model, _ = make(**settings, abacus_digit_places="narrow", abacus_place_rows=place_rows, seed=3)
        assert table_inputs(model, ids, ("abacus",), 0)["abacus"][0].gt(0).any() == place_rows
        model.eval()
        with torch.no_grad():
            still = model(ids).logits
            model.train()
            moved = [not torch.allclose(model(ids).logits, still, atol=1e-5) for _ in range(8)]
        assert any(moved) == place_rows
    assert_cached_decoding_matches(model, tok, ["a:13,b:7,c:021", "a:5,b:5", "a:9,b:0,c:7,d:1"], 30)
    with pytest.raises(ValueError, match="abacus_place_rows: false applies with abacus_digit_places"):
        make(**settings, abacus_place_rows=False)


def test_line_window_moves_prompt_items_and_line_slots_by_one_offset_in_training():
    """With abacus_offset_items under the line window, every segment > 0 (prompt items, line slots) moves by
    one k a row, so item j and slot j stay one id; that k is drawn apart from the digits' and lines' indices."""
    model, tok, text, ids = line_window_model(abacus_max_offset=9, abacus_offset_per_sequence=True,
                                              abacus_offset_items=True)
    drawn = table_inputs(model, ids, ("abacus", "segment"), 40)
    plain_index, plain_segment = drawn["abacus"][0], drawn["segment"][0]
    pairs = set()
    for index, segment in zip(drawn["abacus"][1:], drawn["segment"][1:]):
        k = int((segment - plain_segment).max())
        assert torch.equal(segment - plain_segment, torch.where(plain_segment > 0, k, 0))  # the `=`s stay at 0
        pairs.add((k, int((index - plain_index).max())))
    assert len({k for k, _ in pairs}) > 2 and any(k != k_index for k, k_index in pairs)


def assert_cached_decoding_matches(model, tok, problems: list[str], steps: int) -> None:
    """Under a window, cached decoding (which gathers each query's keys) writes what uncached decoding and
    generate() write, for a batch of left-padded problems."""
    enc = tok(problems, padding=True, return_tensors="pt")
    cached = greedy_decode(model, enc.input_ids, enc.attention_mask, steps, pad_token_id=tok.pad_token_id)
    uncached = greedy_decode(model, enc.input_ids, enc.attention_mask, steps, pad_token_id=tok.pad_token_id,
                             use_cache=False)
    generated = model.generate(**enc, max_new_tokens=steps, do_sample=False, eos_token_id=None,
                               pad_token_id=tok.pad_token_id)[:, enc.input_ids.shape[1]:]
    assert len(set(cached.flatten().tolist())) > 2
    assert torch.equal(cached, uncached) and torch.equal(cached, generated)


def test_line_window_cached_decoding_writes_what_uncached_decoding_writes():
    model, tok, _, _ = line_window_model()
    assert_cached_decoding_matches(model, tok, ["a:3,b:1,c:2", "a:5,b:5", "a:9,b:0,c:7,d:1"], 14)


def test_window_layers_bound_what_a_token_depends_on():
    # Two windowed blocks under two that see only their own token: line 3 depends on line 1 (two
    # window steps), and line 4 does not (three).
    model, tok = make(num_hidden_layers=4, abacus_window_layers=2, **ROW_WINDOW)
    eq = tok.convert_tokens_to_ids("=")
    line = [3, 1, 4, 1, 5]
    ids = torch.tensor([tok("4321+5678").input_ids + (line + [eq]) * 3 + line])
    far = ids.clone()
    start = len(tok("4321+5678").input_ids)
    far[0, start:start + 5] = torch.tensor([9, 9, 9, 9, 9])  # rewrite line 1
    with torch.no_grad():
        near_logits, far_logits = model(ids).logits[0], model(far).logits[0]
    line_3, line_4 = slice(start + 11, start + 17), slice(start + 17, None)
    assert not torch.allclose(near_logits[line_3], far_logits[line_3], atol=1e-3)
    assert torch.allclose(near_logits[line_4], far_logits[line_4], atol=1e-5)


def test_blocks_above_the_window_return_their_own_value_with_no_mask(monkeypatch):
    # Above abacus_window_layers a token sees only itself: its softmax is 1 on its own key, so its attention
    # output is its own value and no mask is built. Attention maps keep the mask, and give the same logits.
    model, tok = make(num_hidden_layers=3, abacus_window_layers=1, **ROW_WINDOW)
    enc = tok(["4321+5678=", "12+9="], padding=True, return_tensors="pt")
    real = enc.attention_mask.bool()
    with torch.no_grad():
        mapped = model(**enc, output_attentions=True)
        monkeypatch.setattr(model.transformer, "self_only_mask", lambda *a, **k: pytest.fail("a mask was built"))
        fast = model(**enc).logits
    assert torch.allclose(fast[real], mapped.logits[real], atol=1e-5)
    model.transformer.h[1].attn.c_attn.bias.data[-32:] += 1.0  # the values: the upper blocks read them
    with torch.no_grad():
        assert not torch.allclose(model(**enc).logits[real], fast[real], atol=1e-3)
    model.train()
    model.config.attn_pdrop = 0.5  # dropout on that one weight: the masked path, which applies it
    with pytest.raises(pytest.fail.Exception, match="a mask was built"):
        model(**enc)


@pytest.mark.parametrize("window_layers", [0, 1])
def test_row_window_cached_decoding_writes_what_uncached_decoding_writes(window_layers):
    model, tok = make(seed=0, abacus_window_layers=window_layers, **ROW_WINDOW)
    assert_cached_decoding_matches(model, tok, ["4321+567", "5+12345", "99999999+1"], 20)


def test_windowed_outputs_do_not_depend_on_far_digits():
    # Two layers, window 1: a query at index i reads indices i - 2 .. i + 2 at most, so changing
    # digits 6 and beyond of both operands cannot move the logits of tokens at indices 1-3.
    model, tok = make(seed=3, abacus_attention_window=1, abacus_align_answer=True, answer_start_token_id=11)
    near = tok(["12345678+87654321"], return_tensors="pt").input_ids  # reversed: index 1 is the 8 / the 1
    far = tok(["99945678+11154321"], return_tensors="pt").input_ids
    index = model.position_ids_from_input_ids(near)[0]
    probe = (index >= 1) & (index <= 3)
    with torch.no_grad():
        a, b = model(near).logits[0, probe], model(far).logits[0, probe]
        assert torch.allclose(a, b, atol=1e-5)
        unwindowed, _ = make(seed=3, abacus_align_answer=True, answer_start_token_id=11)
        assert not torch.allclose(unwindowed(near).logits[0, probe], unwindowed(far).logits[0, probe], atol=1e-3)


def test_windowed_cached_decoding_reads_only_the_window_keys_and_writes_the_same(monkeypatch):
    # Long operands, window 1: a decoding step's queries see a few keys of a long cache, so each
    # cached pass attends over those keys alone (`key_index`); the tokens and their probabilities
    # must be those of the uncached decode, which attends over every key under the mask.
    import hf_arith.models.modeling_abacus_gpt2 as modeling
    import hf_arith.models.modeling_common as common
    monkeypatch.setattr(common, "GATHER_MIN_ROW_KEYS", 0)  # gather at any size (by default, from 4,096 row-keys)
    model, tok = make(seed=0, abacus_attention_window=1, abacus_align_answer=True, answer_start_token_id=11)
    problems = ["1234567890123456789+9876543210987654321", "5+77777777777777777777", "99999999999999+1"]
    enc = tok(problems, padding=True, return_tensors="pt")
    widths = []
    real = modeling.gather_keys

    def spy(key, value, key_index):
        widths.append((key.shape[2], None if key_index is None else key_index.shape[1]))
        return real(key, value, key_index)

    monkeypatch.setattr(modeling, "gather_keys", spy)
    n = 16
    cached, p_cached = greedy_decode(model, enc.input_ids, enc.attention_mask, n, pad_token_id=tok.pad_token_id,
                                     return_probabilities=True)
    gathered = [(full, kept) for full, kept in widths if kept is not None]
    assert gathered and all(2 * kept <= full for full, kept in gathered)  # the cached steps read few keys
    widths.clear()
    uncached, p_uncached = greedy_decode(model, enc.input_ids, enc.attention_mask, n, pad_token_id=tok.pad_token_id,
                                         use_cache=False, return_probabilities=True)
    assert widths and all(kept is None for _, kept in widths)  # no cache: every key under the mask
    assert len(set(cached.flatten().tolist())) > 2
    assert torch.equal(cached, uncached) and torch.allclose(p_cached, p_uncached, atol=1e-5)
    for k in (2, 3):  # a block of several queries reads the union of their windows
        spec, _ = make(seed=0, abacus_attention_window=1, abacus_align_answer=True, answer_start_token_id=11,
                       num_future_tokens=k)
        one = greedy_decode(spec, enc.input_ids, enc.attention_mask, n, pad_token_id=tok.pad_token_id)
        assert torch.equal(greedy_decode(spec, enc.input_ids, enc.attention_mask, n, pad_token_id=tok.pad_token_id,
                                         tokens_per_step=k), one)


@pytest.mark.parametrize("layout", ["buffer view", "offset view", "heads strided", "dim strided"])
def test_gather_keys_picks_each_rows_positions_whatever_the_cache_layout(layout):
    from hf_arith.models.modeling_common import gather_keys
    torch.manual_seed(0)
    b, h, n, d = 3, 4, 50, 8
    buffer = torch.randn(b, h, n + 7, d)
    key = {"buffer view": buffer[:, :, :n], "offset view": buffer[:, :, 3:n + 3],
           "heads strided": torch.randn(b, n, h, d).transpose(1, 2),
           "dim strided": torch.randn(b, h, d, n).transpose(2, 3)}[layout]
    value = key * 2
    index = torch.randint(0, n, (b, 6))
    keys, values = gather_keys(key, value, index)
    for row in range(b):
        assert torch.equal(keys[row], key[row][:, index[row]]) and torch.equal(values[row], value[row][:, index[row]])
    same = gather_keys(key, value, None)
    assert same[0] is key and same[1] is value


def test_windowed_cached_forward_without_key_positions_is_a_clear_error():
    model, tok = make(abacus_attention_window=2)
    ids = tok(["12+34"], return_tensors="pt").input_ids
    out = model(ids, use_cache=True)
    with pytest.raises(ValueError, match="key_position_ids"):
        model(ids[:, :1], past_key_values=out.past_key_values if hasattr(out, "past_key_values") else out.cache,
              position_ids=torch.tensor([[0]]))


# -- registration and remote code -------------------------------------------------------------
def test_auto_classes_resolve_the_abacus_family(tmp_path):
    model, tok = make(num_future_tokens=2, tie_word_embeddings=True)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    assert type(AutoConfig.from_pretrained(tmp_path)) is AbacusGPT2Config
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is AbacusGPT2ForCausalLM
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    assert torch.equal(model(**enc, num_future_tokens=2).future_logits, loaded(**enc, num_future_tokens=2).future_logits)
    assert loaded.lm_head.weight.data_ptr() == loaded.transformer.wte.weight.data_ptr()  # tied, counted once
    assert type(AutoTokenizer.from_pretrained(tmp_path)) is ArithTokenizer


def test_remote_code_loads_without_hf_arith(tmp_path):
    model, tok = make(seed=8, num_future_tokens=2)
    folder = tmp_path / "hub_folder"
    save_checkpoint(model, tok, folder)
    for name in ("modeling_abacus_gpt2.py", "configuration_abacus_gpt2.py", "abacus_positions.py"):
        source = (folder / name).read_text()
        assert "hf_arith" not in source.replace("hf_arith_abacus_gpt2", ""), name
    enc = tok(PROBLEMS, padding=True, return_tensors="pt")
    expected = greedy_decode(model, enc.input_ids, enc.attention_mask, 9, pad_token_id=tok.pad_token_id).tolist()
    loaded = run_remote_code(folder, PROBLEMS, """
        out = model.generate(**enc, max_new_tokens=9, do_sample=False, eos_token_id=None)[:, enc.input_ids.shape[1]:]
        print(json.dumps({"ids": out.tolist(), "params": model.num_parameters()}))
    """, tmp_path / "hf_home")
    assert loaded["ids"] == expected
    assert loaded["params"] == model.num_parameters()


# -- the preset through the Trainer ----------------------------------------------------------------
def share_of_weights_changed(recipe, trained) -> float:
    """The share of the trained model's weight tensors that differ from the seeded init of its recipe."""
    from hf_arith.data.streaming import worst_case_length
    from hf_arith.training.run import build_model, build_tokenizer, check_recipe, recipe_spec

    fmt = check_recipe(recipe)
    context = worst_case_length(recipe_spec(recipe, fmt), fmt)
    init = dict(build_model(recipe, build_tokenizer(fmt, context), context).named_parameters())
    changed = [not torch.equal(init[name], p) for name, p in trained.named_parameters()]
    return sum(changed) / len(changed)


@pytest.mark.parametrize("preset", ["abacus-gpt2-add", str(HEX_RECIPE)])
def test_presets_train_multi_token_models_with_the_trainer(tmp_path, preset):
    from hf_arith.runtime.loading import load_checkpoint
    from hf_arith.training.recipe import load_stages
    from hf_arith.training.run import train

    overrides = ["optim.steps=4", "optim.compile=false", "optim.save_steps=1000", "eval.samples=16",
                 "model.hidden_size=16", "model.num_hidden_layers=1", "model.intermediate_size=32",
                 "model.num_future_tokens=2", f"output_dir={tmp_path}"]
    recipe = load_stages(preset, overrides)[0].recipe  # a chain's first stage: its stages are tested elsewhere
    summary = train(recipe, output_dir=str(tmp_path))
    assert summary["steps"] == 4 and math.isfinite(summary["train_loss"])
    model, tok = load_checkpoint(tmp_path / "final")
    assert share_of_weights_changed(recipe, model) > 0.9  # the optimizer stepped
    assert type(model) is AbacusGPT2ForCausalLM and model.config.num_future_tokens == 2
    assert model.config.num_digit_tokens == tok.arith_format.base == (16 if preset.endswith("hex.yaml") else 10)
    one = hf_arith.solve(model, tok, ["123+45", "9+9"], tokens_per_step=1)
    two = hf_arith.solve(model, tok, ["123+45", "9+9"], tokens_per_step=2)
    assert len(one) == len(two) == 2  # answers or None: an untrained model, but both paths decode
    with pytest.raises(FormatError):
        hf_arith.solve(model, tok, ["12G+3"])  # not a digit in any base the tokenizer reads


# -- a periodic abacus table -------------------------------------------------------------------
def test_a_periodic_table_repeats_its_rows_and_keeps_row_zero_for_unplaced_tokens():
    from hf_arith.models.abacus_positions import table_rows

    index = torch.tensor([[0, 1, 2, 8, 9, 16, 17, 0]])
    assert table_rows(index, 8).tolist() == [[0, 1, 2, 8, 1, 8, 1, 0]]
    assert table_rows(index, 0).tolist() == index.tolist()
    model, _ = make(abacus_attention_window=2, abacus_period=8, abacus_max_digits=1000)
    assert model.transformer.abacus.weight.shape[0] == 9  # the table no longer grows with abacus_max_digits


def test_with_a_period_and_a_window_only_index_differences_matter():
    """Moving every placed token by a whole period gives the same logits: what bounded the length (one
    table row per index) is gone. Without the period the same shift changes them."""
    kwargs = dict(abacus_attention_window=2, abacus_align_answer=True, answer_start_token_id=11, abacus_max_digits=1000)
    ids = make()[1](["1342+879", "5+12345"], padding=True, return_tensors="pt").input_ids
    for period, same in ((8, True), (0, False)):
        model, _ = make(seed=5, abacus_period=period, **kwargs)
        index = model.position_ids_from_input_ids(ids)
        shifted = torch.where(index > 0, index + 3 * 8, index)
        with torch.no_grad():
            a, b = model(ids, position_ids=index).logits, model(ids, position_ids=shifted).logits
        assert torch.allclose(a, b, atol=1e-5) is same


def test_a_periodic_model_answers_operands_far_longer_than_its_table():
    model, tok = make(seed=1, abacus_attention_window=2, abacus_period=8, abacus_max_digits=1000,
                      abacus_align_answer=True, answer_start_token_id=11, max_position_embeddings=4096)
    problem = "9" * 600 + "+" + "1" * 600
    answered = hf_arith.solve(model, tok, [problem])  # an untrained model: any answer, but no index error
    assert len(answered) == 1
