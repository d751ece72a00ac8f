"""The unified full + Mamba family: SGLang's ``UnifiedMambaTokenToKVPoolAllocator`` contract."""
