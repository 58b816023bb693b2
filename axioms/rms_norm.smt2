; RMSNorm: statistics over the last dimension only, so every other
; dimension splits (and the replica slots copy) with gamma copied to each
; task. The last dimension cannot split: a shard's mean square is not the
; row's. Domain: gamma unreplicated where it is replicated by the rule.

(assert (! (forall ((x Tensor) (g Tensor) (e Int) (d Int) (k Int))
  (=> (and (< d (- (rank x) 1)) (= (rep g) 1))
      (= (repartition (rms_norm x g e) d k) (rms_norm (repartition x d k) (replicate g k) e)))) :named rms_norm_data_parallel_split))
(assert (! (forall ((x Tensor) (g Tensor) (e Int) (d Int) (k Int))
  (=> (and (< d (- (rank x) 1)) (= (rep g) 1))
      (= (rms_norm (combine x d k) g e) (combine (rms_norm x (replicate g k) e) d k)))) :named rms_norm_data_parallel))
; Copies of a norm whose gamma is copies of one tensor (its samples split,
; gamma copied to each task): every slot of gamma holds the same values,
; so whatever slot a task of the copied norm reads, it reads them
; (Megatron-LM's norms on every device of a tensor-parallel group, beside
; data parallelism).
(assert (! (forall ((x Tensor) (g Tensor) (e Int) (m Int) (k Int))
  (=> (= (rep g) 1)
      (= (replicate (rms_norm x (replicate g m) e) k) (rms_norm (replicate x k) (replicate (replicate g m) k) e)))) :named rms_norm_replicate_copies))
(assert (! (forall ((x Tensor) (g Tensor) (e Int) (k Int))
  (=> (and (= (rep x) 1) (= (rep g) 1))
      (= (replicate (rms_norm x g e) k) (rms_norm (replicate x k) (replicate g k) e)))) :named rms_norm_replicate))
; The same for unsplit operands with equal slots of their own: each task
; is one slot's norm, however Replicate orders the copies.
(assert (! (forall ((x Tensor) (g Tensor) (e Int) (k Int))
  (=> (and (= (deg_after x (- 1)) 1) (= (deg_after g (- 1)) 1) (= (rep g) (rep x)) (= (rep (rms_norm x g e)) (rep x)))
      (= (replicate (rms_norm x g e) k) (rms_norm (replicate x k) (replicate g k) e)))) :named rms_norm_replicate_slotwise))
