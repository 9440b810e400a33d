"""Model families. Each family folder holds a configuration and a modeling file in the
transformers layout; those files import only torch, transformers and each other, so they can be
shipped as Hub remote code."""
