"""GL000 and GL9xx: findings about the file itself (it does not parse) and about gpulint's own
comments, rather than about training code."""
