from toolexec.cli import program

raise SystemExit(program())
