"""Tests that run verl's own code (see conftest.py); a package so its conftest does not shadow the parent's."""
