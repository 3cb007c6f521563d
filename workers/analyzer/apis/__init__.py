"""The analyzer's APIs: one small protocol (:class:`~workers.analyzer.apis.model_api.ModelApi`:
the request's path, headers and body, and how a 2xx reply becomes a verdict) and one module
per API that speaks it (the platform's own ``sentinel`` contract, OpenAI's Chat Completions,
Anthropic's Messages), with what a model's context allows
(:mod:`~workers.analyzer.apis.context_window`). Nothing here sends a request: the call is
:class:`~workers.analyzer.exchange.Exchange`'s."""
