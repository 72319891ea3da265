"""Models: node encoders, the sentence model (node encoder -> zoo encoder -> head), heads, CRF marginals."""
