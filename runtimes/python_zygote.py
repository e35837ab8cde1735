"""toolexec's warm Python bootstrap: ``python python_zygote.py TOOL_PATH [FUNCTION]`` (see ``_python_zygote.py``)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # even under -P / PYTHONSAFEPATH
import _python_zygote

del sys.path[0]  # the tool sees the sys.path a script in this folder has
_python_zygote.serve()
