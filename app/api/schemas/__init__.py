"""The request and response bodies of the HTTP API, one module per resource; common.py
holds the field types and envelopes every router shares."""
