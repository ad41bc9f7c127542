"""The commands a user runs (run and stream, load, re-sync, status, as-of, verify, changes), one
module each, with their pure rules beside them."""
