"""Building images: generated files, locks, the docker build itself, the offline base, sizes, SBOMs, clean-up."""
