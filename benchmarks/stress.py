"""Call-engine stress figures: batch concurrency and memory under a 2 GB writer.

Run with ``.venv/bin/python benchmarks/stress.py``. Prints measurements only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SLEEPER = '#!/usr/bin/env bash\n# @describe Sleep half a second.\nmain() {\n    sleep 0.5\n    echo done >>"$LLM_OUTPUT"\n}\n'
FLOOD = "#!/usr/bin/env bash\n# @describe Write 2 GiB to stdout.\nmain() {\n    head -c 2147483648 /dev/zero | tr '\\\\0' x\n}\n"
MEMORY_PROBE = """
import json, resource, sys
from toolexec import Executor
executor = Executor(sys.argv[1])
executor.build()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = executor.call("flood", {})
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
size = __import__("os").path.getsize(result.output_file) if result.output_file else 0
print(json.dumps({"before_kib": before, "after_kib": after, "kept_file_bytes": size, "output_chars": len(result.output), "ok": result.ok}))
if result.output_file:
    __import__("os").unlink(result.output_file)
"""


def main() -> None:
    from toolexec import Executor
    from toolexec.records import ToolCall

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tools = root / "functions" / "tools"
        tools.mkdir(parents=True)
        (tools / "sleeper.sh").write_text(SLEEPER)
        (tools / "flood.sh").write_text(FLOOD)
        print("batch of 20 tools that each sleep 0.5 s")
        for parallel in (1, 4, 8, 20):
            config = root / f"config-{parallel}.yaml"
            config.write_text(f"visible_tools: [sleeper.sh, flood.sh]\nmax_parallel: {parallel}\nmax_output_bytes: 65536\n")
            with Executor(config) as executor:
                executor.build()
                calls = [ToolCall(name="sleeper", arguments={}, call_id=str(n)) for n in range(20)]
                start = time.perf_counter()
                results = executor.call_many(calls)
                elapsed = time.perf_counter() - start
            ideal = -(-20 // parallel) * 0.5
            ok = sum(r.ok for r in results)
            print(
                f"  max_parallel={parallel:2}: {elapsed:5.2f} s  (ideal {ideal:4.1f} s, ratio {elapsed / ideal:4.2f}, {ok}/20 ok)"
            )
        print("\nexecutor peak RSS while a tool writes 2 GiB to stdout (max_output_bytes 64 KiB)")
        probe = subprocess.run(
            [sys.executable, "-c", MEMORY_PROBE, str(root / "config-4.yaml")], capture_output=True, text=True, check=True
        )
        figures = json.loads(probe.stdout)
        print(
            f"  peak RSS before the call {figures['before_kib'] / 1024:.1f} MiB, after {figures['after_kib'] / 1024:.1f} MiB; "
            f"result text {figures['output_chars']} chars; full output kept on disk {figures['kept_file_bytes'] / 2**30:.2f} GiB"
        )


if __name__ == "__main__":
    main()
