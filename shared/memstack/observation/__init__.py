"""Observational memory (spec §2.9): an Observer compresses old messages into a dated observation log and
a Reflector rewrites the log when it grows.

Modules, one job each: ``prompts`` (Observer, Reflector, context and title texts), ``parsing`` (model
output parsing, degenerate-output detection, the actor's view of observations), ``transcript`` (messages
as the Observer reads them, in batches under a token cap), ``temporal`` (temporal-gap markers) and
``titles`` (thread titles).
"""
