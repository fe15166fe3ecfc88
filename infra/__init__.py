"""Memstack's AWS infrastructure (CDK v2, Python): one construct per concern, composed by ``MemstackStack``.

``storage`` (DynamoDB table + bodies bucket), ``secrets`` (the OpenAI key), ``search`` (OpenSearch
Serverless collection or managed domain, and the index), ``functions`` (api, context, indexer), ``api``
(REST API), ``observability`` (alarms, dashboard). ``config`` reads the CDK context flags; ``bundling``
builds the Lambda code locally with pip (no Docker); ``environment`` builds function environments from
``memstack.settings.env_names()``.
"""
