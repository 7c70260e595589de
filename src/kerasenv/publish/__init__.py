"""Publishing: image tags, push and pull through a registry."""
