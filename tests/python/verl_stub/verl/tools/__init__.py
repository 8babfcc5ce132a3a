"""Stand-in for ``verl.tools`` (see ``verl_stub/verl/__init__.py``)."""
