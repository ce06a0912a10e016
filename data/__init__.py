"""The data gsd ships (installed as the package ``gsd._data``; see README.md here and ``gsd.resources``)."""
