"""`hf-arith adderboard`: a single-file AdderBoard submission that needs only torch.

The exported file is run where hf_arith and transformers cannot be imported, through the
protocol of AdderBoard's verify.py (edge cases, then pairs from random.Random(2025)); its answers
must be hf_arith.solve's and a+b. Parameters are counted as AdderBoard counts them: unique
tensors after tying, fixed rotary tables not at all.
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import io
import json
import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch
from cli_contract import fails

from hf_arith import FormatError, NumberFormat, solve
from hf_arith.cli import main
from hf_arith.evaluation.held_out import TINY_ADDER_EDGE_CASES, tiny_adder_cases
from hf_arith.evaluation.model_summary import parameter_counts
from hf_arith.models import abacus_position_ids, minimal_core
from hf_arith.publishing.adderboard import write_submission
from hf_arith.runtime.decoding import greedy_decode
from hf_arith.runtime.loading import load_checkpoint
from tests.test_minimal_model import FMT10, SPLIT, make

RANDOM_PAIRS = 300  # of the protocol's 10,000 (the exported file answers ~100 pairs a second here)
METADATA_KEYS = {"name", "author", "params", "architecture", "tricks"}  # what verify.py prints

# A fresh Python in which hf_arith and transformers cannot be imported runs the file as verify.py
# does (importlib, build_model once, add per pair) and prints the answers as JSON.
PROTOCOL = textwrap.dedent("""
    import importlib.abc, importlib.util, json, random, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("hf_arith", "transformers"):
                raise ImportError(f"{name} is blocked in this process")

    sys.meta_path.insert(0, Block())
    for blocked in ("hf_arith", "transformers"):
        try:
            __import__(blocked)
        except ImportError:
            pass
        else:
            raise SystemExit(f"{blocked} was importable")

    path, edge_cases, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model, metadata = module.build_model()
    rng = random.Random(2025)
    cases = [tuple(c) for c in edge_cases] + [(rng.randint(0, 9_999_999_999), rng.randint(0, 9_999_999_999))
                                              for _ in range(n)]
    answers = []
    for a, b in cases:
        try:
            answers.append(module.add(model, a, b))
        except Exception as err:
            answers.append(f"ERROR: {err}")
    import torch
    logits = model(torch.tensor([module.prompt(1, 2)]))
    print(json.dumps({
        "cases": cases, "answers": answers, "metadata": metadata,
        "is_module": isinstance(model, torch.nn.Module), "logits_shape": list(logits.shape),
        "parameters": sum(p.numel() for p in model.parameters()),
        "imported": sorted(m for m in sys.modules if m.split(".")[0] in ("hf_arith", "transformers")),
    }))
""")


def run_cli(*argv) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([str(a) for a in argv])
    return code, out.getvalue()


@pytest.fixture(scope="module")
def bundled():
    return load_checkpoint("minimal-add10")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """minimal-add10 written by the CLI over an existing file (--overwrite); (path, stdout)."""
    path = tmp_path_factory.mktemp("adderboard") / "submission_720p.py"
    path.write_text("old\n")
    code, out = run_cli("adderboard", "minimal-add10", "--output", path, "--overwrite", "--author", "tester")
    assert code == 0, out
    return path, out


def import_file(path):
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_prints_where_the_file_went_its_parameters_and_how_to_verify(exported):
    path, out = exported
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert str(path) in lines[0] and "720 unique parameters" in lines[0]
    assert lines[1].endswith(f"python verify.py {path}")
    source = path.read_text()
    assert "import transformers" not in source and "hf_arith import" not in source
    imports = {line.split()[1] for line in source.splitlines() if line.startswith(("import ", "from "))}
    assert {name for name in imports if not name.startswith("torch")} <= set(sys.stdlib_module_names), imports
    assert inspect.getsource(minimal_core).split('"""', 2)[2].replace(
        "from .abacus_positions import abacus_position_ids\n", "") in source.replace(
        inspect.getsource(abacus_position_ids), "")  # the model's own forward pass, verbatim


