"""Fixes: how rules describe them (builders), how they are applied (fixer), and the fix loop (passes)."""
