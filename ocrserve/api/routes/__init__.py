"""The HTTP routes, one APIRouter module per area; `app.py` includes them."""
