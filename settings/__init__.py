"""The bottom layer every part of mlaperf shares: standard library only, importing no other package of the
project, so ``db``, ``regressions``, ``dashboard``, ``mlaperf`` and asv's ``benchmarks`` may all import it
(nothing in it points back up; ``tests/test_architecture.py`` checks).

- ``settings.env``: every ``MLAPERF_*`` variable a product module reads, its meaning and default, and its
  one reader (the store URL among them);
- ``settings.exits``: the exit status of every command and the one function that maps a command's end to it;
- ``settings.args``: the command-line arguments several commands share, each defined once (asv's
  ``common_args``);
- ``settings.gpu``: the GPU identity recorded with every run, datasheet peaks and measured ceilings;
- ``settings.pr_contract``: the names the pull-request workflow's jobs share (status contexts, label).

Module top levels import the standard library only (torch is imported inside the functions that need it):
asv imports ``benchmarks/`` at discovery, which must stay light.
"""
