"""The campaign and grid files gsd ships (installed as the package ``gsd._simulations``; read by ``gsd.resources``)."""
