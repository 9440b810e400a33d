"""Answers agreed on by several views of one problem, shared by `solve` and the `arithmetic` pipeline.

A task may write one problem in several equivalent ways (`Task.views`: a sort list relabelled, its
equal values kept in order; a commutative problem with its operands swapped). A model with
`config.answer_views` > 1 answers each view, each answer is read back as the answer to the problem as
given (`Task.answer_from_view`), and the answer most views give wins; between answers as many views
give, the surer one (so two views that disagree are settled by their confidences, not by which came
first). Its confidence is the share of views that gave it times the lowest confidence among them: one
dissenting view of five puts it at most at 0.8, below the 0.9 under which answers are marked unsure,
so a wrong answer stays silent only when every view gives it, each at least at 0.9.

The model writes every answer token of every view; this module only relabels and counts. Each
problem's views come from a generator seeded by the problem's text, so a problem gets the same
answer alone or in a batch. It travels with the pipeline as Hub remote code, so it imports only
numpy and the standard library.
"""

from __future__ import annotations

import zlib

import numpy as np


def problem_views(task, fmt, problems: list[str], count: int) -> tuple[list[str], list[list[int]], list[int]]:
    """(every view's text, its operand order, and each problem's number of views), problems in order.
    `problems` are valid problems of `task` in `fmt` (checked by the caller)."""
    texts, orders, counts = [], [], []
    for problem in problems:
        operands = task.parse(problem, fmt)
        rng = np.random.default_rng(zlib.crc32(problem.encode()))
        views = task.views(operands, count, rng)
        texts += [task.problem_text([operands[i] for i in order]) for order in views]
        orders += views
        counts.append(len(views))
    return texts, orders, counts


def agreed_answers(task, answers: list, confidences: list[float], orders: list[list[int]],
                   counts: list[int]) -> list[tuple]:
    """Per problem: (the answer most of its views gave, its confidence, the index of the first view that
    gave it, views that agree, views). Between answers with as many votes, the one whose lowest
    confidence is highest wins, then the one an earlier view gave (the problem as given first); a
    problem none of whose views gave a well-formed answer gets None at its first view's confidence."""
    results, start = [], 0
    for count in counts:
        votes: dict[str, list[int]] = {}  # each answer read back -> the views (indices into answers) giving it
        for i in range(start, start + count):
            answer = task.answer_from_view(answers[i], orders[i])
            if answer is not None:
                votes.setdefault(answer, []).append(i)
        if not votes:
            results.append((None, confidences[start], start, 0, count))
        else:
            # most votes; among answers tied on votes, the one whose least sure view is surest (of two
            # views that disagree, the surer), then the one an earlier view gave
            surest = {answer: min(confidences[i] for i in views) for answer, views in votes.items()}
            best = max(votes, key=lambda a: (len(votes[a]), surest[a], -votes[a][0]))
            agreeing = votes[best]
            confidence = len(agreeing) / count * min(confidences[i] for i in agreeing)
            results.append((best, confidence, agreeing[0], len(agreeing), count))
        start += count
    return results


__all__ = ["agreed_answers", "problem_views"]
