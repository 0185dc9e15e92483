"""The plain-PyTorch CS336 reference (cs336_lm) and the parity check, for the bench scripts:
`from reference import cs336_lm` with bench/ on sys.path."""
