"""Lanes: analyzers made of analyzers, each itself an
:class:`~workers.analyzer.apis.model_api.Analyzer`, so a processor asks one analyzer
whatever stands behind it.

* :mod:`~workers.analyzer.lanes.fallback`: a second model asked when the first cannot be
  (exhausted, held until released, down, its breaker open), before the rules;
* :mod:`~workers.analyzer.lanes.shadow`: a model asked beside the live one about a
  fraction of messages, off the message's path, its verdicts written to a stream of
  their own and never deciding;
* :mod:`~workers.analyzer.lanes.configured`: the lanes the settings describe
  (``SENTINEL_ANALYZER_FALLBACK_*``, ``SENTINEL_ANALYZER_SHADOW_*``).
"""
