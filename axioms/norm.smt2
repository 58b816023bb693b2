; LayerNorm (normalizes the last dimension) and BatchNorm (normalizes each
; channel, dimension 1, over the others): their parallel forms. Domain: both
; sides legal, plus the conditions stated. Replicate is introduced only on
; unreplicated operands (its copies go after existing slots).

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
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (k Int))
  (=> (and (= (rep x) 1) (= (rep g) 1) (= (rep b) 1))
      (= (replicate (layer_norm_affine x g b e) k) (layer_norm_affine (replicate x k) (replicate g k) (replicate b k) e)))) :named layer_norm_affine_replicate))

; BatchNorm: only the channel dimension splits, with gamma and beta.
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (k Int))
  (= (repartition (batch_norm x g b e) 1 k) (batch_norm (repartition x 1 k) (repartition g 0 k) (repartition b 0 k) e))) :named batch_norm_channel_split))
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (k Int))
  (= (batch_norm (combine x 1 k) (combine g 0 k) (combine b 0 k) e) (combine (batch_norm x g b e) 1 k))) :named batch_norm_channel_combine))
(assert (! (forall ((x Tensor) (g Tensor) (b Tensor) (e Int) (k Int))
  (=> (and (= (rep x) 1) (= (rep g) 1) (= (rep b) 1))
      (= (replicate (batch_norm x g b e) k) (batch_norm (replicate x k) (replicate g k) (replicate b k) e)))) :named batch_norm_replicate))
