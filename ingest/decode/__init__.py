"""Pure decoders: bytes and wire text -> our model. No Spark here."""
