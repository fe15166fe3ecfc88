"""``python -m memstack.cli``: the ``memstack`` command."""

from memstack.cli import main

raise SystemExit(main())
