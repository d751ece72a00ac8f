"""The Mamba state-slot family (``--family mamba_slot``): SGLang's ``MambaSlotAllocator`` and
kvpool's own judged against :class:`kvpool.spec.mamba_slots.MambaSlotModel` (``MSLOT-*``)."""
