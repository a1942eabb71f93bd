"""Live state every process shares through Redis: sessions, the control channel, doorbells,
per-client quotas, counters and their samples."""
