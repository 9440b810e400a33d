"""The command line's contract for user errors, checked the same way by every test module."""

from hf_arith.cli import main


def fails(capsys, *argv) -> str:
    """Run the CLI; require exit status 2 and exactly one `hf-arith: error: ...` line (no traceback);
    return the message after that prefix."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hf-arith: error: "), err
    return lines[0][len("hf-arith: error: "):]
