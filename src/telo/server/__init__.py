"""``telo ui``: an operator dashboard over a journal (docs/dashboard.md).

Needs the ``ui`` extra (Starlette, uvicorn, Jinja2); nothing else in telo imports this package, so telo runs
without it. :func:`telo.server.app.create_app` builds the ASGI application, :func:`telo.server.serve.serve`
runs it with uvicorn.
"""
