from rankstudy.cli import main

raise SystemExit(main())
