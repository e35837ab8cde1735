"""toolexec's Python bootstrap: ``python python_bootstrap.py TOOL_PATH [FUNCTION]``, the call's request on stdin.

Its work is in ``_python_runner.py`` beside it, imported so that it loads from the bytecode compiled when toolexec
was installed: a script is compiled from source at every start (~2 ms of a ~10 ms Python start for the runner).

Started early by a one-shot run (``TOOLEXEC_EARLY`` set, a socket on stdin: :mod:`toolexec.early`), it first waits
for its call (``_spare_launcher.receive``: the call's stdin, progress pipe and whole environment) and becomes it,
before the runner, which reads the call's variables, is loaded.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # even under -P / PYTHONSAFEPATH
if os.environ.get("TOOLEXEC_EARLY") == "1":
    _loaded = set(sys.modules)
    import _spare_launcher

    _environment = _spare_launcher.receive()[1]
    os.environb.clear()  # (os.environ too: the call's environment replaces the spare's, through putenv)
    os.environb.update(_environment)
    for _name in set(sys.modules) - _loaded:  # the tool finds loaded what a cold start has loaded, no more
        del sys.modules[_name]
    del _loaded, _spare_launcher, _environment, _name
import _python_runner

del sys.path[0]  # the tool sees the sys.path a script in this folder has
_python_runner.start()
