"""The version matrix (images/matrix.toml) and the facts derived from it: upstream tested builds, driver floors, labels, the README table."""
