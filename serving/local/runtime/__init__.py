"""A local Ray on the CPU running a model's compiled application: the application made
runnable (`app`), start and stop (`local_ray`), ports, places, cleanup and progress."""
