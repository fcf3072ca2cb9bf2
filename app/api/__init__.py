"""The HTTP service: the FastAPI application, its middleware (token gate, limits, the
express lane), problem+json errors, and the routes, schemas and web console below; routes
call the services of app.matching and hold no SQL."""
