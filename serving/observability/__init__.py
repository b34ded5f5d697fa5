"""What servestack reads of a running service: metric names and where each comes from
(`metrics`), and `servestack top` (`top`)."""
