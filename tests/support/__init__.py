"""Test support shared by several test files (small real datasets, test-only predictors).

tests/ is on ``sys.path`` under pytest (its conftest.py has no package above it), so test files
import this as ``support``."""
