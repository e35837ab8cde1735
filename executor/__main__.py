from toolexec.entry import program

raise SystemExit(program())
