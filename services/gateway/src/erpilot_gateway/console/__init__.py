"""The web console (``GET /``) and the approval page (``GET /resume/{pending_id}``), served by the gateway.

No build step and no network: Jinja2 templates (autoescaped) render the pages, plain ES modules and one
stylesheet under ``static/`` add the live parts, and every console response carries a strict
Content-Security-Policy (scripts only from ``/console/static``; no inline script or style).
"""

from erpilot_gateway.console.routes import router

__all__ = ["router"]
