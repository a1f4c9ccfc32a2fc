"""Tests of commlir_torch (run by `make test`: python -m unittest discover -s python/tests)."""
