"""GL2xx: host-device synchronisation -- the CPU waiting for the GPU inside the step."""
