"""The web interface at ``/web``: see, search, correct and trust the memory in a browser.

Server-rendered (Jinja2, autoescaped) with one small script of our own
(``static/app.js``: live updates over SSE and confirmation prompts); every screen works
without it, from the keyboard, and nothing is fetched from another origin. Modules:

* ``session`` — cookies, CSRF, the login rate limit; ``login`` — log in/out;
* ``projects`` — projects, a project's brief, the page tree;
* ``pages`` — a page, its history/diff/restore, edit (preview, conflict), delete, feedback;
* ``profile`` — the signed-in user's profile memory (an admin: any user's);
* ``search`` — search with explain; ``activity`` — sessions, timelines, handoffs, messages;
* ``admin`` — pending writes, lint, status, audit; ``events`` — live updates (SSE);
* ``render`` — templates, inert markdown, security headers; ``diff`` — line diffs.

``site.install(app, settings)`` adds the routes, static files and the HTML error pages;
the query lifespan starts the live-update hub (``hub.EventHub``, on the context) once the
bus is up.
"""
