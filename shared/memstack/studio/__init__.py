"""Memstack Studio: a web page for looking into a resource's memory — threads and messages, working
memory, observations, a recall playground, what the model sees, index health — over the HTTP API.

The page is plain HTML, JavaScript and CSS shipped in this package (``static/``; no CDN, no build step). It
calls the API at its own origin (``/v1/…``), so it needs no backend of its own: ``memstack serve`` answers
``/studio/…`` beside the API (``studio_response``), and ``memstack studio --url`` serves the same files
and forwards ``/v1/…`` to a deployed API, signing each request (``memstack.studio.proxy``).
"""

from memstack.studio.assets import STUDIO_PATH, studio_response

__all__ = ["STUDIO_PATH", "studio_response"]
