class Split: pass
