"""GL1xx: the input pipeline -- how batches get from storage to the GPU."""
