"""Build-time only: the package description is README.md with absolute links.

README.md links to docs/ relatively, which works in a checkout and on the repository's
site but not on a package index. Everything else about the package is in pyproject.toml.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
# [text](target) and ![alt](target) whose target is a path inside the repository.
RELATIVE_LINK = re.compile(r"(!?)\[([^\]]*)\]\((?![a-z][a-z0-9+.-]*:|#|/)([^)\s]+)\)")


def package_description() -> str:
    """README.md with every relative link pointing at the file in the Source repository
    (images at their raw bytes, so the index can show them)."""
    source = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Source"].rstrip("/")

    def absolute(match: re.Match[str]) -> str:
        bang, text, target = match.groups()
        return f"{bang}[{text}]({source}/{'raw' if bang else 'blob'}/main/{target})"

    return RELATIVE_LINK.sub(absolute, (ROOT / "README.md").read_text(encoding="utf-8"))


setup(long_description=package_description(), long_description_content_type="text/markdown")
