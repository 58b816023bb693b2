; LayerNorm (normalizes the last dimension) and BatchNorm (normalizes each
; channel, dimension 1, over the others; or over groups of samples), its
; parts BatchSum, BatchSquares and BatchNormApply: their parallel forms. Domain: both
; sides legal, plus the conditions stated. Replicate is introduced only on
; unreplicated operands (its copies go after existing slots), except in
; layer_norm_affine_replicate_copies, whose gamma and beta slots all hold
; the same values, so that no pairing of slots can tell them apart.

; LayerNorm: any dimension but the last splits; gamma and beta are copied.
(assert (! (forall ((x Tensor) (e Int) (d Int) (k Int))
  (=> (< d (- (rank x) 1)) (= (layer_norm (repartition x d k) e) (repartition (layer_norm x e) d k)))) :named layer_norm_repartition))
(assert (! (forall ((x Tensor) (e Int) (d Int) (k Int))
  (=> (< d (- (rank x) 1)) (= (layer_norm (combine x d k) e) (combine (layer_norm x e) d k)))) :named layer_norm_combine))
(assert (! (forall ((x Tensor) (e Int) (k Int)) (= (layer_norm (replicate x k) e) (replicate (layer_norm x e) k))) :named layer_norm_replicate))
(assert (! (forall ((x Tensor) (y Tensor) (e Int) (a Int))
  (=> (and (<= 0 a) (< a (- (rank x) 1))) (= (layer_norm (concat x y a) e) (concat (layer_norm x e) (layer_norm y e) a)))) :named layer_norm_concat))
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (d Int) (k Int))
  (=> (and (< d (- (rank x) 1)) (= (rep g) 1) (= (rep b) 1))
      (= (repartition (layer_norm_affine x g b e) d k) (layer_norm_affine (repartition x d k) (replicate g k) (replicate b k) e)))) :named layer_norm_affine_data_parallel_split))
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (d Int) (k Int))
  (=> (and (< d (- (rank x) 1)) (= (rep g) 1) (= (rep b) 1))
      (= (layer_norm_affine (combine x d k) g b e) (combine (layer_norm_affine x (replicate g k) (replicate b k) e) d k)))) :named layer_norm_affine_data_parallel))
; Copies of copies: slot c of each operand becomes slots c*k .. c*k+k-1 of
; all three alike, so the norm's slots pair up as before.
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (k Int))
  (=> (and (= (rep g) (rep x)) (= (rep b) (rep x)))
      (= (replicate (layer_norm_affine x g b e) k) (layer_norm_affine (replicate x k) (replicate g k) (replicate b k) e)))) :named layer_norm_affine_replicate))
; Copies of a norm whose gamma and beta are copies of one tensor each (its
; samples split, gamma and beta copied to each task): every slot of gamma
; and beta holds the same values, so whatever slot a task of the copied
; norm reads, it reads them (Megatron-LM's norms on every device of a
; tensor-parallel group, beside data parallelism).
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (m Int) (k Int))
  (=> (and (= (rep g) 1) (= (rep b) 1))
      (= (replicate (layer_norm_affine x (replicate g m) (replicate b m) e) k)
         (layer_norm_affine (replicate x k) (replicate (replicate g m) k) (replicate (replicate b m) k) e)))) :named layer_norm_affine_replicate_copies))

; BatchNorm: the channel dimension splits, with gamma and beta (whatever
; its statistics group).
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (gr Int) (k Int))
  (= (repartition (batch_norm x g b e gr) 1 k) (batch_norm (repartition x 1 k) (repartition g 0 k) (repartition b 0 k) e gr))) :named batch_norm_channel_split))
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (gr Int) (k Int))
  (= (batch_norm (combine x 1 k) (combine g 0 k) (combine b 0 k) e gr) (combine (batch_norm x g b e gr) 1 k))) :named batch_norm_channel_combine))
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (gr Int) (k Int))
  (=> (and (= (rep x) 1) (= (rep g) 1) (= (rep b) 1))
      (= (replicate (batch_norm x g b e gr) k) (batch_norm (replicate x k) (replicate g k) (replicate b k) e gr)))) :named batch_norm_replicate))
; Statistics over groups of gr samples: the batch splits in whole groups
; (the degree inference admits only degrees dividing the group count).
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (gr Int) (k Int))
  (=> (and (> gr 0) (= (rep g) 1) (= (rep b) 1))
      (= (repartition (batch_norm x g b e gr) 0 k) (batch_norm (repartition x 0 k) (replicate g k) (replicate b k) e gr)))) :named batch_norm_groups_split))
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (gr Int) (k Int))
  (=> (and (> gr 0) (= (rep g) 1) (= (rep b) 1))
      (= (batch_norm (combine x 0 k) g b e gr) (combine (batch_norm x (replicate g k) (replicate b k) e gr) 0 k)))) :named batch_norm_groups_combine))