def test_submission_runs_without_hf_arith_and_answers_as_solve_does(exported, bundled):
    path, _ = exported
    model, tokenizer = bundled
    result = subprocess.run(
        [sys.executable, "-c", PROTOCOL, str(path), json.dumps(TINY_ADDER_EDGE_CASES), str(RANDOM_PAIRS)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["imported"] == []
    cases = [tuple(c) for c in report["cases"]]
    assert cases == tiny_adder_cases(2025, RANDOM_PAIRS)  # the protocol's first pairs, in its order
    expected = solve(model, tokenizer, [f"{a}+{b}" for a, b in cases])
    assert [str(x) for x in report["answers"]] == expected  # 100 % agreement with hf_arith.solve
    assert report["answers"] == [a + b for a, b in cases]  # and with Python's a+b
    assert report["is_module"] and report["logits_shape"] == [1, 22, model.config.vocab_size]
    metadata = report["metadata"]
    assert METADATA_KEYS <= set(metadata) and metadata["author"] == "tester"
    assert metadata["params"] == model.num_parameters() == report["parameters"] == 720
    assert isinstance(metadata["tricks"], list) and all(isinstance(t, str) for t in metadata["tricks"])
    assert metadata["architecture"].startswith("1L decoder, d=8, 2h/1kv, hd=4, ff=16, RoPE θ=3")


def test_the_submission_runs_on_one_torch_thread(exported, monkeypatch):
    threads = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    import_file(exported[0]).build_model()
    assert threads == [1]


def test_exported_weights_are_the_checkpoints_bit_for_bit(exported, bundled):
    model, _ = bundled
    mine, _ = import_file(exported[0]).build_model()
    theirs = dict(model.named_parameters())
    assert dict(mine.named_parameters()).keys() == theirs.keys()
    for name, p in mine.named_parameters():
        assert torch.equal(p.view(torch.int32), theirs[name].view(torch.int32)), name


# Variable-width operands, most significant digit first, answers ended by <eos>.
FMT_PLAIN = NumberFormat(reverse_operands=False, reverse_answer=False, end_token=True)
# The table of shared/notes/tiny-adder.md: d=3, 1 head of 4, FFN 2, RoPE, gated MLP, tied head.
TINY = dict(hidden_size=3, num_attention_heads=1, num_key_value_heads=1, head_dim=4, intermediate_size=2)


def random_model(fmt=FMT10, seed=0, **overrides):
    """A minimal-family model with spread-out random weights (so greedy answers vary) and its tokenizer."""
    return make(seed, fmt, **{"max_position_embeddings": 40, **overrides})


def test_parameters_are_counted_as_adderboard_counts_them(tmp_path):
    # The rule: every tensor counts once however many places use it (tied head, K = V, O = Q^T),
    # a circular-arc digit table counts its 3 parameters, and the fixed rotary tables count nothing.
    model, tok = random_model(**TINY, rope_theta=3.0, tie_kv=True, tie_qo=True, digit_embedding="circular_arc",
                              qk_norm=False)
    d, v, hd, ff = 3, 14, 4, 2
    expected = ((v - 10) * d + 3  # non-digit rows + arc (radius, start, step); the head reuses them
                + d * hd + d * hd  # Q, K (V = K, O = Q^T)
                + 3 * d * ff  # gate, up, down
                + 3 * d)  # input, post-attention and final RMSNorm scales
    assert expected == 66  # the table in shared/notes/tiny-adder.md
    assert model.num_parameters() == parameter_counts(model)["unique"] == expected
    assert {n for n, _ in model.named_buffers()} == {"model.rotary_emb.cos_table", "model.rotary_emb.sin_table"}
    path = write_submission(model, tok, tmp_path / "s.py", force=True)
    module = import_file(path)
    exported, metadata = module.build_model()
    assert metadata["params"] == sum(len(values) for _, values in module.WEIGHTS.values()) == expected
    assert sum(p.numel() for p in exported.parameters()) == expected
    assert not any(b.requires_grad for b in exported.buffers())  # rotary tables: buffers, not parameters
    assert {"tied K=V", "tied O=Q^T"} <= set(metadata["tricks"])
    assert any("circular arc" in t for t in metadata["tricks"])


@pytest.mark.parametrize("flags, saving", [
    ({"special_embedding": "arc"}, (14 - 10) * 3),  # '+', '=', <pad>, <eos> continue the arc: no rows
    ({"special_embedding": "arc", "qk_norm": True}, (14 - 10) * 3 - 2 * 4),  # adds a q and a k norm
    ({"special_embedding": "arc", "qk_norm": True, "share_qk_norm": True}, (14 - 10) * 3 - 4),  # one of them
    ({"special_embedding": "arc", "norm_sharing": "block"}, (14 - 10) * 3 + 3),  # post-attention norm = input norm
    ({"special_embedding": "arc", "norm_sharing": "all"}, (14 - 10) * 3 + 6),  # final norm too
])
def test_each_sharing_flag_saves_what_adderboard_counts(tmp_path, flags, saving):
    # The rule for tied and fixed tensors: a tensor used in several places (a shared norm, the arc that
    # embeds every token and is also the output head) counts once; computed tables count nothing.
    base = dict(**TINY, rope_theta=3.0, tie_kv=True, tie_qo=True, digit_embedding="circular_arc", qk_norm=False)
    reference, _ = random_model(**base)
    model, tok = random_model(**{**base, **flags})
    assert reference.num_parameters() == 66
    assert model.num_parameters() == parameter_counts(model)["unique"] == 66 - saving
    assert model.num_parameters() == sum(p.numel() for p in set(model.parameters()))
    path = write_submission(model, tok, tmp_path / "s.py", force=True)  # checks the edge cases against solve
    module = import_file(path)
    exported, metadata = module.build_model()
    assert metadata["params"] == sum(p.numel() for p in exported.parameters()) == 66 - saving
    ids = torch.tensor([module.prompt(1234567890, 987)])
    torch.testing.assert_close(exported(ids), model(ids).logits, rtol=0, atol=1e-6)


def test_the_arc_embeds_every_token_distinctly_and_the_head_reads_it(tmp_path):
    model, _ = random_model(**TINY, digit_embedding="circular_arc", special_embedding="arc",
                            arc_init=[2.5, -1.2, 0.29])
    table = model.model.embed_tokens.table()
    assert table.shape == (14, 3) and model.model.embed_tokens.weight is None
    assert torch.cdist(table, table).add(torch.eye(14)).min() > 0  # no two tokens share a point
    fresh = type(model)(model.config)
    torch.testing.assert_close(fresh.model.embed_tokens.arc_params, torch.tensor([2.5, -1.2, 0.29]))
    model.save_pretrained(tmp_path)
    reloaded = type(model).from_pretrained(tmp_path)
    ids = torch.tensor([[1, 2, 10, 3, 11]])
    torch.testing.assert_close(reloaded(ids).logits, model(ids).logits)


def test_digit0_embeds_every_delimiter_as_digit_zero_at_no_cost(tmp_path):
    model, _ = random_model(**TINY, digit_embedding="circular_arc", special_embedding="digit0")
    arc, _ = random_model(**TINY, digit_embedding="circular_arc", special_embedding="arc")
    table = model.model.embed_tokens.table()
    assert table.shape == (14, 3) and model.model.embed_tokens.weight is None
    assert model.num_parameters() == arc.num_parameters()
    assert torch.equal(table[10:], table[:1].expand(4, -1))  # '+', '=', <pad>, <eos> all at digit 0
    assert torch.cdist(table[:10], table[:10]).add(torch.eye(10)).min() > 0  # the digits stay apart
    model.save_pretrained(tmp_path)
    reloaded = type(model).from_pretrained(tmp_path)
    ids = torch.tensor([[1, 2, 10, 3, 11]])
    torch.testing.assert_close(reloaded(ids).logits, model(ids).logits)


@pytest.mark.parametrize("fmt, flags", [
    (FMT10, {"tie_kv": True, "tie_qo": True, "digit_embedding": "circular_arc"}),
    (FMT10, {"tie_kv": True, "tie_qo": True, "digit_embedding": "circular_arc", "special_embedding": "arc",
             "qk_norm": True, "share_qk_norm": True, "norm_sharing": "all"}),
    (FMT10, {"digit_embedding": "circular_arc", "special_embedding": "arc", "digit_logits_only": True}),
    (FMT10, {"num_hidden_layers": 2, "norm_sharing": "block", "qk_norm": True, "share_qk_norm": True}),
    (FMT10, {"projection_rank": 2, "tie_qo": True, "num_attention_heads": 2, "hidden_size": 6, "head_dim": 4}),
    (FMT10, {"tie_word_embeddings": False, "num_hidden_layers": 2, "attention_bias": True, "mlp_bias": True}),
    (FMT_PLAIN, {"position_embedding": "learned", "norm_type": "layernorm", "mlp_type": "plain", "hidden_act": "gelu"}),
    (FMT_PLAIN, {"norm_type": "none", "position_embedding": "none", "hidden_act": "relu"}),
    (FMT10, SPLIT),
    (FMT_PLAIN, {**SPLIT, "tie_down_head": False, "tie_qk_rotation": False, "o_proj_rank": 0,
                 "special_embedding": "learned", "num_hidden_layers": 2}),
    (FMT10, {**SPLIT, "digit_embedding": "learned", "special_embedding": "learned", "projection_rank": 1,
             "norm_sharing": "block", "learn_spiral": True}),
    (FMT10, {**SPLIT, "head_dim": 5, "learn_spiral": True}),  # an odd head dim: its last dimension is not turned
    (FMT10, {**SPLIT, "special_embedding": "digit0", "learn_spiral": True}),
    (FMT10, {**SPLIT, "split_paths": "tokens", "answer_start_position": "spiral", "o_proj_rank": 0}),
    (FMT10, {**SPLIT, "split_paths": "tokens_and_slope", "query_positions": "circle"}),
    (FMT10, {**SPLIT, "split_paths": "tokens_and_slope", "norm_weights": "paths", "split_values": "tokens",
             "answer_start_position": "circle", "head_dim": 3}),
])
def test_every_option_exports_with_solves_answers(tmp_path, fmt, flags):
    model, tok = random_model(fmt, **flags)
    # write_submission checks the edge cases itself; more problems, of every length, here.
    path = write_submission(model, tok, tmp_path / "s.py", force=True)
    module = import_file(path)
    exported, _ = module.build_model()
    rng = random.Random(0)
    cases = [(rng.randint(0, 10 ** rng.randint(1, 10) - 1), rng.randint(0, 10 ** rng.randint(1, 10) - 1))
             for _ in range(12)]
    # One problem per batch, as add() answers them (a batch shares its longest problem's answer budget).
    expected = solve(model, tok, [f"{a}+{b}" for a, b in cases], batch_size=1, warn_beyond_training=False)
    for (a, b), answer in zip(cases, expected):
        ids = tok(f"{a}+{b}")["input_ids"]
        assert module.prompt(a, b) == ids  # the tokenizer's number format
        budget = tok.answer_budget([f"{a}+{b}"])
        assert module.answer_budget(a, b) == budget
        theirs = greedy_decode(model, torch.tensor([ids]), None, budget, eos_token_id=tok.eos_token_id)[0].tolist()
        mine = module.generate(exported, ids, budget)
        assert mine == theirs[:len(mine)] and (len(mine) == len(theirs) or mine[-1] == tok.eos_token_id), (a, b)
        try:
            got = str(module.add(exported, a, b))
        except ValueError:
            got = None
        assert got == answer, (a, b)


def test_refuses_formats_outside_the_protocol(tmp_path):
    for fmt in (NumberFormat(operand_width=5, answer_width=6, end_token=False), NumberFormat(task="sub"),
                NumberFormat(base=16)):
        model, tok = random_model(fmt)
        with pytest.raises(FormatError, match="two operands of up to 10 decimal digits") as err:
            write_submission(model, tok, tmp_path / "s.py")
        assert "\n" not in str(err.value)
    model, tok = random_model(FMT_PLAIN, max_position_embeddings=30)  # 10-digit problems need 34 positions
    with pytest.raises(FormatError, match="need 34 positions"):
        write_submission(model, tok, tmp_path / "s.py")
    assert not (tmp_path / "s.py").exists()


def test_refuses_other_dtypes_and_existing_files(tmp_path):
    model, tok = random_model(tie_kv=True)
    with pytest.raises(ValueError, match="weights must be float32, got torch.bfloat16"):
        write_submission(model.to(torch.bfloat16), tok, tmp_path / "s.py")
    (tmp_path / "s.py").write_text("mine\n")
    with pytest.raises(FileExistsError):
        write_submission(model.float(), tok, tmp_path / "s.py")
    assert (tmp_path / "s.py").read_text() == "mine\n"


def test_cli_refuses_other_families(tmp_path, capsys):
    message = fails(capsys, "adderboard", "abacus-gpt2-add", "--output", tmp_path / "s.py")
    assert "only the minimal family" in message and "hf_arith_abacus_gpt2" in message
    assert not (tmp_path / "s.py").exists()


def test_cli_refuses_an_existing_file_without_overwrite(tmp_path, capsys):
    target = tmp_path / "s.py"
    target.write_text("mine\n")
    message = fails(capsys, "adderboard", "minimal-add10", "--output", target)
    assert message == f"--output {target}: exists; pass --overwrite to replace it"
    assert target.read_text() == "mine\n"
    (tmp_path / "folder.py").mkdir()  # a name ending in .py is a file; any other --output is a submission folder
    assert "is a folder, not a file" in fails(capsys, "adderboard", "minimal-add10", "--output", tmp_path / "folder.py")
    message = fails(capsys, "adderboard", "minimal-add10", "--output", tmp_path)
    assert message == f"--output {tmp_path}: is not empty; pass --overwrite to replace an export there"


def test_cli_refuses_an_unwritable_folder(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    message = fails(capsys, "adderboard", "minimal-add10", "--output", blocker / "s.py")
    assert message.startswith(f"--output {blocker}: cannot write there")
    if os.geteuid() != 0:  # root writes into read-only folders
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        message = fails(capsys, "adderboard", "minimal-add10", "--output", locked / "s.py")
        assert message.startswith(f"--output {locked}: cannot write there")


def test_a_model_that_fails_the_protocol_is_refused_unless_forced(tmp_path, capsys):
    from hf_arith.publishing.adderboard import ProtocolFailure

    model, tok = random_model(**TINY, digit_embedding="circular_arc", special_embedding="arc")
    with pytest.raises(ProtocolFailure, match=r"protocol problems right \(\d+\.\d\d %\), below the 99 %") as err:
        write_submission(model, tok, tmp_path / "s.py")
    assert "\n" not in str(err.value) and not (tmp_path / "s.py").exists()
    folder = tmp_path / "random"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    capsys.readouterr()  # the save's progress bar
    message = fails(capsys, "adderboard", folder, "--output", tmp_path / "s.py")
    assert "below the 99 % a submission needs" in message and "--force" in message
    assert not (tmp_path / "s.py").exists()
    code, out = run_cli("adderboard", folder, "--output", tmp_path / "s.py", "--force")
    assert code == 0 and (tmp_path / "s.py").exists(), out
    assert import_file(tmp_path / "s.py").build_model()[1]["params"] == model.num_parameters()
