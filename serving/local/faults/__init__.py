"""Fault runs on the local data plane: the runs (`runs`), what they do to Ray (`actions`), the
load they carry (`load`) and their sessions in processes of their own (`sessions`)."""
