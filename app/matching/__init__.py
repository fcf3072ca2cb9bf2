"""The rules engine: the stages every family passes through (requests, categories, misfits,
candidates, explain) at this level, the services the API calls beside them, and one
package per family (momotor, flux, allocation, gridengine, debusine) plus dispatch."""
