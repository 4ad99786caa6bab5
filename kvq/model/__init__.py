"""The pure decision core of the Strimzi proposal: no I/O, every time is an argument."""
