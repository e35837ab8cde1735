from toolexec.cli import main

raise SystemExit(main())
