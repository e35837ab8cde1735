"""Only what pyproject.toml cannot say: bundle the embedded defaults into the wheel.

The shipped ``config.yaml`` and ``functions/tools/`` live at the top of the repository
(the design card's layout); installed, they are ``toolexec/_default/``, so a plain
``pip install`` works from any directory. An editable install reads them in place.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


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


setup(cmdclass={"build_py": BuildWithDefaults})
