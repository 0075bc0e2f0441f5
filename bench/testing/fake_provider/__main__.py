"""``python -m bench.testing.fake_provider``: serve the fake provider (see bench.testing.fake_provider.serve)."""

import sys

from bench.testing.fake_provider.serve import main

sys.exit(main())
