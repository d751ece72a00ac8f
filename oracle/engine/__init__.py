"""The engine every allocator family runs on: execution and probes (``core``), the call table
row (``call``), traces, runs, replay, minimization, pytest repros, the family registry."""
