"""The application layer: every face (commands, notebook, web, in-script API) calls these.

- :mod:`.profile`: profile a script (one process or one worker of a multi-worker job): capture, build
  the report once, store it.
- :mod:`.build`: a report from a run directory or any trace.
- :mod:`.fix_loop`: the one fix loop.
- :mod:`.kernel`: fixes applied and reverted in a live kernel (the notebook's measurer).
- :mod:`.distributed`: multi-worker orchestration and on-demand capture from profiler servers.
"""
