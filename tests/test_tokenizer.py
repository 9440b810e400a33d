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

    from hf_arith.data.problems import ProblemSpec, sample

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


# -- behaving like a transformers tokenizer -------------------------------------------------------
ONE_PER_TASK = {"abacus-gpt2-add": "784+55482", "abacus-gpt2-sub": "123-456", "abacus-gpt2-mul": "12*34",
                "abacus-gpt2-sort": "a:31,b:7,c:120", "minimal-add10": "40+2"}


@pytest.mark.parametrize("name", ["abacus-gpt2-add", "abacus-gpt2-sort", "minimal-add10"])
def test_model_max_length_covers_every_problem_the_model_takes(tmp_path, name):
    """Saved with its model, the tokenizer's model_max_length is the longest sequence the model takes, so
    `truncation=True` leaves the longest problem it takes whole (the training data's 34 cut a 20-digit sum)."""
    import hf_arith
    from hf_arith.runtime.limits import model_limits
    from hf_arith.runtime.saving import save_checkpoint

    model, tok = hf_arith.load(name)
    limits = model_limits(model, tok)
    longest = limits.longest_problem()
    whole = tok(longest)["input_ids"]
    save_checkpoint(model, tok, tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.model_max_length == limits.max_sequence_tokens >= len(whole) + limits.max_answer_tokens - 1
    assert loaded(longest, truncation=True)["input_ids"] == whole
    assert hf_arith.load(name)[1].model_max_length == loaded.model_max_length  # the bundled copy says the same


def test_truncation_never_cuts_a_problem():
    tok = ArithTokenizer(number_format=NumberFormat(), model_max_length=10)
    assert tok("123+45", truncation=True)["input_ids"] == tok("123+45")["input_ids"]  # 7 tokens: nothing to cut
    for call in (lambda: tok("12345+6789", truncation=True),  # 11 tokens
                 lambda: tok(["1+2", "123+45"], truncation=True, max_length=5),
                 lambda: tok("12345+6", text_target="12351", truncation=True),
                 lambda: tok("54321+9876=", format_problems=False, truncation=True)):  # formatted text too
        with pytest.raises(FormatError, match="truncating would cut the problem") as err:
            call()
        assert "\n" not in str(err.value)
    assert len(tok("12345+6789")["input_ids"]) == 11  # without truncation, as long as it takes
    assert len(tok("321+54=", format_problems=False, truncation=True)["input_ids"]) == 7


@pytest.mark.parametrize("name", ONE_PER_TASK)
def test_text_target_gives_the_labels_training_uses(name):
    """`tok(problem, text_target=answer)`: the training example, the same ids and labels (-100 on the
    prompt) as the package's own data stream writes (`streaming.encode_examples`)."""
    import numpy as np

    import hf_arith
    from hf_arith.data.formatting import parse_problems
    from hf_arith.data.streaming import encode_examples
    from hf_arith.data.tokenization_arith import LABEL_IGNORE
    from hf_arith.models import IGNORE_INDEX

    assert LABEL_IGNORE == IGNORE_INDEX
    _, tok = hf_arith.load(name)
    fmt = tok.arith_format
    problems = [ONE_PER_TASK[name], fmt.task_rules.example(7, 12, fmt.max_items)]
    answers = [hf_arith.data.tasks.get_task(fmt.task).reference([int(v) for v in fmt.task_rules.parse(p, fmt)])
               for p in problems]
    single = tok(problems[0], text_target=answers[0])
    assert set(single) == {"input_ids", "attention_mask", "labels"}
    parsed = parse_problems(problems, fmt).with_answers()
    ids, mask, labels = encode_examples(parsed, fmt, 64)
    n = int(mask[0].sum())
    assert single["input_ids"] == ids[0, :n].tolist() and single["labels"] == labels[0, :n].tolist()
    prompt = len(tok(problems[0])["input_ids"])
    assert single["labels"][:prompt] == [-100] * prompt and -100 not in single["labels"][prompt:]
    batch = tok(problems, text_target=answers, padding=True, return_tensors="pt")
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape
    assert ((batch["labels"] != -100) <= (batch["attention_mask"] == 1)).all()  # padding carries no loss
    for row, row_labels, row_mask, ref, ref_labels, ref_mask in zip(
            batch["input_ids"], batch["labels"], batch["attention_mask"], ids, labels, mask):
        kept, n = row_mask.bool(), int(ref_mask.sum())
        assert row[kept].tolist() == ref[:n].tolist() and row_labels[kept].tolist() == ref_labels[:n].tolist()
    assert np.array_equal(batch["labels"][:, -1].numpy(), ids[np.arange(2), mask.sum(1) - 1])  # <eos> is learnt
    with pytest.raises(FormatError, match="is not its answer"):
        tok(problems[0], text_target="1")
    with pytest.raises(FormatError, match="one answer per problem"):
        tok(problems, text_target=answers[:1])


@pytest.mark.parametrize("name", ONE_PER_TASK)
def test_a_whole_problem_as_text_encodes_as_training_writes_it(name):
    """`tok("12+34=46")`: the whole sequence a model trained on the format reads (the answer in its written
    form, working and <eos> included), what `text_target` gives without the labels; decode reads it back."""
    import hf_arith

    _, tok = hf_arith.load(name)
    fmt = tok.arith_format
    problems = [ONE_PER_TASK[name], fmt.task_rules.example(7, 12, fmt.max_items)]
    answers = [hf_arith.data.tasks.get_task(fmt.task).reference([int(v) for v in fmt.task_rules.parse(p, fmt)])
               for p in problems]
    whole = [f"{p}={a}" for p, a in zip(problems, answers)]
    expected = tok(problems[0], text_target=answers[0])
    single = tok(whole[0])
    assert set(single) == {"input_ids", "attention_mask"}
    assert single["input_ids"] == expected["input_ids"] and tok.encode(whole[0]) == expected["input_ids"]
    assert tok.decode(single["input_ids"]) == whole[0]
    batch = tok(whole, padding=True, return_tensors="pt")
    reference = tok(problems, text_target=answers, padding=True, return_tensors="pt")
    assert torch.equal(batch["input_ids"], reference["input_ids"])
    assert tok(problems[0] + "=")["input_ids"] == tok(problems[0])["input_ids"]  # '=' alone ends a prompt
    with pytest.raises(FormatError, match=r"is not its answer .*a whole problem is encoded with the exact answer"):
        tok(f"{problems[0]}=1")
    with pytest.raises(FormatError, match="separate calls") as err:
        tok([whole[0], problems[1]])
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ONE_PER_TASK)
def test_decode_writes_plain_decimal(name):
    """`tok.decode` of a whole generated sequence reads as a person writes it; `raw=True` and
    `convert_ids_to_tokens` keep the model's own format."""
    import hf_arith

    model, tok = hf_arith.load(name)
    problem = ONE_PER_TASK[name]
    enc = tok([problem], return_tensors="pt")
    out = model.generate(**enc)
    answer = hf_arith.solve(model, tok, [problem])[0]
    assert tok.decode(out[0]) == f"{problem}={answer}" == tok.batch_decode(out, skip_special_tokens=True)[0]
    raw = tok.decode(out[0], raw=True)
    assert raw.startswith(tok.format_problem(problem)) and raw != tok.decode(out[0])
    assert "".join(tok.convert_ids_to_tokens(out[0].tolist())) == raw
    assert tok.decode(out[0][enc["input_ids"].shape[1]:]) == f"={answer}"  # the new tokens alone
    assert tok.decode(enc["input_ids"][0]) == problem  # a prompt alone
    padded = tok([problem, "1+1" if "+" in problem else problem], padding=True, return_tensors="pt")
    assert tok.decode(padded["input_ids"][0]) == problem  # padding is not text


def test_a_malformed_answer_is_decoded_as_written():
    tok = ArithTokenizer(number_format=NumberFormat())
    ids = tok("12+34")["input_ids"] + tok.convert_tokens_to_ids(list("64"))  # no <eos>: not an answer
    assert tok.decode(ids) == "12+34=64"
    assert tok.decode(ids + [tok.eos_token_id]) == "12+34=46"
