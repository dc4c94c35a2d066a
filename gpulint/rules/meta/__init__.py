"""GL9xx: findings about gpulint's own comments rather than about training code."""
