"""The web console: server-rendered pages under /ui (docs/console.md)."""
