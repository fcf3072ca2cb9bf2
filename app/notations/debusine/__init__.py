"""debusine's notations: worker metadata and the task requirements matched against it."""
