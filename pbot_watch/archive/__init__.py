"""Records on disk: atomic writes, where records live, merging with what another writer left."""
