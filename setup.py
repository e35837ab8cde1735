"""Only what pyproject.toml cannot say: bundle the embedded defaults into the wheel, and make
README's links work on the package page.

The shipped ``config.yaml`` and ``functions/tools/`` live at the top of the repository
(the design card's layout); installed, they are ``toolexec/_default/``, so a plain
``pip install`` works from any directory. An editable install reads them in place.

README.md links the docs relatively (so they work in a checkout and on GitHub); the
package page has no docs/ beside it, so the long description links them on GitHub.
"""

import re
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
REPOSITORY = "https://github.com/toolexec/toolexec"  # also in pyproject.toml's [project.urls]
# A Markdown link's target that names no scheme (https:, mailto:): a file in the repository, or a heading.
RELATIVE_LINK = re.compile(r"\]\((?![a-zA-Z][a-zA-Z0-9+.-]*:)([^)\s]+)\)")


def long_description() -> str:
    """README.md with every relative link made absolute: files on GitHub's main branch, headings on the README there."""

    def absolute(link: re.Match[str]) -> str:
        target = link.group(1)
        return f"]({REPOSITORY}{target})" if target.startswith("#") else f"]({REPOSITORY}/blob/main/{target})"

    return RELATIVE_LINK.sub(absolute, (ROOT / "README.md").read_text(encoding="utf-8"))


class BuildWithDefaults(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "toolexec" / "_default"
        shutil.rmtree(target, ignore_errors=True)
        (target / "functions" / "tools").mkdir(parents=True)
        shutil.copy2(ROOT / "config.yaml", target / "config.yaml")
        for tool in sorted((ROOT / "functions" / "tools").iterdir()):
            if tool.is_file():
                shutil.copy2(tool, target / "functions" / "tools" / tool.name)  # keeps the executable bit


setup(
    cmdclass={"build_py": BuildWithDefaults},
    long_description=long_description(),
    long_description_content_type="text/markdown",
)
