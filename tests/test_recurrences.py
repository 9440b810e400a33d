"""`num_recurrences` reaches a looped model through every public entry point and changes its output
exactly as calling the model directly does: `solve`, the length grid and `hf-arith eval --loops`
(the Space's slider: test_space.py). The reference is the bundled looped-add-window run through
transformers' own `generate(..., num_recurrences=n)`, on problems whose answers depend on n.
"""

from __future__ import annotations

import json

import pytest
import torch

from hf_arith.cli import main
from hf_arith.data.problems import ProblemSpec, held_out_problems
from hf_arith.evaluation.grid import length_grid
from hf_arith.runtime.limits import answer_budget
from hf_arith.runtime.loading import load_checkpoint
from hf_arith.runtime.solving import solve

LOOPED = "looped-add-window"
# Held-out problems with 101-115-digit operands (beyond the 100 digits where its answers are measured
# exact) on which looped-add-window's answers at 1, 2 (its default) and 4 recurrences are not all the
# same: found by decoding 100 such problems at each count.
LOOP_SENSITIVE = [
    "3059839107848227972694387307803432276588961047105054456265950592841304345364532832894593286937243318766205892664"
    "+282892028791823824539462232118834629907916455420817064809933895075669382082072096547146971171144468697",
    "862082049914442459963324684159961577620211186086933438589433844411350569015595874849814445911251181832022"
    "+23316761340983962225821611868771574952237681907789700876386544094411084528137368248106724603590555406461077238892",
    "5827066153735674927162207511861872113912679610468173057804135085047562406337637771824903551822763094632385303219643"
    "+26042434593618414371115576487024342868143323066850333478120480222478091776389247890798989289572695215031",
    "16867488336078809922828594651424757837352971634539997255199666531112546433356630813772039974970855187912619"
    "+4219934189493711846019199356050949474344378268385463571261650691859187593054613809722527222976043094549187343514",
    "81008491475108779027993100550884587996577253160233866353411424225062442592399229258425828826615057890634472093"
    "+53405508554673008688151396875048554420716886291556129919753662458180567664482869088827670148828212613522605208193",
]


@pytest.fixture(scope="module")
def looped():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield load_checkpoint(LOOPED)
    torch.set_num_threads(before)


def direct_answers(model, tok, texts: list[str], n: int) -> list[str | None]:
    """The answers of `model.generate` with n recurrences: transformers' decoding, not the package's."""
    enc = tok(texts, padding=True, return_tensors="pt")
    out = model.generate(**enc, max_new_tokens=answer_budget(tok, texts), do_sample=False,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, num_recurrences=n)
    return tok.decode_answers(out[:, enc["input_ids"].shape[1]:])


def test_the_problems_depend_on_the_loop_count(looped):
    model, tok = looped
    answers = {n: direct_answers(model, tok, LOOP_SENSITIVE, n) for n in (1, model.config.num_recurrences, 4)}
    assert answers[1] != answers[model.config.num_recurrences] != answers[4]


@pytest.mark.parametrize("n", [1, 4])
def test_solve_passes_num_recurrences_to_the_model(looped, n):
    model, tok = looped
    assert solve(model, tok, LOOP_SENSITIVE, model_kwargs={"num_recurrences": n}) == \
        direct_answers(model, tok, LOOP_SENSITIVE, n)


def test_the_length_grid_runs_the_model_with_the_loop_count(looped):
    model, tok = looped
    predictions = {}
    for n in (1, 4):
        # Seed 1 draws problems on which 1 and 4 recurrences answer differently (asserted below).
        result = length_grid(model, tok, (104, 107), samples_per_cell=2, seed=1, keep_problems=True,
                             model_kwargs={"num_recurrences": n})
        texts = [p["problem"] for p in result["problems"]]
        predictions[n] = [p["prediction"] for p in result["problems"]]
        assert predictions[n] == direct_answers(model, tok, texts, n)
        assert result["model_kwargs"] == {"num_recurrences": n}
    assert predictions[1] != predictions[4]


def test_eval_loops_scores_each_loop_count_as_the_model_answers(looped, tmp_path, capsys):
    model, tok = looped
    out = tmp_path / "loops"
    argv = ["eval", LOOPED, "--samples", "40", "--min-digits", "110", "--max-digits", "120", "--seed", "3",
            "--loops", "1,4,8", "--threads", "1", "--output-dir", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    curve = json.loads((out / "loops.json").read_text())
    # Without --grid the curve is scored on the held-out sample of the same options.
    held = held_out_problems(ProblemSpec(min_digits=110, max_digits=120), 40, seed=3)
    texts, answers = held.to_text(), held.answer_text()
    expected = [sum(p == a for p, a in zip(direct_answers(model, tok, texts, n), answers)) / len(answers)
                for n in (1, 4, 8)]
    assert len(set(expected)) == 3  # each loop count scores differently on these problems
    assert curve["loops"] == [1, 4, 8] and curve["exact_match"] == expected
