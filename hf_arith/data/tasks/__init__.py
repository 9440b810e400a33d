"""Tasks as objects: one module per task (add, sub, mul, sort), each a `Task` subclass registered by name.

    from hf_arith.data.tasks import Task, register_task, get_task
    register_task(MyTask())        # a new task: problems, answers, written forms, in one class
    unregister_task("my_task")      # and gone again
    get_task("add").title          # 'addition'; an unknown name is a one-line FormatError

The registry itself lives in `formatting` (the number format asks it for a format's task, also in a
saved model's remote code); the built-in tasks register when this package is imported.
"""

from __future__ import annotations

from ..formatting import get_task, register_task, task_names, unregister_task
from . import add, mul, sort, sub  # noqa: F401  (the built-in tasks register themselves)
from .base import Task


def tasks_with_kind(kind: str) -> list[Task]:
    """The registered tasks whose data may draw the hard problem kind `kind`."""
    return [get_task(name) for name in task_names() if kind in get_task(name).hard_kinds]


__all__ = ["Task", "get_task", "register_task", "task_names", "tasks_with_kind", "unregister_task"]
