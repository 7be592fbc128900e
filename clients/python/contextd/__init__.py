"""contextd for Python: generated stubs (contextd.v1, contextd.health.v1), a typed SessionService
client (contextd.Client) and an engine SDK (contextd.engine)."""
