"""The API's routes, one module per resource: each declares its operations (path, id,
summary, the errors it can return) and calls a service of app.matching."""
