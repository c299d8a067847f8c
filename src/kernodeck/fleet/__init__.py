"""Fleet verify: every rank of a torch.distributed job verifies its own environment, the ranks
exchange per-layer digests over the job's store, and rank 0 reports what differs, by node, host and
rank. `facts` (what a rank says), `exchange` (the protocol, with deadlines), `compare` (the fleet
report), `run` (the command and `require(fleet=True)`)."""
