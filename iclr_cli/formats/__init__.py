"""Format adapters: one module per on-disk transcript format, found through :mod:`registry`."""
