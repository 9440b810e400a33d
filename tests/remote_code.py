"""Loading a saved checkpoint as Hub remote code, in a fresh Python that cannot import hf_arith.

When the package is installed its classes win over the copies saved next to the weights, so the
remote-code tests run the loading in a subprocess with hf_arith blocked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

BLOCK_HF_ARITH = textwrap.dedent("""
    import importlib.abc, sys
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "hf_arith" or name.startswith("hf_arith."):
                raise ImportError("hf_arith is blocked in this process")
    sys.meta_path.insert(0, Block())
    try:
        import hf_arith
        raise SystemExit("hf_arith was importable")
    except ImportError:
        pass
""")


def run_remote_code(folder, problems: list[str], body: str, hf_home, **env: str) -> dict:
    """Load `folder` with trust_remote_code where hf_arith cannot be imported, then run `body`.

    `body` sees `model`, `tok` (both loaded from the remote code, which is checked) and `enc`, the
    tokenized `problems` (padded tensors); it prints a JSON line last, which is returned. The run
    is offline, with `hf_home` as HF_HOME and `env` added to the environment.
    """
    script = BLOCK_HF_ARITH + textwrap.dedent(f"""
        import json
        from transformers import AutoModelForCausalLM, AutoTokenizer
        model = AutoModelForCausalLM.from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
        tok = AutoTokenizer.from_pretrained({str(folder)!r}, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        enc = tok({list(problems)!r}, padding=True, return_tensors="pt")
    """) + textwrap.dedent(body)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(hf_home), **env}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
