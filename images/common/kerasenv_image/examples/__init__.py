"""Scripts that show a way to train with the image that the smoke training does not take."""