; Synchronized statistics: BatchNorm over the whole batch is its statistics
; applied, taken in two passes (the sum, then the squares about the mean).
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int))
  (= (batch_norm x g b e 0) (batch_norm_apply x (batch_sum x) (batch_squares x (batch_sum x)) g b e))) :named batch_norm_is_statistics_applied))
; Sums split along any dimension but the channels: partial sums, reduced
; (the squares with the whole tensor's sum copied). For an x split, if at
; all, only by channels (another split would already give partial sums,
; ordered differently).
(assert (! (forall ((x Tensor) (d Int) (k Int))
  (=> (and (not (= d 1)) (= (rep x) 1) (= (* (deg x 0) (deg_after x 1)) 1))
      (= (reduce (batch_sum (repartition x d k)) k) (batch_sum x)))) :named batch_sum_split))
(assert (! (forall ((x Tensor) (s Tensor) (d Int) (k Int))
  (=> (and (not (= d 1)) (= (rep x) 1) (= (rep s) 1) (= (* (deg x 0) (deg_after x 1)) 1))
      (= (reduce (batch_squares (repartition x d k) (replicate s k)) k) (batch_squares x s)))) :named batch_squares_split))
(assert (! (forall ((x Tensor) (d Int) (k Int))
  (=> (and (not (= d 1)) (= (rep x) 1) (= (deg x d) k) (= (* (deg x 0) (deg_after x 1)) k))
      (= (batch_sum (combine x d k)) (reduce (batch_sum x) k)))) :named batch_sum_combine))
(assert (! (forall ((x Tensor) (s Tensor) (d Int) (k Int))
  (=> (and (not (= d 1)) (= (rep x) 1) (= (rep s) 1) (= (deg x d) k) (= (* (deg x 0) (deg_after x 1)) k))
      (= (batch_squares (combine x d k) s) (reduce (batch_squares x (replicate s k)) k)))) :named batch_squares_combine))
(assert (! (forall ((x Tensor) (k Int))
  (= (repartition (batch_sum x) 0 k) (batch_sum (repartition x 1 k)))) :named batch_sum_channel_split))
(assert (! (forall ((x Tensor) (s Tensor) (k Int))
  (= (repartition (batch_squares x s) 0 k) (batch_squares (repartition x 1 k) (repartition s 0 k)))) :named batch_squares_channel_split))
; The same, gathering the channels back.
(assert (! (forall ((x Tensor) (k Int))
  (= (batch_sum (combine x 1 k)) (combine (batch_sum x) 0 k))) :named batch_sum_channel_combine))
(assert (! (forall ((x Tensor) (s Tensor) (k Int))
  (= (batch_squares (combine x 1 k) (combine s 0 k)) (combine (batch_squares x s) 0 k))) :named batch_squares_channel_combine))
; Applying given statistics: any dimension but the channels splits with the
; statistics, gamma and beta copied; the channels split with all of them.
(assert (! (forall ((x Tensor) (s Tensor) (q Tensor) (g Tensor) (b Tensor) (e Int) (d Int) (k Int))
  (=> (and (not (= d 1)) (= (rep s) 1) (= (rep q) 1) (= (rep g) 1) (= (rep b) 1))
      (= (repartition (batch_norm_apply x s q g b e) d k)
         (batch_norm_apply (repartition x d k) (replicate s k) (replicate q k) (replicate g k) (replicate b k) e)))) :named batch_norm_apply_split))
(assert (! (forall ((x Tensor) (s Tensor) (q Tensor) (g Tensor) (b Tensor) (e Int) (d Int) (k Int))
  (=> (and (not (= d 1)) (= (rep s) 1) (= (rep q) 1) (= (rep g) 1) (= (rep b) 1))
      (= (batch_norm_apply (combine x d k) s q g b e)
         (combine (batch_norm_apply x (replicate s k) (replicate q k) (replicate g k) (replicate b k) e) d k)))) :named batch_norm_apply_combine))
(assert (! (forall ((x Tensor) (s Tensor) (q Tensor) (g Tensor) (b Tensor) (e Int) (k Int))
  (= (repartition (batch_norm_apply x s q g b e) 1 k)
     (batch_norm_apply (repartition x 1 k) (repartition s 0 k) (repartition q 0 k) (repartition g 0 k) (repartition b 0 k) e))) :named batch_norm_apply_channel_split))
