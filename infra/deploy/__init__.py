"""The Pulumi program and its components: registration only."""
