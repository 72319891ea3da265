"""Models: node encoders, sentence encoders and heads."""
