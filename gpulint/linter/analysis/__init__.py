"""Per-file analyses: parsing, the one walk, and everything rules ask about a file (FileContext)."""
