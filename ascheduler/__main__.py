from ascheduler.cli import main

raise SystemExit(main())
