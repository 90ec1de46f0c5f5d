"""The `barca` command: parse arguments, call the layers, render what they return."""
