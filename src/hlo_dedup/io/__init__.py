"""Reading and writing modules: HLO text, and HloModuleProto/HloProto/HloSnapshot."""
