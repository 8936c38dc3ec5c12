"""Services: every write the engine makes (keyword-only, typed, transactional)."""
