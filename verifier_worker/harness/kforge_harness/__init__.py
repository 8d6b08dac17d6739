"""kforge's verifier harness: the Python side of the five-stage funnel.

Processes (all started or forked on behalf of the C++ verifier worker):
  zygote.py            trusted, single-threaded, torch imported, CUDA untouched;
                       runs stage 1 (static_check.py) and forks candidate children
  candidate_runner.py  one forked child per candidate, sandboxed (sandbox.py)
                       before the candidate's code loads
  reference_server.py  trusted and long-lived; never sees candidate code; makes
                       inputs and reference outputs and times the baselines
Messages between them are frames (protocol.py); tensors travel as raw bytes.
"""
