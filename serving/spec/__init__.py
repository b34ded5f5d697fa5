"""The model deployment spec: a profile parsed into one frozen, typed object (`profile`), its
sections (`parts`, `lora`), the names derived from it, the secrets and limits it must respect, and
how user files are read (`loading`)."""
