"""The README's Python example runs as written (with its directory moved into a
temporary one), as `cargo test` runs the README's Rust blocks."""

import os
import re

README = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "README.md")


def test_readme_python_blocks_run(tmp_path, capsys):
    with open(README, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert blocks, "README.md has no python block"
    for code in blocks:
        code = code.replace('"/tmp/silt-py-demo"', repr(str(tmp_path / "demo")))
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert "grace" in capsys.readouterr().out
