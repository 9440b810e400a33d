"""The tokenizer owns the number format: formatting, saving, loading and reading answers back."""

import pytest
import torch
from transformers import AutoTokenizer

from hf_arith import ArithTokenizer, FormatError, MinimalConfig, NumberFormat


def tokens(tok, text, **kwargs):
    return tok.convert_ids_to_tokens(tok(text, **kwargs)["input_ids"])


def test_formats_problems_into_the_models_format():
    tok = ArithTokenizer(number_format=NumberFormat(operand_width=10, answer_width=11, end_token=False))
    assert tok.format_problem("1234567890+9876543210") == "0987654321+0123456789="
    assert tok.format_problem("7+35") == "7000000000+5300000000="
    assert tokens(tok, "7+35") == list("7000000000+5300000000=")


@pytest.mark.parametrize("fmt, problem, expected", [
    (NumberFormat(), "120+7", "021+7="),
    (NumberFormat(reverse_operands=False), "120+7", "120+7="),
    (NumberFormat(base=16), "255+16", "FF+01="),
    (NumberFormat(base=2, reverse_operands=False), "5+2", "101+10="),
    (NumberFormat(task="mul", operand_width=4), "12*3", "2100*3000="),
    (NumberFormat(task="sort"), "a:31,b:7,c:120", "a:13,b:7,c:021="),
])
def test_format_options(fmt, problem, expected):
    assert ArithTokenizer(number_format=fmt).format_problem(problem) == expected


def test_format_is_saved_and_loaded_with_the_tokenizer(tmp_path):
    fmt = NumberFormat(task="sub", base=16, reverse_answer=False, operand_width=6, end_token=True)
    ArithTokenizer(number_format=fmt, model_max_length=40).save_pretrained(tmp_path)
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING  # noqa: F401  (registered by hf_arith)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert isinstance(loaded, ArithTokenizer)
    assert loaded.arith_format == fmt
    assert loaded.model_max_length == 40
    assert loaded.format_problem("255-256") == ArithTokenizer(number_format=fmt).format_problem("255-256")


def test_vocabulary_is_the_formats_and_digits_map_to_their_value():
    tok = ArithTokenizer(number_format=NumberFormat(base=16))
    vocab = tok.get_vocab()
    assert all(vocab[c] == i for i, c in enumerate("0123456789ABCDEF"))
    assert len(tok) == 16 + 2 + 2  # digits, '+' and '=', <pad> and <eos>
    assert "G" not in vocab and "-" not in vocab


def test_decode_answers_reads_back_plain_decimal():
    tok = ArithTokenizer(number_format=NumberFormat(base=16))
    eos, pad = tok.eos_token_id, tok.pad_token_id
    ids = torch.tensor([
        [tok.convert_tokens_to_ids("F"), tok.convert_tokens_to_ids("1"), eos, pad],  # reversed 0x1F = 31
        [tok.convert_tokens_to_ids("0"), eos, pad, pad],
        [tok.convert_tokens_to_ids("+"), eos, pad, pad],  # not a number
        [eos, pad, pad, pad],  # empty answer
    ])
    assert tok.decode_answers(ids) == ["31", "0", None, None]


def test_subtraction_answers_keep_their_sign():
    tok = ArithTokenizer(number_format=NumberFormat(task="sub"))
    ids = [tok.convert_tokens_to_ids(list("-21")) + [tok.eos_token_id]]
    assert tok.decode_answers(ids) == ["-12"]


@pytest.mark.parametrize("bad, message", [
    ("12a+3", "'a' is not a decimal digit"),
    ("-5+3", "negative"),
    ("", "empty"),
    ("3*4", "multiplication"),
    ("12345678901+1", "more than 10"),
    ("1+2+3", r"two numbers joined by one '\+', got 2 '\+' signs"),
])
def test_bad_problems_raise_one_line_errors(bad, message):
    tok = ArithTokenizer(number_format=NumberFormat(operand_width=10, answer_width=11))
    with pytest.raises(FormatError, match=message) as info:
        tok(bad)
    assert "\n" not in str(info.value)


def test_preformatted_text_is_checked_against_the_vocabulary():
    tok = ArithTokenizer(number_format=NumberFormat())
    assert tokens(tok, "21+43=", format_problems=False) == list("21+43=")
    with pytest.raises(FormatError, match="'x' is not in this tokenizer's vocabulary"):
        tok("2x+43=", format_problems=False)


def test_malformed_format_is_rejected():
    with pytest.raises(FormatError, match="base"):
        NumberFormat(base=40)
    with pytest.raises(FormatError, match="unknown task"):
        NumberFormat(task="pow")
    with pytest.raises(FormatError, match="unknown number_format keys"):
        NumberFormat.from_dict({"bse": 10})


def test_tokenizer_is_registered_for_every_family_config():
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING
    assert TOKENIZER_MAPPING[MinimalConfig] is ArithTokenizer


@pytest.mark.parametrize("fmt", [
    NumberFormat(operand_width=10, answer_width=11, end_token=False),
    NumberFormat(base=16, reverse_operands=False),
    NumberFormat(task="sort"),
])
@pytest.mark.parametrize("kwargs", [{}, {"padding": True, "return_tensors": "pt"},
                                    {"padding": "max_length", "max_length": 64, "padding_side": "right"}])
def test_direct_encoding_equals_the_tokenizers_backend_on_formatted_text(fmt, kwargs):
    """tok(problems) renders ids directly; the backend tokenizing the formatted strings must agree."""
    import numpy as np

    from hf_arith.problems import ProblemSpec, sample

    spec = ProblemSpec(task=fmt.task, base=fmt.base, max_digits=8, max_items=5)
    problems = sample(spec, 50, np.random.default_rng(0), split=None).to_text()
    tok = ArithTokenizer(number_format=fmt)
    direct = tok(problems, **kwargs)
    backend = tok(tok.format_problems(problems), format_problems=False, **kwargs)
    for key in ("input_ids", "attention_mask"):
        a, b = direct[key], backend[key]
        assert (a.tolist() if hasattr(a, "tolist") else a) == (b.tolist() if hasattr(b, "tolist") else b)


def test_a_saved_tokenizer_without_its_format_is_refused(tmp_path):
    import json

    ArithTokenizer(number_format=NumberFormat(operand_width=10)).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    del config["number_format"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(FormatError, match="no number_format"):
        ArithTokenizer.from_pretrained(tmp_path)


def test_a_loaded_tokenizer_saves_back_the_same_config(tmp_path):
    import json

    ArithTokenizer(number_format=NumberFormat(operand_width=10), model_max_length=33).save_pretrained(tmp_path / "a")
    ArithTokenizer.from_pretrained(tmp_path / "a").save_pretrained(tmp_path / "b")
    first, second = (json.loads((tmp_path / d / "tokenizer_config.json").read_text()) for d in "ab")
    assert first == second
