"""toolexec's Python bootstrap: ``python python_bootstrap.py TOOL_PATH [FUNCTION]``, the call's request on stdin.

Its work is in ``_python_runner.py`` beside it, imported so that it loads from the bytecode compiled when toolexec
was installed: a script is compiled from source at every start (~2 ms of a ~10 ms Python start for the runner).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # even under -P / PYTHONSAFEPATH
import _python_runner

del sys.path[0]  # the tool sees the sys.path a script in this folder has
_python_runner.start()
