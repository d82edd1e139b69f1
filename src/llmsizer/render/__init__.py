"""Renderers: turn result objects into text or JSON. They compute nothing."""
