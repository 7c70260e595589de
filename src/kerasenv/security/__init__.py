"""Security currency: Debian updates applied at build time, and `kerasenv audit`."""
